"""Small text helpers shared by the widgets: times, plain-text names, kind glyphs and styles."""
from __future__ import annotations

from rich.text import Text

from tracetui.model.lanes import fmt_time
from tracetui.shorten import ELLIPSIS, fit, fit_distinct  # noqa: F401  (one rule: tracetui/shorten.py)
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

