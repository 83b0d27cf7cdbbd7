"""A regex rule compiled into cheap probes that answer exactly as ``re.search`` would.

The taxonomy's name rules are alternations (``^(?:void )?igemm_|naive_conv|MIOpenConv|...``).
Python's ``re`` searches such a pattern by trying every branch at every position of the name, so
a rule over a kilobyte C++ name costs several µs even when nothing matches, and a name no rule
knows reads all ~70 of them (issue 44.15: 170 µs per distinct name). Split at its top-level ``|``
each branch is cheap on its own:

- a plain literal is a substring test (``in``);
- ``^`` and a literal is ``startswith``;
- ``^`` and a regex is ``match`` (tried at the start only);
- any other regex is searched only when a literal that every match of it contains occurs in the
  name (found from the parsed pattern).

``search(probes, s)`` is True exactly when ``re.search(pattern, s)`` finds a match: a match of
``A|B`` somewhere is a match of ``A`` or of ``B`` somewhere, and a required literal is a necessary
condition. tests/model/test_taxonomy.py checks the answers against the plain regex.
"""
from __future__ import annotations

import re

try:  # the parser behind re.compile (Python 3.11+: re._parser; before: sre_parse)
    from re import _constants as _C, _parser as _P
except ImportError:  # pragma: no cover
    import sre_constants as _C  # type: ignore[no-redef]
    import sre_parse as _P  # type: ignore[no-redef]

_META = set(".^$*+?{}[]()|\\")


def branches(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|`` (outside groups, classes and escapes)."""
    out, depth, start, i, n = [], 0, 0, 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":  # a class: ']' right after '[' or '[^' is a member, not the end
            i += 2 if pattern.startswith("[^", i) else 1
            i += 1 if i < n and pattern[i] == "]" else 0
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def literal(branch: str) -> str | None:
    """The text a branch matches when it is a plain literal (escapes of punctuation allowed)."""
    out, i = [], 0
    while i < len(branch):
        ch = branch[i]
        if ch == "\\":
            if i + 1 >= len(branch) or branch[i + 1].isalnum():
                return None
            out.append(branch[i + 1])
            i += 2
            continue
        if ch in _META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def required(branch: str) -> tuple[tuple[str, ...], ...] | None:
    """Sets of literals that every match of ``branch`` contains one of, each set on its own
    (``elementwise_kernel`` and one of ``copy_kernel``/``fillfunctor``); None: none found."""
    try:
        found = _required(_P.parse(branch))
    except Exception:  # noqa: BLE001 - an unparsable branch is searched as it is
        return None
    sets = {tuple(sorted(x)) for x in found if min(map(len, x)) >= 3}  # shorter: too common to help
    return tuple(sorted(sets, key=lambda x: (-min(map(len, x)), x))[:3]) or None


def _required(seq) -> list[set[str]]:
    """Each set: one of its literals is in every match of ``seq`` (all the sets hold at once)."""
    found: list[set[str]] = []
    run = ""
    for op, av in seq:
        if op is _C.LITERAL:
            run += chr(av)
            continue
        if run:
            found.append({run})
        run = ""
        if op is _C.BRANCH:
            subs = [_best(_required(b)) for b in av[1]]
            if all(subs):
                found.append(set().union(*subs))
        elif op is _C.SUBPATTERN:
            found.extend(_required(av[-1]))
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT) and av[0] >= 1:
            found.extend(_required(av[2]))
    if run:
        found.append({run})
    return [x for x in found if x and all(x)]


def _best(sets: list[set[str]]) -> set[str] | None:
    """The most selective set: its shortest literal the longest."""
    return max(sets, key=lambda x: min(map(len, x)), default=None)


def gate(probes: tuple, k: int = 4) -> tuple[str, ...] | None:
    """A few short strings one of which any match of the pattern contains (None: no such set):
    each branch's literal (or required literals) contains one of them. Chosen greedily, the
    substring of length ``k`` shared by most literals first, so a rule of twenty names that
    all say "norm" is passed over with one test."""
    lits: list[str] = []
    for kind, arg, need in probes:
        if kind in ("in", "start"):
            lits.append(arg)
        elif kind in ("search", "match") and need:
            lits.extend(need[0])
        else:
            return None
    if not lits or not all(lits):
        return None
    chosen: list[str] = []
    left = set(lits)
    while left:
        counts: dict[str, int] = {}
        for lit in left:
            subs = {lit} if len(lit) <= k else {lit[i:i + k] for i in range(len(lit) - k + 1)}
            for g in subs:
                counts[g] = counts.get(g, 0) + 1
        g = max(sorted(counts), key=lambda x: (counts[x], len(x)))
        chosen.append(g)
        left = {lit for lit in left if g not in lit}
    return tuple(chosen)


def compile_probes(pattern: str) -> tuple:
    """The probes of one pattern: (kind, argument, required literals) per top-level branch."""
    probes = []
    for b in branches(pattern):
        if b.startswith("^"):
            lit = literal(b[1:])
            probes.append(("start", lit, None) if lit is not None else ("match", re.compile(b), required(b)))
            continue
        lit = literal(b)
        if lit is not None:
            probes.append(("in", lit, None))
        else:
            probes.append(("search", re.compile(b), required(b)))
    return tuple(probes)


class Probes:
    """A pattern's probes and their gate: ``search(s)`` is ``bool(re.search(pattern, s))``."""
    __slots__ = ("gate", "probes")

    def __init__(self, pattern: str) -> None:
        self.probes = compile_probes(pattern)
        self.gate = gate(self.probes)

    def search(self, s: str) -> bool:
        g = self.gate
        if g is not None:
            for x in g:
                if x in s:
                    break
            else:
                return False
        return search(self.probes, s)


def search(probes: tuple, s: str) -> bool:
    """Whether the pattern ``probes`` came from matches somewhere in ``s``."""
    for kind, arg, need in probes:
        if kind == "in":
            if arg in s:
                return True
        elif kind == "start":
            if s.startswith(arg):
                return True
        elif need is not None and not _all_sets_in(need, s):
            continue
        elif kind == "match":
            if arg.match(s):
                return True
        elif arg.search(s):
            return True
    return False


def _all_sets_in(sets: tuple[tuple[str, ...], ...], s: str) -> bool:
    """Whether each set has a literal in ``s``."""
    for needles in sets:
        for x in needles:
            if x in s:
                break
        else:
            return False
    return True
