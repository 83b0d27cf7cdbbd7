"""One rule, one wording: a trace without step markers has no host time per step (nor any other
figure measured over step windows). The sentence that says so and what gives it one lives here,
below both compare/ (the gate's reason, ``verdict.gate``) and report/ (``report/host_step.py``: the
text report, the ladder, the app's diff screen), so all of them word it the same way."""
from __future__ import annotations

NO_STEPS = "no step markers; --steps REGEX names one"
"""Why a step-window figure is missing, and what gives it one (``--steps`` on the CLI and the app)."""


def lacking(sides: list[str]) -> str:
    """"A has no step markers; --steps REGEX names one" for the sides without step markers."""
    verb = "has" if len(sides) == 1 else "have"
    return f"{' and '.join(sides)} {verb} {NO_STEPS}"
