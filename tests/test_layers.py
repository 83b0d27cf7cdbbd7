"""The layout is the architecture: stages import only the stages below them, and no module imports
itself back through a circle. Walks every import in tracetui/ with `ast` (module level and inside
functions alike: a lazy import is still an arrow), so a wrong arrow fails here, not in review.

The order (docs/ARCHITECTURE.md): leaves (textsafe, atomic, shorten, quiet) <- read <- model <- compare, jobs <-
report <- cli, ui, mcp, record. workloads and kernels stand beside the stages: they make traces and
run kernels, and may use the stages, but no stage imports them (except the front ends that launch them).
"""
import ast
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "tracetui"

RANK = {
    "__init__": 0, "textsafe": 0, "atomic": 0, "shorten": 0, "quiet": 0,
    "read": 1, "model": 2, "compare": 3, "jobs": 3, "report": 4,
    "cli": 5, "ui": 5, "mcp": 5, "record": 5, "__main__": 6,
}
"""Lower stages may not import higher ones. Stages of equal rank may not import each other, except a
front end (rank 5) that hands over to another the way the user would (see FRONT_END_EDGES)."""

FRONT_END_EDGES = {("cli", "ui"), ("cli", "mcp"), ("cli", "record")}
"""The command line opens the app, starts the MCP server and the recorder: those arrows are the
dispatch itself. No arrow goes back (ui, mcp and record never import cli)."""

SIDE = {"workloads", "kernels"}
"""Trace makers and kernels: the front ends may launch them; no analysis stage may import them."""


def _stage(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, mod: str) -> set[str]:
    """Every tracetui module `path` imports, relative imports resolved."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("tracetui")}
        elif isinstance(node, ast.ImportFrom):
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tracetui"):
                continue
            for a in node.names:  # `from pkg import module` names a module, not only the package
                sub = f"{target}.{a.name}"
                out.add(sub if _exists(sub) else target)
    return out


def _exists(mod: str) -> bool:
    p = PKG.parent / Path(*mod.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    g = {}
    for path in PKG.rglob("*.py"):
        mod = _module_name(path)
        g[mod] = {m for m in _imports(path, mod) if m != mod}
    return g


def test_no_import_against_the_order():
    bad = []
    for mod, deps in _graph().items():
        src = _stage(mod)
        for dep in deps:
            dst = _stage(dep)
            if src == dst or dst in ("__init__",):
                continue
            if dst in SIDE:
                if RANK.get(src, 0) < 5 and src not in SIDE:
                    bad.append(f"{mod} -> {dep} (an analysis stage imports a trace maker)")
                continue
            if src in SIDE:
                continue
            rs, rd = RANK[src], RANK[dst]
            if rd > rs or (rd == rs and (src, dst) not in FRONT_END_EDGES):
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the order read <- model <- compare, jobs <- report <- front ends:\n" + \
        "\n".join(sorted(bad))


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle to break."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    g = _graph()
    # a package's __init__ re-exporting its own modules is not a circle of the architecture
    for mod in list(g):
        g[mod] = {d for d in g[mod] if not (d.startswith(mod + ".") or mod.startswith(d + ".") and
                                             d.count(".") == 1)}
    circles = _cycles(g)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def _defines_screen(path: Path) -> bool:
    """True when the module defines a class whose base is a Textual Screen (Screen, ModalScreen[...])."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                name = ast.unparse(b)
                if name.split("[")[0].endswith("Screen"):
                    return True
    return False


def test_screens_never_import_each_other():
    """The App owns navigation: a screen module never imports another screen module or the app."""
    screens = {p.stem for p in (PKG / "ui").glob("*.py") if p.stem != "app" and _defines_screen(p)}
    bad = []
    for s in screens:
        deps = _imports(PKG / "ui" / f"{s}.py", f"tracetui.ui.{s}")
        for d in deps:
            stem = d.rsplit(".", 1)[-1]
            if d.startswith("tracetui.ui.") and (stem in screens or stem == "app") and stem != s:
                bad.append(f"{s} -> {stem}")
    assert not bad, bad


@pytest.mark.parametrize("stage", ["read", "model", "compare", "jobs", "report"])
def test_no_long_functions_where_the_logic_lives(stage):
    """No function over 80 lines and no file over 600 in the analysis stages and report/ (issues 34, 43)."""
    long = []
    for path in (PKG / stage).glob("*.py"):
        src = path.read_text(encoding="utf-8")
        if len(src.splitlines()) > 600:
            long.append(f"{path.name}: {len(src.splitlines())} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long.append(f"{path.name}:{node.lineno} {node.name}() {n} lines")
    assert not long, long
