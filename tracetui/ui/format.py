"""Small text helpers shared by the widgets: times, plain-text names, kind glyphs and styles."""
from __future__ import annotations

from rich.text import Text

from tracetui.model.lanes import fmt_time
from tracetui.textsafe import visible

KIND_STYLE = {
    "root": ("⌂", "bold"), "thread": ("≡", "bold cyan"), "step": ("◆", "bold magenta"),
    "annotation": ("✎", "yellow"), "module": ("▣", "bold green"), "python": ("λ", "dim"),
    "op": ("●", "cyan"), "runtime": ("→", "blue"), "kernel": ("■", "bold red"),
    "memcpy": ("⇄", "red"), "memset": ("▭", "red"), "gpu": ("▲", "bold red"),
}
"""Glyph and style per node kind: colour is never the only signal (the glyph says it too)."""


def fmt_us(ns: float | int) -> str:
    """ns -> a short human time, by one rule everywhere (tree rows, details, timeline): the
    largest unit in which the value is at least 1 (``lanes.fmt_time``); "-" for nothing."""
    if ns == 0:
        return "-"
    return fmt_time(ns)


def plain(s: str, style: str = "") -> Text:
    """A name from the trace as literal text: no markup parsing, control characters made visible."""
    return Text(visible(s), style=style)


ELLIPSIS = "…"


def fit(name: str, width: int) -> str:
    """``name`` in at most ``width`` cells: whole if it fits, else its head and its tail around
    an ellipsis (a kernel's or an op's distinguishing part is as often its end as its start:
    ``aten::empty_strided``, ``nvjet_…_coopB_bias_TNT``)."""
    if len(name) <= width:
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


def fit_distinct(names: list[str], width: int) -> list[str]:
    """Each name in ``width`` cells (``fit``), where names that differ stay different when they
    can: look-alikes (same cut) are cut again around the part where they differ."""
    out = [fit(n, width) for n in names]
    groups: dict[str, set[str]] = {}
    for n, o in zip(names, out):
        groups.setdefault(o, set()).add(n)
    redo = {}
    for same in groups.values():
        if len(same) < 2:
            continue
        group = sorted(same)
        cp = _common_prefix(group)
        cs = _common_prefix([n[::-1] for n in group])
        cs = min(cs, min(len(n) for n in group) - cp)  # prefix and suffix must not overlap
        for n in group:
            redo[n] = _window(n, cp, cs, width)
    return [redo.get(n, o) for n, o in zip(names, out)]
