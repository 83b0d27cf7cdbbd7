"""Serving steps by phase: each step's label (prefill / decode / mixed, batch, tokens) and the
figures of each phase (steps, device time, kernels, top kernels) over the steps' windows.

A step's label is read from its own name (an engine's step annotation, ``serving.py``), or, where
``ProfilerStep#N`` marks the steps, from the outermost engine annotation inside the step (vLLM
calls ``prof.step()`` and then opens its ``execute_…`` annotation).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from tracetui.read.events import K
from tracetui.model.serving import StepLabel, label_of, rule_of

LOOK_INSIDE = 64
"""A ProfilerStep's label is searched among its first this many descendants (breadth first)."""


def _inside(trace, step: int) -> StepLabel | None:
    """The first engine annotation under ``step`` (breadth first, bounded by ``LOOK_INSIDE``)."""
    t = trace.tree
    queue, seen = list(t.children(step)), 0
    while queue and seen < LOOK_INSIDE:
        node = queue.pop(0)
        seen += 1
        if t.kind[node] == K["annotation"]:
            label = label_of(trace.name(node))
            if label is not None:
                return label
        queue.extend(t.children(node))
    return None


def step_labels(trace) -> dict[int, StepLabel]:
    """Step node -> its label, for every step that has one."""
    t = trace.tree
    engine_names = {i for i, n in enumerate(t.names) if rule_of(n) is not None}
    if not engine_names:  # no engine annotation anywhere: nothing to read (one pass over the names)
        return {}
    out, by_name = {}, {}
    for s in trace.steps:
        nid = int(t.name_id[s])
        if nid in engine_names:  # one read per distinct name: a decode trace repeats one name
            label = by_name.get(nid) or by_name.setdefault(nid, label_of(t.names[nid]))
        else:
            label = _inside(trace, s)
        if label is not None:
            out[s] = label
    return out


def phase_figures(trace, labels: dict[int, StepLabel], top: int = 5, skip: frozenset = frozenset()) -> list[dict]:
    """Per phase, in order of first appearance: steps, device time (ns), kernels, and the ``top``
    kernels by device time over the phase's steps' windows. Steps in ``skip`` (a CUDA graph hid
    part of their work) are counted, and their figures left out and said so (``unknown_steps``)."""
    if not labels:
        return []
    t = trace.tree
    groups: dict[str, list[int]] = defaultdict(list)
    for s in trace.steps:
        if s in labels:
            groups[labels[s].phase].append(s)
    out = []
    for phase, steps in groups.items():
        known = [s for s in steps if s not in skip]
        g = np.concatenate([trace.step_window(s).gpu for s in known]) if known else np.zeros(0, dtype=np.int64)
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        kern = g[t.kind[g] == K["kernel"]] if g.size else g
        for name_id, dur in zip(t.name_id[kern].tolist(), t.dur[kern].tolist()):
            row = per[name_id]
            row[0] += 1
            row[1] += dur
        hot = sorted(per.items(), key=lambda kv: -kv[1][1])[:top]
        batches = [labels[s].batch for s in steps if labels[s].batch is not None]
        out.append({"phase": phase, "steps": len(steps), "unknown_steps": len(steps) - len(known),
                    "device_ns": int(t.dur[g].sum()) if g.size else 0, "kernels": int(kern.size),
                    "batch_mean": (sum(batches) / len(batches)) if batches else None,
                    "top_kernels": [{"name": t.names[n], "count": c, "device_ns": d} for n, (c, d) in hot]})
    return out
