"""Python frames that outlast the call they started in are cut to its end before nesting.

torch.profiler's Python tracer (``with_stack``) records frames beside the ops' RecordFunction
scopes. A frame that starts inside an op, annotation or other frame was called from within it
and returned before it did; when the trace says otherwise, the frame's end is what is wrong:
- a frame whose exit the tracer missed is written as ending at the profiler's stop (seen on
  H200 recordings of a ``torch.library`` custom op that re-enters Python:
  ``<built-in method geglu_mlp of pybind11...>`` and the autograd Function's ``apply`` ran
  to the stop, 10 ms past the step they started in);
- a frame re-entered from C++ ends tens of µs after the op it ran inside
  (``<built-in method redispatch_boxed ...>``, 28 µs past ``tracetui::geglu_mlp``).

Left as written, such a frame closes every op, module, annotation and step it started in by
torch's stack rule (nesting.py), and what follows in the step hangs under the frame: kernels
lose their launching op and module scope, and self times no longer match ``key_averages()``,
which (torch <= 2.12) builds its tree from ops alone. Only frames are cut (ops, annotations
and steps come from RecordFunction and keep their times); the cut is counted in the tree's
diagnostics. Overhangs up to ``OVERHANG_NS`` are clock skew and are left to the stack rule.
"""
from __future__ import annotations

import numpy as np

from tracetui.read.events import K, kind_mask
from tracetui.model.nesting import OVERHANG_NS

FRAME_KINDS = (K["python"], K["module"])
"""What the Python tracer writes (``python_function``: frames and ``nn.Module:`` scopes)."""

SCOPE_KINDS = (K["op"], K["runtime"], K["python"], K["module"])
"""Events that are call scopes: what starts inside one returns before it does. Not steps
(``ProfilerStep#N`` runs from one ``prof.step()`` call to the next, so a training loop's frame
starts inside one step and outlasts it) and not annotations (``record_function`` can be entered
and exited by hand)."""

MAX_ROUNDS = 8
"""Cutting one frame can leave a frame started inside it outlasting it in turn (nested frames
that all ran to the stop); each round of nesting and cutting (tree.py) cuts the outermost
level left."""


def cut_frame_ends(end: np.ndarray, kind: np.ndarray, closers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ends with each overhanging frame cut, the frames cut), for host events in nesting order
    with ``closers`` as the nesting found them (``nesting.Nested``: the event that outlasted
    each, or -1). A frame is cut to the end of the innermost call scope (op, runtime call,
    frame) it started inside and outlasts by more than ``OVERHANG_NS``: the scope it closed.

    The nesting's own closers, not a second search: on the whole of a GB trace the closers'
    range-maximum table was past its cap (a frame open for the whole thread leaves no place to
    cut it), and no frame was cut there at all."""
    closed = np.flatnonzero(closers >= 0)
    if not closed.size:
        return end, closed
    by = closers[closed]
    bad = kind_mask(kind[by], FRAME_KINDS) & kind_mask(kind[closed], SCOPE_KINDS) & (end[by] > end[closed] + OVERHANG_NS)
    if not bad.any():
        return end, closed[:0]
    end = end.copy()
    # several events may be closed by one frame: it ends with the innermost (earliest end)
    np.minimum.at(end, by[bad], end[closed[bad]])
    return end, np.unique(by[bad])
