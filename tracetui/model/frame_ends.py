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

from tracetui.read.events import K
from tracetui.model.nesting import OVERHANG_NS, _chunks, _closers, _packed
from tracetui.read.forked import cores
from tracetui.read.together import together

FRAME_KINDS = (K["python"], K["module"])
"""What the Python tracer writes (``python_function``: frames and ``nn.Module:`` scopes)."""

SCOPE_KINDS = (K["op"], K["runtime"], K["python"], K["module"])
"""Events that are call scopes: what starts inside one returns before it does. Not steps
(``ProfilerStep#N`` runs from one ``prof.step()`` call to the next, so a training loop's frame
starts inside one step and outlasts it) and not annotations (``record_function`` can be entered
and exited by hand)."""

MAX_ROUNDS = 8
"""Cutting one frame can leave a frame started inside it outlasting it in turn (nested frames
that all ran to the stop); each round cuts the outermost level left."""


def cut_frame_ends(ts: np.ndarray, end: np.ndarray, track: np.ndarray, kind: np.ndarray,
                   workers: int | None = 1) -> tuple[np.ndarray, int]:
    """(ends with each overhanging frame cut, how many frames were cut), for host events in
    nesting order (nesting.py). A frame is cut to the end of the innermost call scope (op,
    runtime call, frame) it started inside and outlasts by more than ``OVERHANG_NS``.

    Stretch by stretch, cut where the walk's stack is empty (``nesting._chunks``): nothing
    starts inside an event of another stretch, cutting only shortens, so each is cut on its own,
    the stretches side by side (together.py). On the whole array at once the closers' table
    outgrew its cap on a GB trace, and no frame was cut there at all."""
    frame, scope = np.isin(kind, FRAME_KINDS), np.isin(kind, SCOPE_KINDS)
    if not frame.any() or ts.size < 2:
        return end, 0
    spans = _chunks(track, ts, end)
    parts = together([lambda a=a, b=b: _cut(ts[a:b], end[a:b], track[a:b], frame[a:b], scope[a:b])
                      for a, b in spans], cores(workers))
    n_cut = sum(n for _, n in parts)
    return (np.concatenate([e for e, _ in parts]) if n_cut else end), n_cut


def _cut(ts: np.ndarray, end: np.ndarray, track: np.ndarray, frame: np.ndarray,
         scope: np.ndarray) -> tuple[np.ndarray, int]:
    """``cut_frame_ends`` of one stretch: rounds until no frame overhangs a scope it started in."""
    cut = np.zeros(ts.size, dtype=bool)
    for _ in range(MAX_ROUNDS):
        packed = _packed(track, ts, end) if np.all(end >= ts) else None
        killer = _closers(end, *packed[2:]) if packed is not None else None
        if killer is None:
            break  # keys too wide or the table too big: left to the stack rule, as before
        closed = np.flatnonzero(killer >= 0)
        by = killer[closed]
        bad = frame[by] & scope[closed] & (end[by] > end[closed] + OVERHANG_NS)
        if not bad.any():
            break
        end = end.copy()
        # several events may be closed by one frame: it ends with the innermost (earliest end)
        np.minimum.at(end, by[bad], end[closed[bad]])
        cut[by[bad]] = True
    return end, int(cut.sum())
