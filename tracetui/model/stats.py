"""Numbers on every node (CPU total/self, device time, kernel count, step) and per-name aggregates.

Rollups follow torch.profiler's own tree (time containment per thread; GPU activity under the
runtime call that launched it), so the aggregates agree with ``key_averages()``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracetui.read.events import GPU_KINDS, HOST_KINDS, K
from tracetui.model.tree import Tree

STEP_KEY = "ProfilerStep*"
_STEP_RE = re.compile(r"^ProfilerStep#\d+$")


def agg_key(name: str) -> str:
    """The name key_averages() groups under (every ProfilerStep#N is ``ProfilerStep*``)."""
    return STEP_KEY if _STEP_RE.match(name) else name


@dataclass
class Rollups:
    cpu_total: np.ndarray     # ns
    cpu_self: np.ndarray      # ns
    device: np.ndarray        # ns of GPU activity in the subtree (containment)
    kernels: np.ndarray       # kernel launches in the subtree
    step_of: np.ndarray       # node id of the enclosing ProfilerStep (display tree), -1 if none


def _nearest_not(parent: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Each node's nearest proper ancestor that is not ``skip``ped (the root counts as not), or -1.

    Pointer jumping over the skipped nodes only: chains of Python frames are long, but halve at
    every pass.
    """
    jump = parent.copy()
    f = np.nonzero(skip & (jump > 0))[0]
    f = f[skip[jump[f]]]
    while f.size:
        jump[f] = jump[jump[f]]
        f = f[(jump[f] > 0) & skip[np.maximum(jump[f], 0)]]
    owner = parent.copy()
    via = np.nonzero((owner > 0) & skip[np.maximum(owner, 0)])[0]
    owner[via] = jump[owner[via]]
    return owner


def rollups(tree: Tree, torch_compat: bool = False, python_owns_time: bool = False) -> Rollups:
    """Roll CPU and GPU time up the containment tree.

    GPU activity launched outside any ATen op (a user ``@triton.jit`` kernel: no External id)
    still counts for its enclosing module/annotation/step here. ``torch_compat=True`` drops it
    instead, which is what ``key_averages()`` does; the tests check both.

    Python frames (``with_stack``) are call-stack context: an op's self time excludes its ATen and
    runtime children only, as torch <= 2.11 computes it (python frames are not in its tree).
    ``python_owns_time=True`` nests ops under frames for self time, as torch 2.13 does.
    """
    kind = tree.kind
    n = len(kind)
    host = np.isin(kind, list(HOST_KINDS))
    gpu = np.isin(kind, list(GPU_KINDS))
    dur = tree.dur
    cpu_total = np.where(host, dur, 0).astype(np.int64)
    child_host = np.zeros(n, dtype=np.int64)
    pyish = np.isin(kind, [K["python"], K["module"]])
    hn = np.nonzero(host & (tree.cparent >= 0))[0]
    np.add.at(child_host, tree.cparent[hn], dur[hn])  # right for frames themselves
    if not python_owns_time:
        # non-frame events: subtract only non-frame descendants reached through frames
        owner = _nearest_not(tree.cparent, pyish)
        hn2 = np.nonzero(host & ~pyish & (owner >= 0))[0]
        child_ops = np.zeros(n, dtype=np.int64)
        np.add.at(child_ops, owner[hn2], dur[hn2])
        child_host = np.where(pyish, child_host, child_ops)
    # not clamped: torch reports a negative self time when children overlap, and so do we
    cpu_self = np.where(host, dur - child_host, 0)
    counted = gpu.copy()
    if torch_compat:
        ev = tree.ev
        counted[gpu] = tree.store.ext[ev[gpu]] > 0
    device = np.where(gpu, dur, 0).astype(np.int64)
    kernels = (kind == K["kernel"]).astype(np.int64)
    # GPU time belongs to the op that launched it, as in key_averages(): the runtime call in
    # between (cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync) reports none itself.
    up = tree.cparent.copy()
    g = np.nonzero(gpu & (up >= 0))[0]
    via_rt = g[kind[up[g]] == K["runtime"]]
    up[via_rt] = tree.cparent[up[via_rt]]
    up[gpu & ~counted] = -1  # torch_compat: unattributed GPU activity rolls up nowhere
    # GPU activity is what carries device time and kernel counts: climb from it, merging the
    # climbs that meet, instead of ordering every node by depth
    g = np.nonzero(gpu & (up >= 0))[0]
    cur, w_dev, w_ker = up[g], dur[g], kernels[g]
    while cur.size:
        o = np.argsort(cur, kind="stable")
        cur = cur[o]
        first = np.flatnonzero(np.r_[True, cur[1:] != cur[:-1]])
        cur = cur[first]
        w_dev, w_ker = np.add.reduceat(w_dev[o], first), np.add.reduceat(w_ker[o], first)
        device[cur] += w_dev
        kernels[cur] += w_ker
        nxt = up[cur]
        keep = nxt >= 0
        cur, w_dev, w_ker = nxt[keep], w_dev[keep], w_ker[keep]
    # threads (and the root, for host events found on no thread) total their top-level events
    top = np.nonzero(host & (tree.cparent >= 0))[0]
    top = top[~host[tree.cparent[top]] & ~gpu[tree.cparent[top]]]
    np.add.at(cpu_total, tree.cparent[top], cpu_total[top])
    # a step's group of another thread's work (tree.py) totals its top-level events
    grp = np.nonzero((kind == K["thread"]) & (tree.parent > 0))[0]
    grp = grp[kind[tree.parent[grp]] == K["step"]]
    if grp.size:
        is_grp = np.zeros(n, dtype=bool)
        is_grp[grp] = True
        members = np.nonzero((tree.parent > 0) & is_grp[np.maximum(tree.parent, 0)])[0]
        for col in (cpu_total, device, kernels):
            np.add.at(col, tree.parent[members], col[members])
    # step of every node in the display tree, top-down
    step_of = np.full(n, -1, dtype=np.int64)
    d_order = np.argsort(tree.depth, kind="stable")
    is_step = kind == K["step"]
    dd = tree.depth[d_order]
    bounds = np.searchsorted(dd, np.arange(0, int(dd.max()) + 2)) if n else []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lvl = d_order[lo:hi]
        par = tree.parent[lvl]
        has = par >= 0
        step_of[lvl[has]] = step_of[par[has]]
        s = lvl[is_step[lvl]]
        step_of[s] = s
    return Rollups(cpu_total=cpu_total, cpu_self=cpu_self, device=device, kernels=kernels, step_of=step_of)


@dataclass
class Agg:
    """One row of an op or kernel table (times in µs)."""
    name: str
    kind: str
    count: int
    cpu_total_us: float
    cpu_self_us: float
    device_total_us: float
    nodes: np.ndarray

    @property
    def mean_device_us(self) -> float:
        return self.device_total_us / self.count if self.count else 0.0


def aggregate(tree: Tree, r: Rollups, kinds: frozenset) -> list[Agg]:
    """Rows grouped by key_averages()'s name key, for the node kinds in ``kinds``; by device then CPU time."""
    from tracetui.read.events import KINDS
    sel = np.nonzero(np.isin(tree.kind, list(kinds)))[0]
    if not sel.size:
        return []
    # group by interned name id (integers), then map the few distinct names to their key
    name_ids, nid_inv = np.unique(tree.name_id[sel], return_inverse=True)
    key_of = [agg_key(tree.names[i]) for i in name_ids.tolist()]
    uniq = list(dict.fromkeys(key_of))
    key_ix = {k: i for i, k in enumerate(uniq)}
    inv = np.array([key_ix[k] for k in key_of], dtype=np.int64)[nid_inv.reshape(-1)]
    m = len(uniq)
    count = np.bincount(inv, minlength=m)
    ct = np.bincount(inv, weights=r.cpu_total[sel], minlength=m) / 1e3
    cs = np.bincount(inv, weights=r.cpu_self[sel], minlength=m) / 1e3
    dv = np.bincount(inv, weights=r.device[sel], minlength=m) / 1e3
    order = np.argsort(inv, kind="stable")
    splits = np.split(sel[order], np.cumsum(count)[:-1])
    first_kind = {i: KINDS[tree.kind[splits[i][0]]] for i in range(m)}
    rows = [Agg(str(uniq[i]), first_kind[i], int(count[i]), float(ct[i]), float(cs[i]), float(dv[i]), splits[i])
            for i in range(m)]
    rows.sort(key=lambda a: (-a.device_total_us, -a.cpu_total_us, a.name))
    return rows
