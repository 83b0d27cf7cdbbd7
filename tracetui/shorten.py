"""Names in a width, by one rule everywhere (report text, ladder rungs, opportunities, diff rows,
the app's tables): where the output has no width (a pipe, a file, CI) a name is written whole; on
a terminal it is shortened in the middle, head … tail, and names that would then read alike are
cut again around where they differ (template arguments, a fused kernel's op list, tile shapes),
until every different name in one column reads differently or the width cannot hold it.

A leaf module (like ``textsafe``): it imports nothing of ours, so every stage may use it.
"""
from __future__ import annotations

import os
import shutil
import sys

ELLIPSIS = "…"
MIN_NAME = 24
"""The fewest cells a name column gets on a terminal (narrower, the line wraps instead)."""


def fit(name: str, width: int | None) -> str:
    """``name`` in at most ``width`` cells: whole if it fits (or ``width`` is None: no width to
    respect), else its head and its tail around an ellipsis (a kernel's or an op's distinguishing
    part is as often its end as its start: ``aten::empty_strided``, ``nvjet_…_coopB_bias_TNT``)."""
    if width is None or len(name) <= width:
        return name
    if width <= 1:
        return name[:max(width, 0)]
    head = (width - 1) // 2
    return name[:head] + ELLIPSIS + name[len(name) - (width - 1 - head):]


def _common_prefix(names: list[str]) -> int:
    a, b = min(names), max(names)  # the common prefix of all is that of the extremes
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _window(name: str, cp: int, cs: int, width: int) -> str:
    """``name`` in ``width`` cells showing where it differs from its look-alikes: a short head,
    then from the first differing character (``cp``) on, and the common tail (``cs``) as room allows."""
    head_n = min(cp, max(4, width // 5))
    head = name[:head_n] + (ELLIPSIS if cp > head_n else "")
    mid = name[cp:len(name) - cs]
    room = width - len(head)
    tail = name[len(name) - cs:]
    if len(mid) + len(tail) <= room:
        return head + mid + tail
    if len(mid) + 1 <= room:  # the differing part whole, then as much of the common end as fits
        end = tail[len(tail) - (room - len(mid) - 1):] if room > len(mid) + 1 else ""
        return head + mid + ELLIPSIS + end.lstrip(ELLIPSIS)
    return head + mid[:max(room - 1, 0)] + ELLIPSIS


def _split(group: list[str], width: int) -> dict[str, str]:
    """Re-cut look-alikes around where they differ. Where the whole group shares a longer prefix
    than two of its members, those two are cut around their own difference (nested groups)."""
    cp = _common_prefix(group)
    cs = _common_prefix([n[::-1] for n in group])
    cs = min(cs, min(len(n) for n in group) - cp)  # prefix and suffix must not overlap
    return {n: _window(n, cp, cs, width) for n in group}


def fit_distinct(names: list[str], width: int | None, short=None) -> list[str]:
    """Each name in ``width`` cells (``fit``), where names that differ stay different when they
    can: look-alikes (same cut) are cut again around the part where they differ, and again within
    what still collides, a few rounds at most. ``width`` None writes every name whole.

    ``short`` (e.g. ``names.shorten_cpp``, which folds C++ templates) shortens a name first, except
    where two different names would shorten alike: those keep their whole text (the gelu and the
    mul ``vectorized_elementwise_kernel<8, …>`` read the same folded)."""
    if short is not None:
        folded = {n: short(n) for n in set(names)}
        by: dict[str, set[str]] = {}
        for n, f in folded.items():
            by.setdefault(f, set()).add(n)
        labels = [folded[n] if len(by[folded[n]]) == 1 else n for n in names]
        return fit_distinct(labels, width)
    if width is None:
        return list(names)
    out = {n: fit(n, width) for n in names}
    for _ in range(4):
        groups: dict[str, set[str]] = {}
        for n, o in out.items():
            groups.setdefault(o, set()).add(n)
        clashes = [sorted(g) for g in groups.values() if len(g) > 1]
        if not clashes:
            break
        for group in clashes:
            out.update(_split(group, width))
            if len({out[n] for n in group}) == 1 and len(group) > 2:  # try pairs within the group
                for a, b in zip(group, group[1:]):
                    out.update({k: v for k, v in _split([a, b], width).items()})
    return [out[n] for n in names]


def fit_arrow(text: str, width: int | None, arrow: str = " → ") -> str:
    """``A → B`` in ``width`` cells with both sides kept (each cut head … tail, the room shared in
    proportion): a change row's replacement is the part a reader came for, and cutting the end
    dropped it."""
    if width is None or len(text) <= width or arrow not in text:
        return fit(text, width)
    left, right = text.split(arrow, 1)
    room = width - len(arrow)
    if room < 8:
        return fit(text, width)
    if len(right) <= room - min(len(left), 16):  # the replacement whole, the rest to what it replaced
        lw, rw = room - len(right), len(right)
    else:
        lw = max(4, min(len(left), room * len(left) // (len(left) + len(right))))
        rw = room - lw
    return fit(left, lw) + arrow + fit(right, rw)


def terminal_width(stream=None) -> int | None:
    """The terminal's columns when ``stream`` (default stdout) is a terminal, else None: piped or
    redirected output has no width to respect, so names are written whole. ``COLUMNS`` wins, as
    for ``shutil.get_terminal_size``."""
    stream = stream if stream is not None else sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    return shutil.get_terminal_size((80, 24)).columns


def name_room(used: int, stream=None) -> int | None:
    """Cells a name column gets on a terminal after ``used`` cells of other columns (at least
    ``MIN_NAME``), or None (whole names) when the output is not a terminal."""
    cols = terminal_width(stream)
    return None if cols is None else max(MIN_NAME, cols - used)


def column(names: list[str], used: int, stream=None, short=None) -> list[str]:
    """A table's name column, as it is written: whole names into a pipe or file (``short`` not
    applied either: a script reads them back); on a terminal, ``short`` first (template folding)
    where it keeps names apart, then cut to what the other columns (``used`` cells) leave, every
    different name distinct."""
    room = name_room(used, stream)
    if room is None:
        return list(names)
    return fit_distinct(names, room, short=short)


def file_labels(paths: list) -> list[str]:
    """Each path's file name, or where two would read alike (rank 0 of two job folders, say)
    as many of its last folders as tell them apart: ``a/rank0.json`` and ``b/rank0.json``.
    Paths that never differ (a file against itself) keep their file names."""
    parts = [[x for x in str(p).split("/") if x] or [str(p)] for p in paths]
    for depth in range(1, max(map(len, parts), default=1) + 1):
        labels = ["/".join(ps[-depth:]) for ps in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [ps[-1] for ps in parts]
