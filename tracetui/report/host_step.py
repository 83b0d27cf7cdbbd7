"""One rule, one wording: a trace without step markers has no host time per step (nor any other
figure measured over step windows), so a report says "-" and why, never 0.0. The diff report, the
ladder and the app's diff screen all word it here, with the sentence the gate's reason uses too
(``compare/stepless.py``: compare/ cannot import report/)."""
from __future__ import annotations

from tracetui.compare.stepless import lacking


def per_step(value, spec: str = ",.1f") -> str:
    """A step-window figure (``compare.perstep.STEP_WINDOW_KEYS``), or "-" where it is None: the
    trace has no step markers."""
    return "-" if value is None else format(value, spec)


def no_steps(sides: list[str]) -> str:
    """"- (A has no step markers; --steps REGEX names one)" for the sides without step markers."""
    return f"- ({lacking(sides)})"


def _stepless(a: dict, b: dict, names: tuple[str, str]) -> str | None:
    """``no_steps`` for the sides of the two without step markers, or None where both have them."""
    missing = [n for n, s in zip(names, (a, b)) if not s["steps"]]
    return no_steps(missing) if missing else None


def host_pair(a: dict, b: dict, unit: str = "", names: tuple[str, str] = ("A", "B")) -> str:
    """Host time per step of two sides ("1,287.7 → 1,070.6" + ``unit``), or, where a side has no
    step markers, which and why (``no_steps``)."""
    return _stepless(a, b, names) or f"{per_step(a['cpu_us_per_step'])} → {per_step(b['cpu_us_per_step'])}{unit}"


def host_delta(a: dict, b: dict, delta_us, names: tuple[str, str] = ("A", "B")) -> str:
    """The host time change between two sides ("+12.3 µs"), or which has no step markers."""
    return _stepless(a, b, names) or ("-" if delta_us is None else f"{delta_us:+,.1f} µs")
