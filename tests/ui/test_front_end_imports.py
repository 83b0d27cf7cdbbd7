"""The front ends import downwards only (issue 34): the App owns navigation, screens never import
each other or the App, the ui never imports the CLI, and `record` never imports the CLI.

Read from the source with ``ast`` (every import, at module level or inside a function), not from
``sys.modules``: an import inside a function is an arrow too."""
import ast
from pathlib import Path

import tracetui

PKG = Path(tracetui.__file__).parent
SCREENS = ("explorer", "loading", "modals", "diff_view", "job_view")
"""The ui modules that define a Screen: none of them imports another, or app.py."""


def imports(path: Path) -> set[str]:
    """Every tracetui module ``path`` imports (``from tracetui.x import y`` counts as x and x.y)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("tracetui")}


def module_of(path: Path) -> str:
    return ".".join(("tracetui",) + path.relative_to(PKG).with_suffix("").parts)


def test_screens_never_import_each_other_or_the_app():
    for name in SCREENS:
        got = imports(PKG / "ui" / f"{name}.py")
        others = {f"tracetui.ui.{o}" for o in SCREENS + ("app",) if o != name}
        assert not got & others, f"ui/{name}.py imports {sorted(got & others)}"


def test_the_ui_and_record_never_import_the_cli():
    for folder in ("ui", "record"):
        for path in sorted((PKG / folder).glob("*.py")):
            bad = {m for m in imports(path) if m == "tracetui.cli" or m.startswith("tracetui.cli.")}
            assert not bad, f"{folder}/{path.name} imports {sorted(bad)}"


def test_no_import_circle_among_the_front_ends():
    """cli -> cli/ranks -> cli/main and cli -> ui/app -> cli/ranks were circles; none is left in
    cli/, ui/ and record/ (a depth-first search over the module graph finds any cycle)."""
    files = [p for f in ("cli", "ui", "record") for p in sorted((PKG / f).glob("*.py"))]
    graph = {module_of(p): imports(p) for p in files}
    mods = set(graph)
    graph = {m: {d for d in deps if d in mods and d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d):] + [m, d]))
            if d not in state:
                visit(d, stack + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert len(state) == len(files) > 10  # every module of the three folders was walked
