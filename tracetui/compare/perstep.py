"""Per-step figures of one side of a diff (device time and kernels from the diff's units, launches,
memcpy/memset and CPU time from the step windows).

A trace without step markers has no step windows: its step-window figures (``STEP_WINDOW_KEYS``)
are None, not 0.0 (no step took no time; the JSON says null, the text "-")."""
from __future__ import annotations

import numpy as np

from tracetui.compare.items import _items
from tracetui.read.events import K
from tracetui.model.trace import Trace

STEP_WINDOW_KEYS = ("memcpy_memset_per_step", "memcpy_memset_us_per_step", "launches_per_step",
                    "launch_cpu_us_per_step", "cpu_us_per_step")
"""The figures measured over step windows, so None on a trace without step markers. On a CPU-only
trace only the host time is: it launches nothing and copies nothing on a device, a true 0, and its
``launches_per_step`` counts the diff's units, which a stepless trace has too."""


def _side(t: Trace) -> dict:
    """Per-step figures of one side: the diff's units, and the step windows' own figures."""
    cached = getattr(t, "_diff_side", None)
    if cached is not None:
        return dict(cached)
    items = _items(t)
    steps = max(t.n_steps, 1)
    cpu = float(sum(t.tree.dur[s] for s in t.steps) / steps / 1e3) if t.steps else 0.0
    mem = _mem_per_step(t)
    launches, launch_ns = _launches_per_step(t)
    out = {"file": str(t.path), "device": t.device_name, "gpu": t.has_gpu, "steps": t.n_steps,
           "steps_alike": getattr(t, "_diff_alike", 1),
           "kernels_per_step": len(items), "device_us_per_step": sum(i.dur_ns for i in items) / 1e3,
           "memcpy_memset_per_step": mem[0], "memcpy_memset_us_per_step": mem[1] / 1e3,
           "launches_per_step": launches if t.has_gpu else float(len(items)),
           "launch_cpu_us_per_step": launch_ns / 1e3, "cpu_us_per_step": cpu}
    if not t.steps:
        out.update({k: None for k in (STEP_WINDOW_KEYS if t.has_gpu else ("cpu_us_per_step",))})
    t._diff_side = out
    return dict(out)


def _launches_per_step(t: Trace) -> tuple[float, float]:
    """Launch calls per step and their CPU time (ns), over the step windows (``runtime_role``:
    the same rule as ``step_breakdown``, without the rest of its work, which a ladder of
    thousand-step traces cannot afford per step)."""
    if not t.has_gpu or not t.steps:
        return 0.0, 0.0
    from tracetui.model.windows import runtime_role
    tree = t.tree
    roles: dict = {}
    n = d = 0
    for s in t.steps:
        rt = t.step_window(s).runtime
        if not rt.size:
            continue
        ids = tree.name_id[rt]
        for i in np.unique(ids).tolist():
            if i not in roles:
                roles[i] = runtime_role(tree.names[i]) == "launch"
        m = np.array([roles[i] for i in ids.tolist()], dtype=bool)
        n += int(m.sum())
        d += int(tree.dur[rt[m]].sum())
    return n / len(t.steps), d / len(t.steps)


def _mem_per_step(t: Trace) -> tuple[float, float]:
    if not t.has_gpu or not t.steps:
        return 0.0, 0.0
    n = d = 0
    for s in t.steps:
        g = t.step_gpu_nodes(s)
        g = g[t.tree.kind[g] != K["kernel"]]
        n += g.size
        d += int(t.tree.dur[g].sum())
    return n / len(t.steps), d / len(t.steps)

