"""Memory (``profile_memory=True``): where the bytes went, per device, step, op and module.

Each ``[memory]`` instant is one allocation (``Bytes`` > 0) or free (``Bytes`` < 0) by the
caching allocator of one device, written on the thread that asked for it while the op that
asked was running, with the device's running ``Total Allocated`` / ``Total Reserved`` after it.
From those alone:

- **over time**: allocated and reserved per device (CPU, each GPU) at every instant;
- **lifetimes**: an allocation pairs with the next free of the same address on the same device
  (the allocator cannot hand out an address twice without freeing it); allocations with no such
  free are *never freed inside the trace* (a leak, or memory kept across steps); frees with no
  allocation before them free memory allocated before the trace began;
- **attribution**: an instant at time t on thread T belongs to the deepest host event on T with
  start <= t < end (the TensorBoard plugin's half-open rule, so an instant at the very end of one
  op and the start of the next is counted once), and through the tree's containment parents to
  its innermost ATen op, ``nn.Module`` scope (for backward ops, the module of the forward op
  they came from), Python frame, and step (the step whose host interval on the same process
  holds t: a step is a window of the whole process, windows.py, or of the processes a step marker
  alone on its pid claims, ``StepWindow.pids``);
- **peaks**: the instant where a device's ``Total Allocated`` is highest (in the whole trace or
  in a step), and the allocations live there, grouped by the op, module and step that made them;
- **per-op statistics**, as the TensorBoard plugin defines them (kineto ``tb_plugin/README.md``,
  "Memory View > Memory Statistics"; ``torch_tb_profiler/profiler/memory_parser.py``):
  *calls*: how many times the op was called; *allocation count / size*: allocations (count, sum
  of bytes, frees ignored) made by the op including its child ops; *self allocation count /
  size*: the same excluding child ops; *size increase*: allocation bytes minus freed bytes,
  including child ops; *self size increase*: the same excluding child ops. As in the plugin, an
  op's figures sum over its calls, and the row of a name sums the figures of its calls (an op
  nested in an op of the same name counts in both); only ATen ops (``cpu_op``) have rows, one
  per device; rows with nothing allocated or freed are left out.

Everything here is columns (numpy) in time order; nothing imports textual or rich.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np

from tracetui.read.events import HOST_KINDS, K, kind_mask
from tracetui.model.memory_stats import STATS_CACHE, OpStat, OpStats, Peak, Peaks  # noqa: F401 (re-exported)

DEVICE_TYPES = {0: "CPU", 1: "GPU"}
"""c10::DeviceType of ``Device Type``: 0 CPU, 1 CUDA (a GPU is labelled with its ``Device Id``)."""

TOP_DEFAULT = 10
"""Rows of each holder grouping and of the op table in reports, unless asked otherwise."""


class _MemArgs(msgspec.Struct, gc=False):
    """The args of one ``[memory]`` instant, typed (decoded in one call for all of them)."""
    addr: int = msgspec.field(default=0, name="Addr")
    nbytes: int = msgspec.field(default=0, name="Bytes")
    total: int = msgspec.field(default=-1, name="Total Allocated")
    reserved: int = msgspec.field(default=-1, name="Total Reserved")
    dev_type: int = msgspec.field(default=-1, name="Device Type")
    dev_id: int = msgspec.field(default=-1, name="Device Id")


_list_decoder = msgspec.json.Decoder(list[_MemArgs])
_any = msgspec.json.Decoder()
_FIELDS = (("addr", "Addr", 0), ("nbytes", "Bytes", 0), ("total", "Total Allocated", -1),
           ("reserved", "Total Reserved", -1), ("dev_type", "Device Type", -1), ("dev_id", "Device Id", -1))


def fmt_bytes(n: int) -> str:
    """Bytes for people, in binary units (allocators and OOM messages use them): 47.3 KiB."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{n} B"


def _int(v, default: int) -> int:
    if type(v) is int:
        return v
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return default


def _decode(raws: list[bytes]) -> tuple[dict, int]:
    """Columns of the instants' args, and how many had args of a wrong type (read as defaults)."""
    try:
        rows = _list_decoder.decode(b"[" + b",".join(raws) + b"]")
        return {f: [getattr(r, f) for r in rows] for f, _, _ in _FIELDS}, 0
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    cols: dict = {f: [] for f, _, _ in _FIELDS}
    bad = 0
    for raw in raws:
        try:
            d = _any.decode(raw)
        except msgspec.DecodeError:
            d = None
        if not isinstance(d, dict):
            d, bad = {}, bad + 1
        for f, key, default in _FIELDS:
            v = _int(d.get(key, default), default)
            bad += key in d and v == default and d.get(key) != default
            cols[f].append(v)
    return cols, bad


def _i64(values: list) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        return np.asarray([v if -(1 << 63) <= v < (1 << 63) else -1 for v in values], dtype=np.int64)


@dataclass
class Memory(Peaks, OpStats):
    """Every ``[memory]`` instant of a trace as columns in time order (ts, then file order): the
    basic sets and lifetimes and the grouping here, the curves and peaks (``memory_stats.Peaks``)
    and the per-op statistics (``memory_stats.OpStats``) mixed in."""
    trace: object
    devices: list[str]          # labels, e.g. ["CPU", "GPU0"]
    ts: np.ndarray              # ns
    dev: np.ndarray             # index into devices
    addr: np.ndarray            # interned address (per device pairing only compares equality)
    nbytes: np.ndarray          # > 0 allocation, < 0 free
    total: np.ndarray           # Total Allocated after this instant
    reserved: np.ndarray        # Total Reserved after this instant
    pid: np.ndarray             # object: the process that allocated
    track: np.ndarray           # the store's track of its thread; -1 when the thread has no events
    node: np.ndarray            # deepest host event (tree node) containing the instant; -1 none
    op: np.ndarray              # innermost ATen op (node) containing it; -1 none
    module: np.ndarray          # nn.Module scope (node); -1 none
    backward: np.ndarray        # bool: the module is the forward op's (the instant is in backward)
    frame: np.ndarray           # innermost Python frame (node); -1 none
    step: np.ndarray            # step (node) whose host interval holds it; -1 none
    pair: np.ndarray            # the matching free of an allocation, the allocation of a free; -1
    file_index: np.ndarray      # position in traceEvents
    wrong_types: int = 0
    _stats: dict = field(default_factory=dict, repr=False)  # op_stats per window, recent ones

    def __len__(self) -> int:
        return int(self.ts.size)

    # ---- basic sets
    @property
    def allocs(self) -> np.ndarray:
        return np.flatnonzero(self.nbytes > 0)

    @property
    def frees(self) -> np.ndarray:
        return np.flatnonzero(self.nbytes < 0)

    def never_freed(self, device: int | None = None) -> np.ndarray:
        """Allocations with no free inside the trace, largest first."""
        a = np.flatnonzero((self.nbytes > 0) & (self.pair < 0) & ((self.dev == device) if device is not None else True))
        return a[np.argsort(-self.nbytes[a], kind="stable")]

    def unmatched_frees(self, device: int | None = None) -> np.ndarray:
        """Frees of memory allocated before the trace began (no allocation of theirs is in it)."""
        return np.flatnonzero((self.nbytes < 0) & (self.pair < 0) & ((self.dev == device) if device is not None else True))

    def device_of(self, label: str) -> int:
        return self.devices.index(label)

    def largest_device(self) -> int:
        """The device whose Total Allocated reaches highest (the first on a tie): where an OOM
        hunt starts, so the memory view opens on it (a GPU trace's CPU allocations are bytes)."""
        if not len(self.devices) or not self.total.size:
            return 0
        top = np.full(len(self.devices), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(top, self.dev, self.total.astype(np.int64))
        return int(np.argmax(top))

    # ---- grouping
    def label(self, node: int) -> str:
        """A node's name for tables; modules without their ``nn.Module: `` prefix; '-' for none."""
        if node < 0:
            return "-"
        name = self.trace.name(int(node))
        return name[len("nn.Module: "):] if name.startswith("nn.Module: ") else name

    def module_label(self, i: int) -> str:
        m = int(self.module[i])
        return self.label(m) + (" (backward)" if m >= 0 and self.backward[i] else "")

    def holders(self, allocs: np.ndarray, by: str) -> list[dict]:
        """``allocs`` grouped by ``by`` (op, module, step, frame, or "op,module,step"), largest
        bytes first: {"key", "count", "bytes", "first" (an allocation of the group)}."""
        keys = by.split(",")
        groups: dict = {}
        cols = {"op": lambda i: self.label(self.op[i]), "module": self.module_label,
                "step": lambda i: self.label(self.step[i]), "frame": lambda i: self.label(self.frame[i])}
        for i in allocs.tolist():
            key = tuple(cols[k](i) for k in keys)
            g = groups.get(key)
            if g is None:
                groups[key] = g = {"key": key if len(key) > 1 else key[0], "count": 0, "bytes": 0, "first": i}
            g["count"] += 1
            g["bytes"] += int(self.nbytes[i])
        return sorted(groups.values(), key=lambda g: (-g["bytes"], -g["count"], str(g["key"])))

def build_memory(trace) -> Memory:
    """The memory model of a loaded trace (reads the instants' args through the lazy args pass)."""
    store, t = trace.store, trace.tree
    inst = store.memory
    n = len(inst)
    if not n:
        z = np.zeros(0, dtype=np.int64)
        return Memory(trace, [], z, z, z, z, z, z, np.zeros(0, dtype=object), z, z, z, z,
                      np.zeros(0, dtype=bool), z, z, z, z)
    cols, bad = _decode(store.raw_args_at(inst.file_index))
    order = np.lexsort((inst.file_index, inst.ts))
    ts, fi = inst.ts[order], inst.file_index[order]
    keys = [inst.keys[i] for i in order.tolist()]
    nbytes = _i64(cols["nbytes"])[order]
    total, reserved = _i64(cols["total"])[order], _i64(cols["reserved"])[order]
    dev_keys = list(zip(cols["dev_type"], cols["dev_id"]))
    dev_keys = [dev_keys[i] for i in order.tolist()]
    uniq = sorted(set(dev_keys), key=lambda k: (k[0] != 0, k[0], k[1]))  # CPU first, then GPUs by id
    devices = [_device_label(*k) for k in uniq]
    dev_ix = {k: i for i, k in enumerate(uniq)}
    dev = np.fromiter((dev_ix[k] for k in dev_keys), dtype=np.int64, count=n)
    addr_ids: dict = {}
    addr_raw = cols["addr"]
    addr = np.fromiter((addr_ids.setdefault(addr_raw[i], len(addr_ids)) for i in order.tolist()),
                       dtype=np.int64, count=n)
    pair = _pair(dev, addr, nbytes)
    track_of = {k: i for i, k in enumerate(store.track_keys)}
    itrack = np.fromiter((track_of.get(k, -1) for k in keys), dtype=np.int64, count=n)
    node = _containing(trace, itrack, ts)
    op = _nearest(t, node, K["op"])
    module = _nearest(t, node, K["module"])
    backward = np.zeros(n, dtype=bool)
    if t.fwd_of:  # backward: the module of the forward op the backward op came from
        bwd = _nearest_in(t, node, t.fwd_of)
        use = (module < 0) & (bwd >= 0)
        fwd = np.array([t.fwd_of.get(int(b), -1) for b in bwd[use].tolist()], dtype=np.int64)
        module[use] = _nearest(t, fwd, K["module"])
        backward[use] = module[use] >= 0
    frame = _nearest(t, node, K["python"])
    pid = np.empty(n, dtype=object)
    pid[:] = [k[0] for k in keys]
    step = _steps(trace, ts, pid)
    return Memory(trace, devices, ts, dev, addr, nbytes, total, reserved, pid, itrack, node, op, module, backward,
                  frame, step, pair, fi, wrong_types=bad)


def _device_label(dev_type: int, dev_id: int) -> str:
    kind = DEVICE_TYPES.get(dev_type)
    if kind == "CPU":
        return "CPU"
    if kind == "GPU":
        return f"GPU{dev_id}"
    return f"device {dev_type}:{dev_id}"


def _pair(dev: np.ndarray, addr: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Each allocation with the next free of its (device, address), if that comes before any
    other allocation there; the free gets the allocation back. -1 elsewhere."""
    n = dev.size
    pair = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return pair
    o = np.lexsort((np.arange(n), addr, dev))
    same = (dev[o][1:] == dev[o][:-1]) & (addr[o][1:] == addr[o][:-1])
    hit = same & (nbytes[o][:-1] > 0) & (nbytes[o][1:] < 0)
    a, f = o[:-1][hit], o[1:][hit]
    pair[a], pair[f] = f, a
    return pair


def _containing(trace, itrack: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The deepest host event (tree node) on each instant's thread with start <= ts < end; -1."""
    t, store = trace.tree, trace.store
    out = np.full(ts.size, -1, dtype=np.int64)
    host = np.flatnonzero((t.ev >= 0) & kind_mask(t.kind, HOST_KINDS))
    htrack = store.track[t.ev[host]]
    end = t.start + t.dur
    is_event = (t.ev >= 0) & kind_mask(t.kind, HOST_KINDS)
    for tr in np.unique(itrack[itrack >= 0]).tolist():
        h = host[htrack == tr]
        # the nesting's order (ts, -dur, kind, index): at equal starts the deepest comes last
        h = h[np.lexsort((h, t.kind[h], -t.dur[h], t.start[h]))]
        mine = np.flatnonzero(itrack == tr)
        pos = np.searchsorted(t.start[h], ts[mine], side="right") - 1
        cand = np.where(pos >= 0, h[np.maximum(pos, 0)], -1)
        at = ts[mine]
        for _ in range(1 << 12):  # up the containment parents until one holds ts (depth-bounded)
            miss = (cand >= 0) & (end[np.maximum(cand, 0)] <= at)
            if not miss.any():
                break
            up = t.cparent[cand[miss]]
            cand[miss] = np.where(is_event[np.maximum(up, 0)] & (up >= 0), up, -1)
        out[mine] = cand
    return out


def _nearest(t, nodes: np.ndarray, kind: int) -> np.ndarray:
    """For each node, itself or its closest containment ancestor of ``kind``; -1 if none."""
    out = np.full(nodes.size, -1, dtype=np.int64)
    cur = nodes.copy()
    todo = np.flatnonzero(cur > 0)
    while todo.size:
        c = cur[todo]
        hit = t.kind[c] == kind
        out[todo[hit]] = c[hit]
        todo = todo[~hit]
        cur[todo] = t.cparent[cur[todo]]
        todo = todo[cur[todo] > 0]
    return out


def _nearest_in(t, nodes: np.ndarray, mapping: dict) -> np.ndarray:
    """For each node, itself or its closest containment ancestor that is a key of ``mapping``."""
    flag = np.zeros(len(t.kind), dtype=bool)
    flag[list(mapping)] = True
    out = np.full(nodes.size, -1, dtype=np.int64)
    cur = nodes.copy()
    todo = np.flatnonzero(cur > 0)
    while todo.size:
        c = cur[todo]
        hit = flag[c]
        out[todo[hit]] = c[hit]
        todo = todo[~hit]
        cur[todo] = t.cparent[cur[todo]]
        todo = todo[cur[todo] > 0]
    return out


def _steps(trace, ts: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """The step whose host interval holds each instant, on a process its window holds
    (``StepWindow.pids``: the marker's own, and those a marker alone on its pid claims); -1 none."""
    out = np.full(ts.size, -1, dtype=np.int64)
    for s in trace.steps:
        w = trace.step_window(s)
        on = pid == w.pid
        for other in w.pids[1:]:  # pids of mixed types (ints, names): compared one by one
            on |= pid == other
        m = (ts >= w.start) & (ts < w.end) & on
        out[m & (out < 0)] = s
    return out


# ---- reports (data only: report.py prints them)

OP_COLUMNS = ("device", "name", "calls", "allocation_count", "allocation_bytes", "self_allocation_count",
              "self_allocation_bytes", "size_increase_bytes", "self_size_increase_bytes")
"""The per-op table's columns (``memory --format csv`` writes them even when there are no rows)."""


def memory_dict(trace, top: int = TOP_DEFAULT) -> dict:
    """``tracetui memory --json``: sizes in integer bytes, times in µs (the file's clock)."""
    mem: Memory = trace.memory
    us = lambda ns: int(ns) / 1e3  # noqa: E731

    def holders(allocs: np.ndarray) -> dict:
        return {by: [{by: g["key"], "count": g["count"], "bytes": g["bytes"]} for g in mem.holders(allocs, by)[:top or None]]
                for by in ("op", "module", "step")}

    def block(i: int) -> dict:
        return {"bytes": int(mem.nbytes[i]), "ts_us": us(mem.ts[i]), "op": mem.label(mem.op[i]),
                "module": mem.module_label(i), "step": mem.label(mem.step[i]), "frame": mem.label(mem.frame[i])}

    devices, steps = [], []
    for d, label in enumerate(mem.devices):
        p = mem.peak(d)
        nf = mem.never_freed(d)
        a = np.flatnonzero((mem.dev == d) & (mem.nbytes > 0))
        devices.append({
            "device": label, "peak_bytes": p.allocated, "peak_reserved_bytes": p.reserved, "peak_us": us(p.ts),
            "max_reserved_bytes": int(mem.reserved[mem.dev == d].max()),
            "allocations": int(a.size), "frees": int(((mem.dev == d) & (mem.nbytes < 0)).sum()),
            "paired": int((mem.pair[a] >= 0).sum()), "never_freed": int(nf.size),
            "never_freed_bytes": int(mem.nbytes[nf].sum()), "unmatched_frees": int(mem.unmatched_frees(d).size),
            "held_before_bytes": p.held_before, "live_at_peak": int(p.live.size),
            "holders": holders(p.live), "never_freed_blocks": [block(i) for i in nf[:top or None].tolist()],
        })
        for s, sp in mem.step_peaks(d):
            steps.append({"name": trace.name(s), "device": label, "peak_bytes": sp.allocated,
                          "peak_reserved_bytes": sp.reserved, "peak_us": us(sp.ts), "held_before_bytes": sp.held_before,
                          "holders": holders(sp.live)})
    ops = [dict(zip(OP_COLUMNS, (s.device, s.name, s.calls, s.alloc_count, s.alloc_bytes, s.self_alloc_count,
                                 s.self_alloc_bytes, s.increase, s.self_increase))) for s in mem.op_stats()]
    return {"file": str(trace.path), "instants": len(mem), "devices": devices, "steps": steps,
            "ops": ops[:top] if top else ops, "wrong_types": mem.wrong_types}
