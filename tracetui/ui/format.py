"""Small text helpers shared by the widgets: times, plain-text names, kind glyphs and styles."""
from __future__ import annotations

from rich.text import Text

from tracetui.textsafe import visible

KIND_STYLE = {
    "root": ("⌂", "bold"), "thread": ("≡", "bold cyan"), "step": ("◆", "bold magenta"),
    "annotation": ("✎", "yellow"), "module": ("▣", "bold green"), "python": ("λ", "dim"),
    "op": ("●", "cyan"), "runtime": ("→", "blue"), "kernel": ("■", "bold red"),
    "memcpy": ("⇄", "red"), "memset": ("▭", "red"), "gpu": ("▲", "bold red"),
}
"""Glyph and style per node kind: colour is never the only signal (the glyph says it too)."""


def fmt_us(ns: float | int) -> str:
    """ns -> a short human time (µs below 10 ms, ms above)."""
    us = ns / 1e3
    if us == 0:
        return "-"
    if abs(us) < 10:
        return f"{us:.2f}µs"
    if abs(us) < 10_000:
        return f"{us:,.1f}µs"
    return f"{us / 1e3:,.2f}ms"


def plain(s: str, style: str = "") -> Text:
    """A name from the trace as literal text: no markup parsing, control characters made visible."""
    return Text(visible(s), style=style)
