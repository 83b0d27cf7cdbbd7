"""The memory model's figures over its columns: curves and peaks per device, and the TensorBoard
plugin's per-op statistics (``memory.py``'s docstring defines both). Mixed into ``Memory``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracetui.read.events import HOST_KINDS, K

STATS_CACHE = 16
"""Windows whose per-op statistics are kept (the memory view asks again on a device key)."""


@dataclass
class Peak:
    """A device's highest ``Total Allocated`` (in the whole trace or a window) and what held it."""
    device: str
    at: int            # instant index (time order) right after which the peak was reached; -1: none
    ts: int            # ns
    allocated: int     # bytes (the file's Total Allocated there)
    reserved: int      # bytes (Total Reserved there)
    live: np.ndarray   # allocation instants live at the peak, largest first
    held_before: int   # allocated minus the live allocations: memory allocated before the trace began


@dataclass
class OpStat:
    """One row of the per-op table (TensorBoard plugin definitions, see the module docstring)."""
    device: str
    name: str
    calls: int
    alloc_count: int
    alloc_bytes: int
    self_alloc_count: int
    self_alloc_bytes: int
    increase: int
    self_increase: int
    nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # its calls with memory



class Peaks:
    """Needs ``Memory``'s columns (dev, ts, total, reserved, nbytes, pair), ``devices``, ``trace``."""

    def series(self, device: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ts, allocated, reserved) of one device at each of its instants, in time order."""
        m = self.dev == device
        return self.ts[m], self.total[m], self.reserved[m]

    def peak(self, device: int, lo: int | None = None, hi: int | None = None) -> Peak | None:
        """The highest Total Allocated of ``device`` in [lo, hi) (ns; the whole trace by default),
        counting the level carried into the window; None when the device has no instant by hi."""
        idx = np.flatnonzero(self.dev == device)
        if not idx.size:
            return None
        ts = self.ts[idx]
        a = 0 if lo is None else int(np.searchsorted(ts, lo, side="left"))
        b = idx.size if hi is None else int(np.searchsorted(ts, hi, side="left"))
        cand = idx[max(a - 1, 0):b] if a > 0 else idx[a:b]  # the instant before lo sets the level at lo
        if not cand.size:
            return None
        k = int(cand[int(np.argmax(self.total[cand]))])
        live = self.live_at(k)
        at_ts = int(self.ts[k]) if lo is None else max(int(self.ts[k]), lo)
        return Peak(self.devices[device], k, at_ts, int(self.total[k]), int(self.reserved[k]), live,
                    int(self.total[k]) - int(self.nbytes[live].sum()))

    def live_at(self, k: int) -> np.ndarray:
        """Allocations of instant ``k``'s device made at or before ``k`` and not freed by then,
        largest first."""
        d = self.dev[k]
        a = np.flatnonzero((self.nbytes[:k + 1] > 0) & (self.dev[:k + 1] == d))
        p = self.pair[a]
        a = a[(p < 0) | (p > k)]
        return a[np.argsort(-self.nbytes[a], kind="stable")]

    def step_peaks(self, device: int) -> list[tuple[int, Peak]]:
        """(step node, its peak) of every step, each over the step's host interval."""
        out = []
        tr = self.trace
        for s in tr.steps:
            w = tr.step_window(s)
            p = self.peak(device, w.start, w.end)
            if p is not None:
                out.append((s, p))
        return out



class OpStats:
    """Needs ``Memory``'s columns, ``devices``, ``trace`` and its ``_stats`` cache."""

    def op_stats(self, lo: int | None = None, hi: int | None = None) -> list[OpStat]:
        """The TensorBoard plugin's memory statistics per (device, op name) over instants in
        [lo, hi) (ns; all by default), sorted by self size increase, largest first."""
        key = (lo, hi)
        if key not in self._stats:
            if len(self._stats) >= STATS_CACHE:
                self._stats.pop(next(iter(self._stats)))
            self._stats[key] = self._op_stats(lo, hi)
        return self._stats[key]

    def _op_stats(self, lo: int | None, hi: int | None) -> list[OpStat]:
        t = self.trace.tree
        sel = np.ones(len(self), dtype=bool)
        if lo is not None:
            sel &= self.ts >= lo
        if hi is not None:
            sel &= self.ts < hi
        # an op torch merges into its same-name parent (Rollups.dup) is no node of the plugin's
        # tree either (its remove_dup_nodes): neither a call nor a row level of its own
        dup = getattr(self.trace.roll, "dup", None)
        is_op = (t.kind == K["op"]) & (~dup if dup is not None else True)
        out: list[OpStat] = []
        op_nodes = np.flatnonzero(is_op)
        if lo is not None or hi is not None:
            st = t.start[op_nodes]
            op_nodes = op_nodes[((st >= lo) if lo is not None else True) & ((st < hi) if hi is not None else True)]
        calls = np.bincount(t.name_id[op_nodes], minlength=len(t.names))
        for d, label in enumerate(self.devices):
            m = sel & (self.dev == d) & (self.op >= 0)
            own, nb = self.op[m], self.nbytes[m]
            # (op node, bytes, is its own op) for every op on each instant's path, then summed per
            # node over the nodes touched only (not bincounts over the whole tree per level)
            nodes_l, bytes_l, self_l = [], [], []
            cur, pend = own, np.ones(own.size, dtype=bool)  # pend: the instant's self op not met yet
            while cur.size:
                here = is_op[cur]
                nodes_l.append(cur[here])
                bytes_l.append(nb[here])
                self_l.append(pend[here])
                pend = pend & ~here
                up = t.cparent[cur]
                keep = up > 0
                cur, nb, pend = up[keep], nb[keep], pend[keep]
            if not nodes_l or not sum(x.size for x in nodes_l):
                continue
            out += _rows(t, label, calls, np.concatenate(nodes_l), np.concatenate(bytes_l), np.concatenate(self_l))
        out.sort(key=lambda s: (-s.self_increase, -s.alloc_bytes, s.device, s.name))
        return out

    def of_node(self, node: int) -> dict:
        """What ``node`` allocated and freed, per device: everything in it (a step: its window
        on the whole process; a host event: the instants on its thread with start <= t < end)
        and its own part (self: the instants whose innermost op it is)."""
        t = self.trace.tree
        if t.kind[node] == K["step"]:
            inside = self.step == node
        elif t.ev[node] >= 0 and t.kind[node] in HOST_KINDS:
            lo = int(np.searchsorted(self.ts, t.start[node], side="left"))
            hi = int(np.searchsorted(self.ts, t.start[node] + t.dur[node], side="left"))
            inside = np.zeros(len(self), dtype=bool)
            inside[lo:hi] = self.track[lo:hi] == self.trace.store.track[t.ev[node]]
        else:
            return {}
        own = self.op == node
        nb = self.nbytes
        out = {}
        for d, label in enumerate(self.devices):
            m = inside & (self.dev == d)
            if not m.any():
                continue
            s = own & (self.dev == d)
            out[label] = {
                "allocs": int((m & (nb > 0)).sum()), "alloc_bytes": int(nb[m & (nb > 0)].sum()),
                "frees": int((m & (nb < 0)).sum()), "freed_bytes": int(-nb[m & (nb < 0)].sum()),
                "self_allocs": int((s & (nb > 0)).sum()), "self_alloc_bytes": int(nb[s & (nb > 0)].sum()),
                "self_frees": int((s & (nb < 0)).sum()), "self_freed_bytes": int(-nb[s & (nb < 0)].sum()),
                "blocks": np.flatnonzero(m & (nb > 0)),
            }
        return out




def _rows(t, label: str, calls: np.ndarray, nodes_all: np.ndarray, b_all: np.ndarray, s_all: np.ndarray) -> list[OpStat]:
    """One device's rows: the instants' bytes on every op of their paths (``s_all``: the op is
    the instant's own), summed per op node, then per name over the nodes with memory."""
    out: list[OpStat] = []
    uniq, inv = np.unique(nodes_all, return_inverse=True)
    k = uniq.size
    alloc = b_all > 0

    def total(w, mask):
        return np.bincount(inv[mask], weights=w[mask], minlength=k).round().astype(np.int64)

    ones = np.ones(b_all.size)
    cnt, byt, inc = total(ones, alloc), total(b_all, alloc), total(b_all, np.ones(b_all.size, dtype=bool))
    s_cnt, s_bytes, s_inc = total(ones, alloc & s_all), total(b_all, alloc & s_all), total(b_all, s_all)
    live = (cnt != 0) | (inc != 0) | (s_inc != 0)
    idx = np.flatnonzero(live)
    nid = t.name_id[uniq[idx]]
    order = np.argsort(nid, kind="stable")
    idx, nid = idx[order], nid[order]
    for grp in np.split(idx, np.flatnonzero(np.diff(nid)) + 1):
        out.append(OpStat(label, t.name(int(uniq[grp[0]])), int(calls[t.name_id[uniq[grp[0]]]]),
                          int(cnt[grp].sum()), int(byt[grp].sum()), int(s_cnt[grp].sum()),
                          int(s_bytes[grp].sum()), int(inc[grp].sum()), int(s_inc[grp].sum()), uniq[grp]))
    return out
