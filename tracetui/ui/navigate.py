"""Navigation requests: a screen posts one, the App (ui/app.py) pushes the screen it names.

Screens never import each other: the diff asks for a trace's explorer, the ladder for a diff, the
job view for a rank's trace, and only the App knows which screen class shows each. The messages
bubble from the screen that posts them to the App.
"""
from __future__ import annotations

from pathlib import Path

from textual.message import Message

from tracetui.model.trace import Trace


class OpenTrace(Message):
    """Show a loaded trace in the explorer, on ``node`` if given (the diff's `a` / `b`)."""

    def __init__(self, trace: Trace, node: int | None = None):
        super().__init__()
        self.trace, self.node = trace, node


class OpenDiff(Message):
    """Show the diff of two loaded traces (the ladder's Enter on a rung)."""

    def __init__(self, a: Trace, b: Trace):
        super().__init__()
        self.a, self.b = a, b


class OpenRank(Message):
    """Load a rank's trace file and show it in the explorer, at the step named ``step`` if it has
    one (the job view's Enter); Esc there comes back to the screen that asked."""

    def __init__(self, path: Path, step: str | None = None, load_opts: dict | None = None):
        super().__init__()
        self.path, self.step, self.load_opts = Path(path), step, load_opts or {}


class OpenOpportunities(Message):
    """Show a trace's fusion opportunities (the explorer's `O`); Enter there calls ``on_jump(node)``
    to put the explorer's cursor on a chain's first kernel."""

    def __init__(self, trace: Trace, on_jump=None):
        super().__init__()
        self.trace, self.on_jump = trace, on_jump


class OpenRanksTimeline(Message):
    """Show a job's ranks on one timeline (the job view's `t`): its ``ranks`` document and its
    lanes (``jobs.lanes.JobLanes``)."""

    def __init__(self, doc: dict, lanes):
        super().__init__()
        self.doc, self.lanes = doc, lanes
