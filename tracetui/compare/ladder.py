"""N-way ladders: eager → compile → triton → fused (or any series), per step and between neighbours.

Each rung's per-step figures come from its step windows (device time, kernels, launches, CPU
time); each pair of neighbours is a full diff (``diff.py``) whose biggest changes say why the
next rung is faster or slower.
"""
from __future__ import annotations

from tracetui.compare.changes import change_dict, changes, top_changes, totals
from tracetui.compare.diff import diff_traces
from tracetui.model.trace import Trace


def ladder(traces: list[Trace], top: int = 3, progress=None) -> dict:
    """Per-rung figures and, between neighbours, the totals and the ``top`` biggest changes."""
    rungs = []
    for t in traces:
        s = diff_side(t)
        rungs.append(s)
    steps = []
    for i, (a, b) in enumerate(zip(traces[:-1], traces[1:])):
        if progress:
            progress(i, len(traces) - 1)
        d = diff_traces(a, b)
        cs = changes(d)
        steps.append({"from": i, "to": i + 1, "totals": totals(d),
                      "top": [change_dict(c) for c in top_changes(cs, top)],
                      "cpu_top": [change_dict(c) for c in cs if c.kind == "cpu"][:top]})
    return {"rungs": rungs, "steps": steps}


def diff_side(t: Trace) -> dict:
    from tracetui.compare.perstep import _side
    return _side(t)
