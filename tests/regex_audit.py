"""Every regex the package runs, against adversarial 20k-character text, timed (issue 44, item 2).

Run as ``python -m tests.regex_audit`` (``tests/test_regex_audit.py`` runs it in a subprocess
under a time limit, so a catastrophic pattern fails the test instead of hanging it). Each line of
output is one pattern: ``OK``/``SLOW`` with its worst input and timings; a pattern is announced
(``TRY``) before it runs, so a hang names its pattern.

How patterns are found, independently of the code that uses them:
- the source of every module is parsed: each ``re.<fn>(pattern, ...)`` call with a literal
  pattern is audited as written (with literal flags);
- every module is imported and its globals walked (tuples, lists, dicts, dataclasses): every
  compiled pattern found is audited (rule tables, compiled at import);
- a call whose pattern is built at run time must be listed in ``DYNAMIC`` below with how to
  build the patterns it can make; an unlisted one is reported as ``UNAUDITED`` (a failure).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import re
import sys
import time
from pathlib import Path

import tracetui

ROOT = Path(tracetui.__file__).parent
N = 20_000
"""Length of every adversarial text."""
RE_FUNCS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"}
FLAGS = {"I": re.I, "IGNORECASE": re.I, "M": re.M, "MULTILINE": re.M, "S": re.S, "DOTALL": re.S,
         "X": re.X, "VERBOSE": re.X, "A": re.A, "ASCII": re.A}
SLOW_S = 1.0
"""One call on 20k characters taking this long is a failure whatever its growth."""
GROWTH = 8.0
"""Time at 20k over time at 5k: linear is ~4, quadratic ~16. Checked only above ``FLOOR_S``."""
FLOOR_S = 0.02


def _dynamic() -> dict[tuple[str, str], tuple[str, object]]:
    """(file, function) of a call whose pattern is built at run time -> (what builds it, the
    patterns it can make: a callable returning them, or None where the module walk holds them)."""
    from tracetui.model import names, opportunities, probes, taxonomy
    from tracetui.jobs import index_folder, tables

    def probe_patterns():
        out = []
        for rule in taxonomy.TABLE:
            if rule.on == "name":
                out += [p[1] for p in probes.compile_probes(taxonomy._lowered(rule.pattern))
                        if isinstance(p[1], re.Pattern)]
        return out
    return {
        ("model/probes.py", "compile_probes"): ("the name rules' top-level branches (taxonomy's probes)",
                                                probe_patterns),
        ("model/serving.py", "<module>"): ("ENGINE_RULES, compiled at import", None),
        ("model/steps.py", "_named_steps"): ("the user's own --steps regex: theirs to keep linear", lambda: []),
        ("cli/common.py", "load_opts"): ("the user's --steps regex, compiled to check it", lambda: []),
        ("model/taxonomy.py", "_compile"): ("the rule table, compiled at import into _COMPILED", None),
        ("model/taxonomy.py", "compiled"): ("the name rules in _COMPILED, compiled at their first search",
                                            lambda: [rx.compiled for _r, rx in taxonomy._COMPILED
                                                     if not isinstance(rx, re.Pattern)]),
        ("model/opportunities.py", "<module>"): ("DTYPE_BYTES, compiled at import into _DTYPES", None),
        ("read/repair.py", "<module>"): ("_NAME_END, literal pieces and _EVENT_KEYS, compiled at import", None),
        ("model/opportunities.py", "_hint_bytes"):
            ("KERNEL_DTYPES tokens", lambda: [re.compile(rf"\b{re.escape(t)}\b") for t, _ in
                                              opportunities.KERNEL_DTYPES]),
        ("model/opportunities.py", "nominal_bandwidth"):
            ("NOMINAL_GBPS device patterns", lambda: [re.compile(rx) for rx, *_ in opportunities.NOMINAL_GBPS]),
        ("model/names.py", "decode_kernel"):
            ("_DTYPES words", lambda: [re.compile(rf"(?:^|_){d}(?:_|$)") for d in names._DTYPES]),
        ("jobs/index_folder.py", "_version_re"): ("an index's own name, escaped",
                                                  lambda: [index_folder._version_re("x" * 200)]),
        ("jobs/index_folder.py", "_litter_re"): ("an index's own name, escaped",
                                                 lambda: [index_folder._litter_re("x" * 200)]),
        ("model/steps.py", "choose_steps"): ("the user's own --steps regex: theirs to keep linear", lambda: []),
        ("cli/main.py", "_load_opts"): ("the user's --steps regex, compiled to check it", lambda: []),
        ("record/launcher.py", "run_record"): ("the user's --steps regex, compiled to check it", lambda: []),
        ("record/boot.py", "_install_steps"): ("the user's --steps regex, run on their own record_function names",
                                               lambda: []),
    }


MODES = {"compile": ("search", "fullmatch"), "search": ("search",), "match": ("match",),
         "fullmatch": ("fullmatch",), "sub": ("findall",), "subn": ("findall",), "split": ("findall",),
         "findall": ("findall",), "finditer": ("findall",)}
"""What each call runs (a compiled pattern: searched or fully matched, as its users do)."""


def _flags(call: ast.Call) -> int | None:
    node = call.args[1] if call.func.attr in ("compile",) and len(call.args) > 1 else None
    for kw in call.keywords:
        if kw.arg == "flags":
            node = kw.value
    if node is None:
        return 0
    total = 0
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and part.attr in FLAGS:
            total |= FLAGS[part.attr]
    return total


def literal_calls() -> tuple[list[tuple[str, re.Pattern, tuple]], list[tuple[str, str, int, str]]]:
    """(where, pattern, modes) of every literal pattern in the source; (file, function, line, source)
    of the others."""
    found, dynamic = [], []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for scope, node in _calls(ast.parse(path.read_text(encoding="utf-8")), "<module>"):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in RE_FUNCS and node.args):
                continue
            arg = node.args[0]
            try:
                pattern = ast.literal_eval(arg)
            except ValueError:
                pattern = _concat(arg)
            if isinstance(pattern, (str, bytes)):
                flags = _flags(node)
                if node.func.attr != "compile" and len(node.args) > 3:
                    flags = None  # positional flags of sub/split: rare; audited without them
                found.append((f"{rel}:{node.lineno}", re.compile(pattern, flags or 0), MODES[node.func.attr]))
            else:
                dynamic.append((rel, scope, node.lineno, ast.unparse(arg)))
    return found, dynamic


def _calls(node, scope):
    """(enclosing function's name, call) of every call under ``node``."""
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        if isinstance(child, ast.Call):
            yield scope, child
        yield from _calls(child, inner)


def _concat(node):
    """A pattern written as literal pieces joined with ``+`` (``rb'..' + NAME + rb'..'`` is not)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _concat(node.left), _concat(node.right)
        return a + b if type(a) is type(b) and isinstance(a, (str, bytes)) else None
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) else None


def module_patterns() -> list[tuple[str, re.Pattern, tuple]]:
    """Every compiled pattern held by a module's globals, however deep in tables."""
    out, seen = [], set()
    for info in pkgutil.walk_packages([str(ROOT)], "tracetui."):
        if info.name.endswith("__main__"):
            continue  # runs the CLI when imported
        try:
            mod = importlib.import_module(info.name)
        except Exception:   # an optional dependency (torch for record/workloads): the source scan covers it
            continue
        for attr, value in list(vars(mod).items()):
            for rx in _walk(value, depth=0):
                key = (rx.pattern, rx.flags)
                if key not in seen:
                    seen.add(key)
                    out.append((f"{info.name}.{attr}", rx, MODES["compile"]))
    return out


def _walk(value, depth):
    if depth > 4:
        return
    if isinstance(value, re.Pattern):
        yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for v in value:
            yield from _walk(v, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name, None), depth + 1)


BASE = "0 9 a x _ - . , : ; # / ( ) < > [ ] { } \" ' \\ @ = + * |".split() + [" ", "\t", "\n", "٣"]


def texts(rx: re.Pattern, n: int) -> list[str]:
    """Adversarial texts of length ~n for ``rx``: runs of one character (``BASE`` and the pattern's own
    literal characters), of a digit, ``_`` or space alternating with each of those, of each word the
    pattern names (alone and followed by ``_``); for an anchored pattern, each word followed by a run
    of one character. Each ends in a character nothing expects."""
    src = rx.pattern.decode("latin-1") if isinstance(rx.pattern, bytes) else rx.pattern
    lits = sorted({c for c in src if c.isprintable() and c not in "^$?*+{}|\\"} | set(BASE))
    plain = re.sub(r"\\[dwsbDWSBAZ]", " ", src)
    words = sorted(set(re.findall(r"[A-Za-z0-9_:#]{2,}", plain)))[:30]
    units = lits + [a + b for a in ("0", "_", " ") for b in lits if a != b] + words + [w + "_" for w in words]
    out = [u * (n // len(u)) + "!" for u in units]
    if "^" in src or "\\A" in src:
        out += [w + c * (n - len(w)) + "\x00" for w in words[:8] for c in lits]
    return out


def _time(rx: re.Pattern, modes: tuple, inputs: list) -> tuple[float, int]:
    worst, at = 0.0, 0
    runs = [getattr(rx, m) for m in modes]
    for i, s in enumerate(inputs):
        t0 = time.perf_counter()
        for run in runs:
            run(s)
        dt = time.perf_counter() - t0
        if dt > worst:
            worst, at = dt, i
    return worst, at


def audit(where: str, rx: re.Pattern, modes: tuple) -> tuple[bool, str]:
    enc = (lambda s: s.encode("utf-8")) if isinstance(rx.pattern, bytes) else (lambda s: s)
    big = [enc(s) for s in texts(rx, N)]
    worst, at = _time(rx, modes, big)
    verdict = worst < SLOW_S
    detail = f"{worst * 1e3:.1f} ms"
    if verdict and worst > FLOOR_S:  # measure its growth on the same text a quarter as long
        small = enc(texts(rx, N // 4)[at])
        t_small = min(_time(rx, modes, [small])[0] for _ in range(3))
        t_big = min(_time(rx, modes, [big[at]])[0] for _ in range(3))
        verdict = t_big < FLOOR_S or t_big / max(t_small, 1e-9) < GROWTH
        detail += f", x{t_big / max(t_small, 1e-9):.1f} from 5k to 20k"
    sample = big[at][:24]
    return verdict, f"{'OK' if verdict else 'SLOW'} {where} /{rx.pattern!r}/ worst {detail} on {sample!r}..."


def main() -> int:
    literal, dynamic = literal_calls()
    patterns = literal + module_patterns()
    known = _dynamic()
    bad = 0
    for rel, scope, line, src in dynamic:
        entry = known.get((rel, scope))
        if entry is None:
            print(f"UNAUDITED {rel}:{line} ({scope}) re.<fn>({src}, ...): list it in tests/regex_audit.py _dynamic",
                  flush=True)
            bad += 1
        elif entry[1] is not None:
            patterns += [(f"{rel}:{line} ({entry[0]})", rx, MODES["compile"]) for rx in entry[1]()]
    seen = set()
    for where, rx, modes in patterns:
        if (rx.pattern, rx.flags, modes) in seen:
            continue
        seen.add((rx.pattern, rx.flags, modes))
        print(f"TRY {where}", flush=True)
        ok, line = audit(where, rx, modes)
        bad += not ok
        print(line, flush=True)
    print(f"DONE {len(seen)} patterns, {bad} failing", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
