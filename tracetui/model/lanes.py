"""Timeline lanes as data: which rows a trace has, what each cell of a row shows at a zoom, and
what a time range holds. Pure (no textual, no rich): the timeline widget only paints this.

Lanes follow Perfetto's layout: per process a row of steps and, per host thread, rows of
annotations/modules, ATen ops and runtime launches; per GPU device, per stream the GPU user
annotations above the row of kernels, copies and sets. Each row holds non-nested intervals
(the outermost ones where a kind nests, e.g. ``aten::linear`` over ``aten::addmm``), sorted by
start, so a cell is answered by two binary searches whatever the zoom (``Lane.cells``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import msgspec
import numpy as np

from tracetui.read.events import GPU_KINDS, K, kind_mask
from tracetui.read.source import release
from tracetui.model.windows import _clip, _merged, runtime_role

HOST_ROWS = (
    ("annot", (K["annotation"], K["module"]), "annotations and nn.Module scopes (outermost)"),
    ("ops", (K["op"],), "ATen ops (outermost: an op called by another op is inside it)"),
    ("launch", (K["runtime"],), "runtime and driver calls (launches, copies, syncs)"),
)
"""Rows of one host thread, top to bottom: (row name, node kinds, what the row shows)."""

LABEL_RULES = (
    (lambda name, tid, pid: "autograd" in name.lower(), "autograd",
     "torch names the backward thread pt_autograd_N"),
    (lambda name, tid, pid: tid == pid, "main", "Kineto's main thread has the process id as thread id"),
    (lambda name, tid, pid: isinstance(tid, int) and tid < 0, "runtime thread {tid} (negative id)",
     "CUDA runtime calls filed under CUPTI's id of the calling thread, a pthread id written as a "
     "signed 32-bit number (every such row in HTA's traces holds only cuda_runtime events)"),
    (lambda name, tid, pid: tid == 0, "thread 0 (no thread id: other threads' Python frames)",
     "events recorded with no thread id: Python frames of threads the profiler did not follow "
     "(threading's _bootstrap, Inductor's compile workers, tqdm's monitor), which it could not place"),
)
"""How a host thread is labelled, first match wins; each rule with its reason."""

NEAR_BACKWARD = ("Backward", "backward")
"""Op names that mark a thread running autograd when no thread name says so."""


@dataclass
class Lane:
    """One row of the timeline: non-nested intervals sorted by start."""
    group: str               # "process 425" / "GPU 0": rows are grouped under these
    label: str               # "main ops", "stream 7", ...
    kind: str                # steps | annot | ops | launch | gpu | gpu_annot
    nodes: np.ndarray        # tree node per interval (-1: not in the tree, a GPU user annotation)
    starts: np.ndarray       # ns
    ends: np.ndarray         # ns
    names: list = field(default_factory=list)  # per interval, for intervals with no node
    device: object = None    # GPU lanes: (device, stream)
    _pmax: np.ndarray | None = None
    _parg: np.ndarray | None = None

    def __post_init__(self) -> None:
        o = np.argsort(self.starts, kind="stable")
        self.nodes, self.starts, self.ends = self.nodes[o], self.starts[o], self.ends[o]
        if self.names:
            self.names = [self.names[i] for i in o.tolist()]
        n = self.starts.size
        self._pmax = np.maximum.accumulate(self.ends) if n else self.ends
        # index of the interval holding the running maximum end (the latest such)
        self._parg = np.maximum.accumulate(np.where(self.ends == self._pmax, np.arange(n), 0)) if n else self.ends

    def __len__(self) -> int:
        return int(self.starts.size)

    def cells(self, lo: float, hi: float, width: int) -> tuple[np.ndarray, np.ndarray]:
        """What each of ``width`` cells over [lo, hi) shows: (interval index or -1, merged flag).

        A cell shows one interval when it is the only one there (however little of the cell it
        covers); it is ``merged`` when several share it (narrow events: Perfetto's coverage), and
        then names the one reaching furthest. O(width log n) at any zoom: binary searches into
        the sorted starts and the running maximum of the ends."""
        if not len(self) or width <= 0:
            return np.full(width, -1, dtype=np.int64), np.zeros(width, dtype=bool)
        px = (hi - lo) / width
        t0 = lo + px * np.arange(width)
        t1 = t0 + px
        i0 = np.searchsorted(self.starts, t0, side="right")
        i1 = np.searchsorted(self.starts, t1, side="left")
        b = np.maximum(i0 - 1, 0)
        before = (i0 > 0) & (self._pmax[b] > t0)  # an interval started earlier and reaches in
        inside = i1 - i0                           # intervals starting inside the cell
        j = np.maximum(i1 - 1, 0)
        covered = before | (inside > 0)
        rep = np.where(inside > 0, np.where(inside == 1, i0, self._parg[j]), np.where(before, self._parg[b], -1))
        return rep, covered & (inside + before > 1)

    def index_at(self, t: float) -> int:
        """The interval holding time ``t``, else the nearest one (by distance to its edges); -1 if empty."""
        n = len(self)
        if not n:
            return -1
        j = int(np.searchsorted(self.starts, t, side="right")) - 1
        if j >= 0 and self._pmax[j] > t:
            k = int(self._parg[j])
            if self.starts[k] <= t < self.ends[k]:
                return k
        cands = [c for c in (j, j + 1) if 0 <= c < n]
        if j >= 0:
            cands.append(int(self._parg[j]))
        return min(cands, key=lambda c: max(self.starts[c] - t, t - self.ends[c], 0))

    def index_of_node(self, node: int) -> int:
        hit = np.nonzero(self.nodes == node)[0]
        return int(hit[0]) if hit.size else -1

    def name(self, trace, i: int) -> str:
        n = int(self.nodes[i])
        return trace.name(n) if n >= 0 else self.names[i]


def thread_label(store, pid, tid) -> str:
    """A host thread for people: main, autograd, or what its id means (``LABEL_RULES``)."""
    name = store.thread_names.get((pid, tid)) or ""
    for rule, label, _why in LABEL_RULES:
        if rule(name, tid, pid):
            return label.format(tid=tid)
    return f"thread {tid}"


def _outermost(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of the intervals (sorted by start, longest first on ties) not inside an earlier one."""
    if not starts.size:
        return np.zeros(0, dtype=bool)
    before = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(ends)[:-1]]
    return starts >= before


def gpu_annotations(store) -> list[dict]:
    """The ``gpu_user_annotation`` events of the file (the store skips their category): found by
    a byte search of the decoded source, each event decoded on its own. [] without a source."""
    src = store.source_bytes()
    if not src:
        return []
    out, pos = [], 0
    needle = b'"gpu_user_annotation"'
    dec = msgspec.json.Decoder()
    while True:
        pos = src.find(needle, pos)
        if pos < 0:
            break
        a = src.rfind(b"{", 0, pos)
        b = _close(src, a) if a >= 0 else -1
        pos += len(needle)
        if b < 0:
            continue
        try:
            e = dec.decode(src[a:b + 1])
        except msgspec.DecodeError:
            continue
        if not isinstance(e, dict) or e.get("cat") != "gpu_user_annotation" or e.get("ph") != "X":
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
            continue
        out.append({"name": str(e.get("name", "")), "device": e.get("pid"), "stream": e.get("tid"),
                    "start": int(round(ts * 1000)), "end": int(round((ts + max(dur, 0)) * 1000))})
    release(src)  # a mapped file (read/source.py): the pages the search read leave this process
    return out


def _close(src: bytes, a: int, limit: int = 1 << 16) -> int:
    """Index of the brace closing the object opened at ``a`` (strings skipped), -1 past ``limit``."""
    depth, i, n, in_str = 0, a, min(len(src), a + limit), False
    while i < n:
        c = src[i]
        if in_str:
            if c == 0x5C:  # backslash
                i += 1
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def build_lanes(trace) -> list[Lane]:
    """Every lane of the trace, in display order: host processes (steps, then threads: main,
    autograd, others), then GPU devices (per stream: its user annotations, then its activity)."""
    t, store = trace.tree, trace.store
    nodes = np.arange(len(t.kind))
    ev = t.ev
    has_ev = ev >= 0
    track = np.where(has_ev, store.track[np.maximum(ev, 0)], -1)
    ends = t.start + t.dur
    lanes: list[Lane] = []
    host_keys = [(i, k) for i, k in enumerate(store.track_keys) if k and k[0] != "gpu"]
    by_pid: dict = {}
    for i, k in host_keys:
        by_pid.setdefault(k[0], []).append((i, k[1]))
    step_nodes = np.asarray(trace.steps, dtype=np.int64)
    step_pid = [store.track_keys[store.track[t.ev[s]]][0] for s in step_nodes.tolist()]

    def order(item):
        i, tid = item
        label = thread_label(store, pid, tid)
        return ({"main": 0, "autograd": 1}.get(label, 2), _num(tid))

    host_kind = t.kind
    for pid in sorted(by_pid, key=_num):
        group = f"process {pid}"
        mine = step_nodes[[p == pid for p in step_pid]] if step_nodes.size else step_nodes
        if mine.size:
            lanes.append(Lane(group, "steps", "steps", mine, t.start[mine], ends[mine]))
        for trk, tid in sorted(by_pid[pid], key=order):  # noqa: B007
            on = nodes[track == trk]
            label = thread_label(store, pid, tid)
            if label.startswith("thread") and _mostly_backward(trace, on):
                label = f"autograd {tid}"
            for row, kinds, _why in HOST_ROWS:
                sel = on[kind_mask(host_kind[on], kinds)]
                if not sel.size:
                    continue
                o = np.lexsort((-t.dur[sel], t.start[sel]))
                sel = sel[o]
                sel = sel[_outermost(t.start[sel], ends[sel])]
                lanes.append(Lane(group, f"{label} {row}", row, sel, t.start[sel], ends[sel]))
    gpu = trace._gpu_nodes
    annots = gpu_annotations(store) if gpu.size else []
    gkeys = sorted({store.track_keys[k] for k in np.unique(track[gpu]).tolist()}, key=lambda k: (_num(k[1]), _num(k[2])))
    for key in gkeys:
        trk = store.track_keys.index(key)
        _, dev, stream = key
        group = f"GPU {dev}"
        mine = [a for a in annots if a["device"] == dev and a["stream"] == stream]
        if mine:
            st = np.array([a["start"] for a in mine], dtype=np.int64)
            en = np.array([a["end"] for a in mine], dtype=np.int64)
            o = np.lexsort((st - en, st))
            keep = _outermost(st[o], en[o])
            sel = o[keep]
            lanes.append(Lane(group, f"stream {stream} annot", "gpu_annot", np.full(sel.size, -1, dtype=np.int64),
                              st[sel], en[sel], names=[mine[i]["name"] for i in sel.tolist()], device=(dev, stream)))
        g = gpu[track[gpu] == trk]
        lanes.append(Lane(group, f"stream {stream}", "gpu", g, t.start[g], ends[g], device=(dev, stream)))
    return lanes


def _num(v) -> tuple:
    """Sort key: numbers in numeric order, before any other id (ids can be strings in a file)."""
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def _mostly_backward(trace, nodes: np.ndarray) -> bool:
    """A thread whose ops are mostly autograd's (``...Backward0``): the backward thread unnamed."""
    t = trace.tree
    ops = nodes[t.kind[nodes] == K["op"]]
    if not ops.size:
        return False
    names = t.names
    back = sum(1 for i in t.name_id[ops].tolist() if any(w in names[i] for w in NEAR_BACKWARD))
    return back * 2 > ops.size


def extent(lanes: list[Lane]) -> tuple[int, int]:
    """The earliest start and latest end over every lane (0, 1 when there is nothing)."""
    s = [int(l.starts.min()) for l in lanes if len(l)]
    e = [int(l.ends.max()) for l in lanes if len(l)]
    return (min(s), max(max(e), min(s) + 1)) if s else (0, 1)


TICK_STEPS = (1, 2, 5)
UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns"))


def ticks(lo: float, hi: float, width: int, origin: float, every: int = 12) -> list[tuple[int, str]]:
    """Axis ticks over [lo, hi): (cell, label) about every ``every`` cells, at round times from
    ``origin`` (1, 2 or 5 times a power of ten), labelled in the unit that suits the spacing."""
    span = max(hi - lo, 1)
    raw = span / max(1, width / every)
    p = 10 ** math.floor(math.log10(raw))
    step = next((m * p for m in TICK_STEPS if m * p >= raw), 10 * p)
    scale, unit = next(((s, u) for s, u in UNITS if step >= 0.1 * s), (1, "ns"))  # 0.5ms, not 500µs
    first = math.ceil((lo - origin) / step)
    out = []
    k = first
    while True:
        tt = origin + k * step
        if tt >= hi:
            break
        cell = int((tt - lo) / span * width)
        if 0 <= cell < width:
            v = k * step / scale
            out.append((cell, f"{v:,.{_decimals(step / scale)}f}{unit}"))
        k += 1
    return out


def _decimals(x: float) -> int:
    return 0 if x >= 1 else min(3, -math.floor(math.log10(x)))


def fmt_time(ns: float) -> str:
    """One unit rule for every time the timeline prints: the largest unit where it is >= 1."""
    a = abs(ns)
    for scale, unit in UNITS:
        if a >= scale or unit == "ns":
            v = ns / scale
            return f"{v:,.0f}{unit}" if unit == "ns" else f"{v:,.{2 if abs(v) < 10 else 1}f}{unit}"
    return f"{ns}ns"


def range_summary(trace, lanes: list[Lane], lo: int, hi: int, top: int = 5) -> dict:
    """What [lo, hi) holds: per GPU stream busy and idle (union of its activity, clipped), the
    kernels and ops with the most time inside the range (clipped; ops inclusive, by name), and
    the launches that started in it (count and host time)."""
    t = trace.tree
    window = max(hi - lo, 1)
    streams = []
    for lane in lanes:
        if lane.kind != "gpu":
            continue
        s, e = _merged(*_clip(lane.starts, lane.ends, lo, hi))
        busy = int((e - s).sum())
        streams.append({"stream": lane.label, "group": lane.group, "busy_ns": busy, "idle_ns": window - busy})
    gpu = trace._gpu_nodes
    kern = _by_name(trace, gpu, lo, hi)
    ops_all = np.nonzero(t.kind == K["op"])[0]
    ops = _by_name(trace, ops_all, lo, hi)
    rt = np.nonzero(t.kind == K["runtime"])[0]
    inside = rt[(t.start[rt] >= lo) & (t.start[rt] < hi)]
    names = t.names
    launch = [int(i) for i in inside.tolist() if runtime_role(names[t.name_id[i]]) == "launch"]
    return {"window_ns": window, "streams": streams, "kernels": kern[:top], "ops": ops[:top],
            "launches": len(launch), "launch_ns": int(t.dur[launch].sum()) if launch else 0}


def _by_name(trace, nodes: np.ndarray, lo: int, hi: int) -> list[dict]:
    """Nodes overlapping [lo, hi) aggregated by name: count and time clipped to the range, most first."""
    t = trace.tree
    s, e = t.start[nodes], t.start[nodes] + t.dur[nodes]
    m = (e > lo) & (s < hi)
    nodes = nodes[m]
    clipped = np.minimum(e[m], hi) - np.maximum(s[m], lo)
    if not nodes.size:
        return []
    nid = t.name_id[nodes]
    uniq, inv = np.unique(nid, return_inverse=True)
    tot = np.bincount(inv, weights=clipped, minlength=uniq.size)
    cnt = np.bincount(inv, minlength=uniq.size)
    o = np.argsort(-tot, kind="stable")
    return [{"name": t.names[int(uniq[k])], "count": int(cnt[k]), "time_ns": int(tot[k])} for k in o.tolist()]
