"""One example node per diagnostic the tree counts (``tree.DIAGNOSTICS``), so the app's `D` can
jump to a case of each. Diagnostics about the file rather than a node (flows, missing fields,
argument types, skipped categories) have none."""
from __future__ import annotations

import numpy as np

from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, kind_mask
from tracetui.model.nesting import OVERHANG_NS
from tracetui.model.tree import LAUNCH_WORDS


def diagnostic_nodes(trace) -> dict[str, np.ndarray]:
    """Diagnostic key -> the nodes it counts (in time order), for the diagnostics tied to nodes."""
    t = trace.tree
    n = len(t.kind)
    ids = np.arange(n)
    end = t.start + t.dur
    host = kind_mask(t.kind, HOST_KINDS)
    cp = np.maximum(t.cparent, 0)
    host_parent = (t.cparent > 0) & kind_mask(t.kind[cp], HOST_KINDS)
    out = {"partial_overlaps": _crossing(t, ids[host & (t.ev >= 0)], end)}
    gpu = kind_mask(t.kind, GPU_KINDS)
    par = np.maximum(t.parent, 0)
    out["gpu_without_launch"] = ids[gpu & (t.kind[par] == K["gpu"])]
    out["linked_by_external_id"] = ids[gpu & kind_mask(t.kind[par], [K["op"], K["annotation"]])]
    rt = ids[t.kind == K["runtime"]]
    words = np.array([any(w in name for w in LAUNCH_WORDS) for name in t.names], dtype=bool)
    has_gpu = np.zeros(n, dtype=bool)
    has_gpu[t.parent[gpu][t.parent[gpu] >= 0]] = True
    out["launches_without_gpu"] = rt[words[t.name_id[rt]] & ~has_gpu[rt]]
    steps = np.asarray(trace.steps, dtype=np.int64)
    under_thread = host & (t.kind[par] == K["thread"]) & (t.kind != K["step"])
    cand = ids[under_thread]
    if steps.size and cand.size:
        edges = np.unique(np.r_[t.start[steps], end[steps]])
        a = np.searchsorted(edges, t.start[cand], side="right")
        b = np.searchsorted(edges, end[cand], side="left")
        out["steps_spanned_by_events"] = cand[b > a]  # an edge strictly inside the event
    else:
        out["steps_spanned_by_events"] = cand[:0]
    return {k: v[np.argsort(t.start[v], kind="stable")] for k, v in out.items()}


def _crossing(t, host: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Host events that start inside an earlier event on their thread and end more than
    ``OVERHANG_NS`` after it (checked against the events open at their start, nearest first: a
    subset of what the nesting counts, enough for examples)."""
    track = t.store.track[t.ev[host]]
    o = np.lexsort((-t.dur[host], t.start[host], track))
    h, tr = host[o], track[o]
    s, e = t.start[h], end[h]
    found = np.zeros(h.size, dtype=bool)
    for back in range(1, 9):  # the few events open just before: parents, then their parents
        p = np.arange(h.size) - back
        ok = p >= 0
        pp = np.maximum(p, 0)
        found |= ok & (tr[pp] == tr) & (s[pp] < s) & (s < e[pp]) & (e > e[pp] + OVERHANG_NS)
    return h[found]
