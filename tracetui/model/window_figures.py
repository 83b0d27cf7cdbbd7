"""Every step window's breakdown at once: whole-array steps over all steps, O(n log n) in all.

``Windows.breakdown`` of one step used to merge and scan the whole trace's GPU activity, so a
summary of S steps cost O(S x G): 277 s for 250,000 steps (issue 35). Here each figure of every
step comes from one pass:

- a union of intervals per step (own work, each kernel class, communication, compute) is one
  sort by (step, start) and a running maximum of the ends that restarts at each step;
- the GPU's whole activity is merged once; a window's covered time is two binary searches into
  it and a prefix sum;
- an idle gap between two pieces of that activity is classified the same way in every window
  that holds it (what ended it does not depend on the window), so each class is a prefix sum
  too; only the gap that opens a window and the one that closes it depend on the window.

The rules (what counts as busy, host wait, kernel wait) are ``windows.py``'s, unchanged.
"""
from __future__ import annotations

import numpy as np

from tracetui.read.events import K


def union_by(seg: np.ndarray, s: np.ndarray, e: np.ndarray, n: int) -> np.ndarray:
    """Length of the union of the intervals [s, e) of each segment 0..n-1 (touching ones join)."""
    out = np.zeros(n, dtype=np.int64)
    keep = e > s
    seg, s, e = seg[keep], s[keep], e[keep]
    if not s.size:
        return out
    o = np.lexsort((s, seg))
    seg, s, e = seg[o].astype(np.int64), s[o], e[o]
    vals, rank = np.unique(e, return_inverse=True)
    base = seg * vals.size  # a key of a later segment beats every key of an earlier one
    run_end = vals[np.maximum.accumulate(base + rank.ravel()) - base]  # running max, per segment
    new = np.ones(s.size, dtype=bool)
    new[1:] = (seg[1:] != seg[:-1]) | (s[1:] > run_end[:-1])
    last = np.r_[new[1:], True]
    np.add.at(out, seg[new], run_end[last] - s[new])
    return out


def clip(seg, s, e, w0, w1):
    """The intervals clipped to their segment's window [w0, w1)."""
    return np.maximum(s, w0[seg]), np.minimum(e, w1[seg])


CLASSES = "busy by class"
"""The one column that is not an array: ``Figures.classes(k)``, {class: busy ns}."""

COLUMNS = (
    ("cpu_ns", "cpu"), ("window_ns", "window"), ("busy_ns", "busy"), ("other_steps_ns", "other_steps"),
    ("idle_ns", "idle"),
    ("idle_split_ns", (("host_wait", "host_wait"), ("kernel_wait", "kernel_wait"), ("other", "other"))),
    ("device_ns", "device"), ("kernels", "kernels"), ("gpu_events", "gpu_events"), ("busy_by_class_ns", CLASSES),
    ("compute_ns", "compute"), ("comm_ns", "comm"), ("comm_exposed_ns", "comm_exposed"),
    ("comm_overlapped_ns", "overlapped"), ("launch_cpu_ns", "launch_cpu"), ("launches", "launches"),
    ("sync_cpu_ns", "sync_cpu"), ("syncs", "syncs"), ("threads", "threads"),
)
"""A window's figures, declared once (issue 43): (key, the Figures array holding it for every
window; a tuple of those for a nested object). ``rows()``, ``of()`` and ``Windows.breakdown``
come from it, and ``summary``'s per-step JSON converts each ``*_ns`` key to ``*_us`` by rule
(``report/summary.step_dict``). A new per-step figure: its array in ``__init__``, one row here."""


class Figures:
    """The breakdown figures of every window (arrays indexed like ``Windows.windows``)."""

    def __init__(self, windows, kernel_wait_ns: int, comm: frozenset, non_compute: frozenset, role):
        tr = windows.trace
        t = tr.tree
        ws = windows.windows
        n = len(ws)
        self.n = n
        g, sizes = windows.gpu_flat.astype(np.int64), np.diff(windows.gpu_at)
        seg = np.repeat(np.arange(n), sizes)
        st, en = t.start[g], t.start[g] + t.dur[g]
        steps = np.fromiter((w.node for w in ws), dtype=np.int64, count=n)
        w0, w_end = t.start[steps], t.start[steps] + t.dur[steps]
        w1 = w_end.copy()
        if g.size:
            np.maximum.at(w1, seg, en)
        self.window = w1 - w0
        self.cpu = w_end - w0
        cs, ce = clip(seg, st, en, w0, w1)
        self.busy = union_by(seg, cs, ce, n)
        self.covered, self.host_wait, self.kernel_wait, self.other = self._idle(windows, w0, w1, kernel_wait_ns)
        self.idle = self.window - self.covered
        self.device = np.zeros(n, dtype=np.int64)
        np.add.at(self.device, seg, t.dur[g])
        self.kernels = np.bincount(seg[t.kind[g] == K["kernel"]], minlength=n)
        self.gpu_events = sizes
        klass = tr.classes_of(g) if g.size else np.zeros(0, dtype=object)
        self._classes(seg, klass, cs, ce, n)
        is_comm = np.isin(klass, list(comm)) if g.size else np.zeros(0, dtype=bool)
        compute = ~np.isin(klass, list(non_compute)) if g.size else is_comm
        self.comm = union_by(seg[is_comm], cs[is_comm], ce[is_comm], n)
        self.compute = union_by(seg[compute], cs[compute], ce[compute], n)
        either = is_comm | compute
        self.overlapped = self.comm + self.compute - union_by(seg[either], cs[either], ce[either], n)
        self._runtime(windows, t, role, n)
        self.threads = np.diff(windows.thread_at)
        self.other_steps = self.covered - self.busy
        self.comm_exposed = self.comm - self.overlapped

    def _idle(self, windows, w0, w1, kernel_wait_ns):
        """(covered, host wait, kernel wait, other) per window, from the GPU's merged activity."""
        tr = windows.trace
        t = tr.tree
        a_s, a_e = windows._all_gpu
        n = w0.size
        z = np.zeros(n, dtype=np.int64)
        if not a_s.size:
            return z, w1 - w0, z.copy(), z.copy()  # one gap, the whole window, nothing after it: host wait
        starts = t.start[tr._gpu_nodes]
        order = np.argsort(starts, kind="stable")
        # what ended each gap: the first activity starting at the gap's end, and when its launch ended
        nxt = np.minimum(np.searchsorted(starts[order], a_s, side="left"), order.size - 1)
        enq = windows.launch_end[order[nxt]]
        # the gaps between merged pieces m and m + 1 (window-independent classes), as prefix sums
        gap_s, gap_e = a_e[:-1], a_s[1:]
        gap = gap_e - gap_s
        hw = enq[1:] > gap_s
        kw = ~hw & (enq[1:] >= 0) & (gap <= kernel_wait_ns)
        pre = lambda x: np.r_[0, np.cumsum(x)]  # noqa: E731
        p_len, p_hw, p_kw = pre(a_e - a_s), pre(np.where(hw, gap, 0)), pre(np.where(kw, gap, 0))
        p_gap = pre(gap)
        i = np.searchsorted(a_e, w0, side="right")   # first piece ending after the window opens
        j = np.searchsorted(a_s, w1, side="left")    # pieces [i, j) start before it closes
        some = j > i
        ii, jj = np.minimum(i, a_s.size - 1), np.maximum(j - 1, 0)
        first_s, last_e = np.maximum(a_s[ii], w0), np.minimum(a_e[jj], w1)
        covered = np.where(some, p_len[np.maximum(j, i)] - p_len[i] - (first_s - a_s[ii]) - (a_e[jj] - last_e), 0)
        # gaps between pieces inside the window: m from i to j - 2
        inner = lambda p: np.where(some, p[np.maximum(jj, ii)] - p[ii], 0)  # noqa: E731
        host, kern, other_inner = inner(p_hw), inner(p_kw), inner(p_gap) - inner(p_hw) - inner(p_kw)
        # the gap that opens the window (up to the first piece) and the one that closes it
        lead = np.where(some, first_s - w0, 0)
        e_lead = enq[ii]
        lead_hw = e_lead > w0
        lead_kw = ~lead_hw & (e_lead >= 0) & (lead <= kernel_wait_ns)
        tail = np.where(some, w1 - last_e, w1 - w0)  # nothing enqueued after it in the window: host wait
        host = host + np.where(lead_hw, lead, 0) + tail
        kern = kern + np.where(lead_kw, lead, 0)
        other = other_inner + np.where(~lead_hw & ~lead_kw, lead, 0)
        return covered, host, kern, other

    def _classes(self, seg, klass, cs, ce, n) -> None:
        """Busy time by kernel class per window: every class a window's activity has, even at 0."""
        self._cls_names, self._cls_id, self._cls_value = [], np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._cls_at = np.zeros(n + 1, dtype=np.int64)
        if not seg.size:
            return
        names = sorted(set(klass.tolist()))
        cid = np.searchsorted(np.array(names, dtype=object), klass).astype(np.int64)
        key = seg * len(names) + cid
        value = union_by(key, cs, ce, n * len(names))
        present = np.unique(key)
        self._cls_names, self._cls_id, self._cls_value = names, present % len(names), value[present]
        self._cls_at = np.searchsorted(present // len(names), np.arange(n + 1))

    def classes(self, k: int) -> dict:
        """Window ``k``'s busy time by class (a dict built when asked: 250,000 windows have as many)."""
        a, b = self._cls_at[k], self._cls_at[k + 1]
        if a == b:
            return {}
        names = self._cls_names
        return {names[c]: v for c, v in zip(self._cls_id[a:b].tolist(), self._cls_value[a:b].tolist())}

    def _runtime(self, windows, t, role, n) -> None:
        """Launch and sync CPU time (and counts) per window, each call name's role found once."""
        rt, sizes = windows.runtime_flat.astype(np.int64), np.diff(windows.runtime_at)
        seg = np.repeat(np.arange(n), sizes)
        ids = t.name_id[rt]
        uniq = np.flatnonzero(np.bincount(ids, minlength=len(t.names))) if rt.size else ids[:0]
        wanted = ("launch", "sync")  # the roles counted: a code per name (0: neither), not strings
        code = np.zeros(len(t.names), dtype=np.int8)
        code[uniq] = [wanted.index(x) + 1 if (x := role(t.names[i])) in wanted else 0 for i in uniq.tolist()]
        r = code[ids]
        for c, name in enumerate(wanted, 1):
            m = r == c
            total = np.zeros(n, dtype=np.int64)
            np.add.at(total, seg[m], t.dur[rt[m]])
            setattr(self, f"{name}_cpu", total)
            setattr(self, f"{name}es" if name == "launch" else f"{name}s", np.bincount(seg[m], minlength=n))

    def _column(self, spec) -> list:
        """One COLUMNS entry for every window, as Python values."""
        if spec is CLASSES:
            return [self.classes(k) for k in range(self.n)]
        if isinstance(spec, tuple):  # a nested object: {sub key: its array}
            keys, cols = [k for k, _ in spec], [getattr(self, a).tolist() for _, a in spec]
            return [dict(zip(keys, vals)) for vals in zip(*cols)] if cols else []
        return getattr(self, spec).tolist()

    def rows(self) -> list[dict]:
        """``of(k)`` of every window, built from whole columns (a summary of 250,000 steps)."""
        keys = [key for key, _ in COLUMNS]
        cols = [self._column(spec) for _, spec in COLUMNS]
        return [dict(zip(keys, vals)) for vals in zip(*cols)]

    def of(self, k: int) -> dict:
        """Window ``k``'s figures, as ``Windows.breakdown`` returns them (without the verdict)."""
        def value(spec):
            if spec is CLASSES:
                return self.classes(k)
            if isinstance(spec, tuple):
                return {sub: int(getattr(self, a)[k]) for sub, a in spec}
            return int(getattr(self, spec)[k])
        return {key: value(spec) for key, spec in COLUMNS}
