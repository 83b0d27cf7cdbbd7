"""Every rank of a job as lanes of one timeline: compute, communication and copies per rank (and
per stream, or per thread on a CPU rank), on the clock the job's analysis aligned.

Built from the job's tables, never from the traces: a rank's ``kernels`` (GPU ranks), its
``ops`` (CPU ranks: its work) and its ``collectives`` (the backend's own intervals, gloo's
``gloo:*`` on its worker threads), the ones the job view loaded or the ones an index holds
(``from_index``). Each lane keeps, per class, its intervals merged (disjoint, sorted, in ns on the
aligned clock: the rank's offset subtracted) with their running lengths, so how much of any time
cell each class covers is two binary searches (``Lane.cover``): drawing a screen of lanes costs the
lanes shown, not the events behind them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CLASSES = ("compute", "comm", "copy")
"""What a lane shows, in drawing priority on ties; time none covers is idle."""

KERNEL_CLASS = {"communication": "comm", "memcpy": "copy", "memset": "copy"}
"""A kernel's taxonomy class -> its lane class; every other class is compute."""


def _merged(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals as their union: disjoint, sorted (empty and negative ones dropped)."""
    keep = e > s
    s, e = s[keep], e[keep]
    if not s.size:
        return s.astype(np.int64), e.astype(np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], np.maximum.accumulate(e[o])
    new = np.r_[True, s[1:] > e[:-1]]
    idx = np.nonzero(new)[0]
    ends = np.r_[e[idx[1:] - 1], e[-1]]
    return s[idx].astype(np.int64), ends.astype(np.int64)


def _minus(s, e, cs, ce) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals (s, e) less merged intervals (cs, ce)."""
    if not cs.size or not s.size:
        return s, e
    pts = np.r_[s, e, cs, ce]
    pts = np.unique(pts)
    mid = (pts[:-1] + pts[1:]) // 2
    inside = _covers(s, e, mid) & ~_covers(cs, ce, mid)
    return _merged(pts[:-1][inside], pts[1:][inside])


def _covers(s, e, t) -> np.ndarray:
    k = np.searchsorted(s, t, side="right") - 1
    return (k >= 0) & (t < e[np.maximum(k, 0)]) if s.size else np.zeros(t.size, dtype=bool)


@dataclass
class Lane:
    """One row of the timeline: a rank, or one of its streams / threads (``sub``)."""
    rank: int
    sub: str | None
    ivs: dict = field(default_factory=dict)   # class -> (starts, ends), merged, aligned ns
    cum: dict = field(default_factory=dict)   # class -> length of the intervals before each

    def add(self, klass: str, s: np.ndarray, e: np.ndarray) -> None:
        s, e = _merged(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64))
        self.ivs[klass] = (s, e)
        self.cum[klass] = np.r_[0, np.cumsum(e - s)[:-1]].astype(np.int64) if s.size else s

    def _upto(self, klass: str, t: np.ndarray) -> np.ndarray:
        s, e = self.ivs[klass]
        if not s.size:
            return np.zeros(t.size, dtype=np.int64)
        k = np.searchsorted(s, t, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(t - s[kk], 0, e[kk] - s[kk])
        return np.where(k >= 0, self.cum[klass][kk] + part, 0)

    def cover(self, edges: np.ndarray) -> dict:
        """Per class, the ns it covers in each cell between consecutive ``edges`` (int64 ns)."""
        return {k: np.diff(self._upto(k, edges)) for k in self.ivs}

    def extent(self) -> tuple[int, int] | None:
        got = [(int(s[0]), int(e[-1])) for s, e in self.ivs.values() if s.size]
        return (min(a for a, _ in got), max(b for _, b in got)) if got else None

    def total(self, klass: str) -> int:
        s, e = self.ivs.get(klass, (np.zeros(0), np.zeros(0)))
        return int((e - s).sum())


@dataclass
class JobLanes:
    """Per rank its lane (``lanes``) and its stream / thread lanes (``subs``); the job's extent."""
    ranks: list
    lanes: dict
    subs: dict
    start: int
    end: int


def rank_lanes(rank: int, offset: int, kernels: dict | None, ops: dict | None,
               coll: dict | None) -> tuple[Lane, list[Lane]]:
    """A rank's lane and its sub-lanes from its tables (columns as lists or arrays): a GPU rank
    (kernels) by its kernels' classes and streams; a CPU rank by its ops (the collective ops, the
    taxonomy's communication ops) and its backend's annotations (communication)."""
    from tracetui.jobs.tables import is_comm_op
    a = lambda t, c: np.asarray((t or {}).get(c, []))  # noqa: E731
    ann = [i for i, src in enumerate((coll or {}).get("source", [])) if src == "annotation"]
    c_s, c_e = a(coll, "start_ns")[ann].astype(np.int64) - offset, a(coll, "end_ns")[ann].astype(np.int64) - offset
    lane, subs = Lane(rank, None), []
    if len(a(kernels, "start_ns")):
        ks = a(kernels, "start_ns").astype(np.int64) - offset
        ke = ks + a(kernels, "dur_ns").astype(np.int64)
        kc = np.array([KERNEL_CLASS.get(c, "compute") for c in a(kernels, "class").tolist()], dtype=object)
        streams = a(kernels, "stream")
        for k in CLASSES:
            m = kc == k
            lane.add(k, np.r_[ks[m], c_s] if k == "comm" else ks[m], np.r_[ke[m], c_e] if k == "comm" else ke[m])
        for st in sorted(set(streams.tolist())):
            sub = Lane(rank, f"stream {st}")
            for k in CLASSES:
                m = (kc == k) & (streams == st)
                sub.add(k, ks[m], ke[m])
            subs.append(sub)
    else:
        os_ = a(ops, "start_ns").astype(np.int64) - offset
        oe = os_ + a(ops, "dur_ns").astype(np.int64)
        names = a(ops, "name").tolist()
        is_c = np.array([is_comm_op(str(n)) for n in names], dtype=bool)
        cs, ce = _merged(np.r_[c_s, os_[is_c]], np.r_[c_e, oe[is_c]])
        lane.add("comm", cs, ce)
        ws, we = _minus(*_merged(os_[~is_c], oe[~is_c]), cs, ce)
        lane.add("compute", ws, we)
        lane.add("copy", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        tids = a(ops, "tid")
        for tid in sorted(set(tids.tolist()), key=str):
            sub = Lane(rank, f"tid {tid}")
            m = tids == tid
            sub.add("compute", os_[m & ~is_c], oe[m & ~is_c])
            sub.add("comm", os_[m & is_c], oe[m & is_c])
            subs.append(sub)
        if c_s.size:
            sub = Lane(rank, "backend")
            sub.add("comm", c_s, c_e)
            subs.append(sub)
    return lane, subs


def offsets_of(doc: dict) -> dict:
    """rank -> clock offset (ns) from a ``ranks`` document (``per_rank[].offset_us``)."""
    return {p["rank"]: round(p["offset_us"] * 1000) for p in doc["per_rank"]}


def _assemble(parts: list) -> JobLanes:
    lanes = {r: ln for r, ln, _ in parts}
    subs = {r: s for r, _, s in parts}
    ext = [x for x in (ln.extent() for ln in lanes.values()) if x]
    start = min((a for a, _ in ext), default=0)
    end = max((b for _, b in ext), default=start + 1)
    return JobLanes(sorted(lanes), lanes, subs, start, max(end, start + 1))


def from_tables(tables: list[dict], offsets: dict) -> JobLanes:
    """The lanes of the ranks that loaded (``tables.load_rank``'s results; the skipped left out)."""
    parts = []
    for t in tables:
        if "skipped" in t:
            continue
        r = t["info"]["rank"][0]
        parts.append((r, *rank_lanes(r, offsets.get(r, 0), t.get("kernels"), t.get("ops"), t.get("collectives"))))
    return _assemble(parts)


def from_index(index: Path, offsets: dict) -> JobLanes:
    """The lanes of an index's ranks, from its Parquet tables (``index.read_columns``: the columns
    used, nothing else; a CPU rank's ops read only where it has no kernels)."""
    from tracetui.jobs.index import read_columns
    coll = read_columns(index, "collectives", ["rank", "source", "start_ns", "end_ns"])
    by_rank: dict = {}
    for i, r in enumerate(coll["rank"]):
        by_rank.setdefault(r, []).append(i)
    parts = []
    for r in sorted(offsets):
        rows = by_rank.get(r, [])
        c = {k: [coll[k][i] for i in rows] for k in ("source", "start_ns", "end_ns")}
        kern = read_columns(index, "kernels", ["start_ns", "dur_ns", "class", "stream"], rank=r)
        ops = None if kern else read_columns(index, "ops", ["name", "start_ns", "dur_ns", "tid"], rank=r)
        parts.append((r, *rank_lanes(r, offsets[r], kern, ops, c)))
    return _assemble(parts)
