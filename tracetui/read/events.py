"""Columnar event store: one numpy array per field, names interned, args kept raw.

Memory per event stays at a few dozen bytes plus the raw ``args`` slice, so a GB-sized trace fits.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections import Counter
from itertools import compress
from operator import attrgetter
from typing import Callable

import msgspec
import numpy as np

from tracetui.read.schema import BAD_EVENT_CAT, TEXT_TIMES, LenientLinkArgs
from tracetui.read.source import release, still_whole
from tracetui.read.times import MISSING, OK, OUT_OF_RANGE, ns_column
from tracetui.read.together import together

# Node kinds. Host kinds come first: their order is also the tie-break when two events start
# and end together (the step encloses the annotation, which encloses the module, ...).
KINDS = ("root", "thread", "step", "annotation", "module", "python", "op", "runtime",
         "kernel", "memcpy", "memset", "gpu")
K = {k: i for i, k in enumerate(KINDS)}
HOST_KINDS = frozenset(K[k] for k in ("step", "annotation", "module", "python", "op", "runtime"))
GPU_KINDS = frozenset(K[k] for k in ("kernel", "memcpy", "memset"))

K_STEP, K_ANNOTATION, K_PYTHON, K_MODULE = K["step"], K["annotation"], K["python"], K["module"]


def kind_mask(kind: np.ndarray, kinds) -> np.ndarray:
    """``np.isin(kind, kinds)`` for a column of node kinds: one lookup per element in a 256-entry
    table where the column is one byte wide (np.isin compared every element with each kind:
    ~30 ms against ~6 ms on the 2.6M nodes of a GB trace, several times per load)."""
    kinds = list(kinds)
    info = np.iinfo(kind.dtype) if kind.dtype.kind in "iu" else None
    if info is None or kind.dtype.itemsize != 1 or not all(
            isinstance(k, (int, np.integer)) and info.min <= k <= info.max for k in kinds):
        return np.isin(kind, kinds)  # a wider column, or a kind the column cannot hold
    table = np.zeros(256, dtype=bool)
    table[np.asarray(kinds, dtype=np.int64) & 0xFF] = True  # an int8 kind, read as its unsigned byte
    return table[kind.view(np.uint8)]

CATEGORY_KIND = {
    "user_annotation": "annotation", "cpu_op": "op", "operator": "op", "python_function": "python",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "runtime": "runtime", "hip_runtime": "runtime",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
}
"""Lower-cased Kineto category -> node kind; other categories are counted as skipped."""


_any_decoder = msgspec.json.Decoder()
_RAW_LOCK = threading.Lock()  # the app's worker and its UI thread may both ask for args first
_SRC_LOCK = threading.Lock()


_I64 = 1 << 63


def _int(v, default=-1) -> int:
    """An int64 link id from an int or a numeric string; ``default`` for anything else,
    including ids that do not fit int64 (Kineto's are far smaller: such a file is damaged)."""
    if type(v) is not int:
        try:
            v = int(v)
        except (TypeError, ValueError, OverflowError):
            return default
    return v if -_I64 <= v < _I64 else default


def _id_column(values: list) -> np.ndarray:
    """Flow ids as int64 where all are ints (Kineto's), else as objects compared as written
    (Chrome's hex strings, a missing id): "3" and 3 stay two ids."""
    if set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@dataclass
class Flows:
    """The flow events (``ac2g`` launch arrows, ``fwdbwd``) by category: the ids of their
    starts and of their ends, so parts of a file can be joined and counted in numpy."""
    starts: dict = field(default_factory=dict)   # category -> ids of "s" events
    ends: dict = field(default_factory=dict)     # category -> ids of "f"/"t" events

    @classmethod
    def of(cls, events: list, is_start: np.ndarray) -> "Flows":
        cat_ids = _Ids()
        cid = np.fromiter(map(cat_ids.__getitem__, map(_cat, events)), dtype=np.int32, count=len(events))
        ids = _id_column(list(map(_id, events)))
        flows = cls()
        for c, i in cat_ids.items():
            mine = cid == i
            flows.starts[c] = ids[mine & is_start]
            flows.ends[c] = ids[mine & ~is_start]
        return flows

    def __bool__(self) -> bool:
        return any(map(len, self.starts.values())) or any(map(len, self.ends.values()))

    def __eq__(self, other) -> bool:
        same = lambda a, b: a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        return isinstance(other, Flows) and same(self.starts, other.starts) and same(self.ends, other.ends)

    @staticmethod
    def joined(parts: list["Flows"]) -> "Flows":
        out = Flows()
        for side in ("starts", "ends"):
            cats = {c: None for p in parts for c in getattr(p, side)}
            joined = getattr(out, side)
            for c in cats:
                got = [getattr(p, side)[c] for p in parts if c in getattr(p, side)]
                # a copy even of one part's: it may view a decode helper's whole result (forked.py)
                joined[c] = got[0].copy() if len(got) == 1 else np.concatenate(got)
        return out

    def without_end(self) -> int:
        """How many flows (category, id) have starts but no end, or ends but no start: the
        size of the two id sets' symmetric difference. Each side is sorted (stable: Kineto
        writes ids nearly in order, so it runs near-linear) and deduplicated, and the common
        ids found by binary search: 0.015 s for 0.9M ids where ``np.setxor1d``'s hashing
        took 0.35 s, serial in the load's parent."""
        n = 0
        empty = np.zeros(0, dtype=np.int64)
        for c in {**self.starts, **self.ends}:
            s, f = self.starts.get(c, empty), self.ends.get(c, empty)
            if s.dtype == object or f.dtype == object:  # ids of mixed types do not sort
                n += len(set(s.tolist()) ^ set(f.tolist()))
                continue
            us, uf = _distinct(s), _distinct(f)
            both = 0
            if us.size and uf.size:
                at = np.minimum(np.searchsorted(uf, us), uf.size - 1)
                both = int((uf[at] == us).sum())
            n += us.size + uf.size - 2 * both
        return n


def _distinct(x: np.ndarray) -> np.ndarray:
    """The distinct values of an int array, sorted."""
    x = np.sort(x, kind="stable")
    return x[np.r_[True, x[1:] != x[:-1]]] if x.size else x


@dataclass
class EventStore:
    """Every X event the model uses, by index; plus flows, thread names and skipped counts."""
    names: list[str]
    name_id: np.ndarray
    kind: np.ndarray
    track: np.ndarray          # interned (pid, tid) for host events, ("gpu", device, stream) for GPU ones
    track_keys: list[tuple]
    ts: np.ndarray             # int64 ns
    dur: np.ndarray            # int64 ns
    # link ids, read only for the kinds that link by them (-1 elsewhere; the raw args keep all):
    corr: np.ndarray           # runtime calls and GPU activity
    ext: np.ndarray            # ops, annotations and GPU activity
    seq: np.ndarray            # ops
    fwd_tid: np.ndarray        # ops
    file_index: np.ndarray     # position in traceEvents, to find the raw args later
    source: bytes | None = None  # the decoded bytes, kept for the lazy args pass
    thread_names: dict = field(default_factory=dict)
    process_names: dict = field(default_factory=dict)
    flows: Flows = field(default_factory=Flows)
    skipped: dict = field(default_factory=dict)     # category -> count
    missing_fields: int = 0
    wrong_types: int = 0
    times_out_of_range: int = 0    # left out: ts or dur beyond int64 ns (~292 years), or not finite
    negative_durations: int = 0    # kept with dur 0
    unreadable: dict = field(default_factory=dict)  # events left out: a field of the wrong type -> count
    memory: "Instants" = field(default_factory=lambda: Instants())  # [memory] instants (memory.py)
    reread: Callable[[], bytes | None] | None = None  # the source read again (a store from the cache)
    _raw: list | None = None

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def args_loaded(self) -> bool:
        return self._raw is not None

    def source_bytes(self) -> bytes | None:
        """The decoded bytes the store points into: kept from the load, or read again from the
        file for a store from the reopen cache (None where the file changed since: read/cache.py)."""
        with _SRC_LOCK:
            if self.source is None and self.reread is not None:
                reread, self.reread = self.reread, None
                self.source = reread()
            if not still_whole(self.source):  # a mapped file cut short since: its pages are gone
                self.source = None
        return self.source

    def load_args(self) -> None:
        """The lazy second pass over the file (~0.3 s per 60 MB); the app runs it in a worker."""
        with _RAW_LOCK:
            if self._raw is None:
                from tracetui.read.schema import raw_args  # noqa: PLC0415
                src = self.source_bytes()
                self._raw = raw_args(src) if src is not None else []
                release(src)  # a mapped file: its pages are read again when an event's args are

    def args(self, i: int) -> dict:
        """All args of event ``i``, decoded on demand (the first call scans the file once more)."""
        if self._raw is None:
            self.load_args()
        j = int(self.file_index[i])
        if j >= len(self._raw):
            return {}
        try:
            v = _any_decoder.decode(self._raw[j])
        except msgspec.DecodeError:
            return {}
        return v if isinstance(v, dict) else {}

    def raw_args_at(self, positions: np.ndarray) -> list:
        """The undecoded args (bytes) of the events at these traceEvents positions (the lazy pass)."""
        if self._raw is None:
            self.load_args()
        raw, n = self._raw, len(self._raw)
        return [bytes(raw[j]) if j < n else b"{}" for j in positions.tolist()]


_ph, _cat, _name, _ts, _dur, _args, _id = (attrgetter(a) for a in ("ph", "cat", "name", "ts", "dur", "args", "id"))
_pid_tid = attrgetter("pid", "tid")
_corr, _ext, _seq, _fwd, _stream = (attrgetter(a) for a in ("correlation", "external_id", "seq", "fwd_tid", "stream"))


class _Ids(dict):
    """Interns keys in first-seen order (``ids[key]`` -> its id) in one C-level pass."""
    __slots__ = ()

    def __missing__(self, key) -> int:
        i = self[key] = len(self)
        return i


def _ints(get, items: list, bad: list | None = None) -> np.ndarray:
    """int64 column of one field: ints kept, numeric strings parsed, anything else -1 (lenient
    files); ints beyond int64 are -1 too, and counted into ``bad[0]``."""
    try:
        return np.fromiter(map(get, items), dtype=np.int64, count=len(items))
    except (TypeError, ValueError, OverflowError):
        vals = list(map(get, items))
        if bad is not None:
            bad[0] += sum(1 for v in vals if type(v) is int and not -_I64 <= v < _I64)
        return np.asarray([_int(v) for v in vals], dtype=np.int64)


def _subset(items: list, mask: np.ndarray) -> list:
    return items if mask.all() else list(compress(items, mask.tolist()))


def _ints_at(get, subset: list, mask: np.ndarray, bad: list | None = None) -> np.ndarray:
    """``_ints`` of ``subset``, the events where ``mask`` is set, placed there; -1 elsewhere."""
    out = np.full(mask.size, -1, dtype=np.int64)
    out[mask] = _ints(get, subset, bad)
    return out


def _phases(events: list) -> np.ndarray:
    """Each event's phase letter as a byte (0 where it is not one ASCII letter). Phases are one
    letter in every trace seen, so they are joined into one string and viewed by numpy."""
    phs = list(map(_ph, events))
    joined = "".join(phs)
    if len(joined) == len(phs) and joined.isascii() and "" not in phs:  # exactly one letter each
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    return np.fromiter((ord(p) if len(p) == 1 and p.isascii() else 0 for p in phs),
                       dtype=np.uint8, count=len(phs))


class _Rows:
    """The written text of chosen events' ts or dur, read again from the bytes only when asked
    (a large time with a fraction: see times.py). ``raw_times()`` gives every event's RawTimes."""

    def __init__(self, source, raw_times: Callable[[], list] | None, xi: np.ndarray):
        if raw_times is None and source is not None:
            from tracetui.read.schema import raw_times as read  # noqa: PLC0415
            raw_times = lambda: read(source)  # noqa: E731
        self.get, self.xi, self.rows = raw_times, xi, None

    def reread(self, field: str) -> Callable[[list[int]], list] | None:
        if self.get is None:
            return None

        get = attrgetter(field)

        def texts(idx: list[int]) -> list:
            if self.rows is None:
                self.rows = self.get()
            return list(map(get, map(self.rows.__getitem__, self.xi[idx].tolist())))
        return texts


def build_store(events: list, source: bytes | None = None,
                raw_times: Callable[[], list] | None = None) -> EventStore:
    """Split decoded events into columns; count what is skipped or malformed instead of dropping it.

    ``source`` is the bytes ``events`` were decoded from (kept for the lazy args pass), or
    ``raw_times()`` their written ts/dur: either lets large fractional times be read exactly."""
    ph = _phases(events)
    is_x = ph == ord("X")
    xi = np.flatnonzero(is_x)
    xs = list(compress(events, is_x.tolist()))
    kind, nid, names, skipped = _kinds(xs)
    rows = _Rows(source, raw_times, xi)
    text = bool(xs) and isinstance(xs[0], TEXT_TIMES)  # fractional times decoded as their text
    ts, ts_state = ns_column(list(map(_ts, xs)), rows.reread("ts"), text)
    dur, dur_state = ns_column(list(map(_dur, xs)), rows.reread("dur"))
    used = kind >= 0  # a skipped category's odd times are not counted
    missing = int((used & ((ts_state == MISSING) | (dur_state == MISSING))).sum())
    out_of_range = int((used & ((ts_state == OUT_OF_RANGE) | (dur_state == OUT_OF_RANGE))).sum())
    keep = used & (ts_state == OK) & (dur_state != OUT_OF_RANGE)
    if not keep.all():
        sel = np.flatnonzero(keep)
        xs, xi, kind, nid = list(map(xs.__getitem__, sel.tolist())), xi[sel], kind[sel], nid[sel]
        ts, dur, dur_state = ts[sel], dur[sel], dur_state[sel]
    negative = int((dur < 0).sum())
    dur[dur_state == MISSING] = 0
    links, wrong = _links(xs, kind)
    track, track_keys = _tracks(xs, kind, links.pop("stream"))
    is_start, is_end = ph == ord("s"), (ph == ord("f")) | (ph == ord("t"))
    is_flow = is_start | is_end
    flows = Flows.of(list(compress(events, is_flow.tolist())), is_start[is_flow])
    thread_names, process_names = _metadata(events, ph)
    memory, is_mem = memory_instants(events, ph, rows)
    unreadable = _others(events, ~(is_x | is_flow | (ph == ord("M")) | is_mem), skipped)
    return EventStore(
        names=names, name_id=nid, kind=kind, track=track, track_keys=track_keys, ts=ts,
        dur=np.maximum(dur, 0), **links, file_index=xi.astype(np.int64), source=source,
        thread_names=thread_names, process_names=process_names, flows=flows, skipped=skipped,
        missing_fields=missing, wrong_types=wrong, times_out_of_range=out_of_range, negative_durations=negative,
        unreadable=unreadable, memory=memory,
    )


def _kinds(xs: list) -> tuple[np.ndarray, np.ndarray, list, dict]:
    """(kind, name id, names, skipped counts by category) of the X events: kinds by category,
    refined by name (steps, module scopes)."""
    cat_ids = _Ids()
    cid = np.fromiter(map(cat_ids.__getitem__, map(_cat, xs)), dtype=np.int32, count=len(xs))
    cat_kind = np.array([K.get(CATEGORY_KIND.get(c.lower(), ""), -1) for c in cat_ids], dtype=np.int8)
    kind = cat_kind[cid]
    name_ids = _Ids()
    nid = np.fromiter(map(name_ids.__getitem__, map(_name, xs)), dtype=np.int32, count=len(xs))
    names = list(name_ids)
    is_step = np.array([n.startswith("ProfilerStep#") for n in names], dtype=bool)
    is_mod = np.array([n.startswith("nn.Module: ") for n in names], dtype=bool)
    if len(nid):
        kind[(kind == K_ANNOTATION) & is_step[nid]] = K_STEP
        kind[(kind == K_PYTHON) & is_mod[nid]] = K_MODULE
    per_cat = np.bincount(cid, minlength=len(cat_ids))
    skipped = {(c or "(none)"): int(per_cat[i]) for c, i in sorted(cat_ids.items()) if cat_kind[i] < 0}
    return kind, nid, names, skipped


def _links(xs: list, kind: np.ndarray) -> tuple[dict, int]:
    """The link id columns (corr, ext, seq, fwd_tid, and the GPU ``stream``), each read only for
    the kinds that link by it, and how many ids had a wrong type or did not fit int64."""
    args = list(map(_args, xs))
    gpu = kind_mask(kind, GPU_KINDS)
    op = kind == K["op"]
    ops = _subset(args, op)
    launch = gpu | (kind == K["runtime"])
    huge = [0]  # link ids beyond int64
    linked = gpu | op | (kind == K_ANNOTATION)
    cols = {"corr": _ints_at(_corr, _subset(args, launch), launch, huge),
            "ext": _ints_at(_ext, _subset(args, linked), linked, huge),
            "seq": _ints_at(_seq, ops, op, huge), "fwd_tid": _ints_at(_fwd, ops, op, huge),
            "stream": _ints_at(_stream, _subset(args, gpu), gpu, huge)}
    wrong = huge[0]
    if args and isinstance(args[0], LenientLinkArgs):  # the lenient schema was needed
        wrong += sum(1 for a in args for v in (a.correlation, a.external_id)
                     if v is not None and not isinstance(v, int))
    return cols, wrong


def _tracks(xs: list, kind: np.ndarray, stream: np.ndarray) -> tuple[np.ndarray, list]:
    """Interned tracks: (pid, tid) for host events, ("gpu", device, stream) for GPU activity."""
    keys = list(map(_pid_tid, xs))
    for j in np.nonzero(kind_mask(kind, GPU_KINDS))[0].tolist():
        pid, tid = keys[j]
        keys[j] = ("gpu", pid, int(stream[j]) if stream[j] >= 0 else tid)
    track_ids = _Ids()
    track = np.fromiter(map(track_ids.__getitem__, keys), dtype=np.int32, count=len(keys))
    return track, list(track_ids)


def _metadata(events: list, ph: np.ndarray) -> tuple[dict, dict]:
    """Thread and process names from the M events."""
    thread_names: dict = {}
    process_names: dict = {}
    for e in compress(events, (ph == ord("M")).tolist()):
        label = e.args.name
        if isinstance(label, str):
            if e.name == "thread_name":
                thread_names[(e.pid, e.tid)] = label.strip()
            elif e.name == "process_name":
                process_names[e.pid] = label.strip()
    return thread_names, process_names


def _others(events: list, rest: np.ndarray, skipped: dict) -> dict:
    """Count the events of no use (into ``skipped``, by category and phase) and the unreadable
    ones (load._decode_each's stand-ins, returned by field)."""
    unreadable: dict[str, int] = {}
    for (cat, phase), c in Counter((e.cat, e.ph) for e in compress(events, rest.tolist())).items():
        if cat.startswith(BAD_EVENT_CAT) and not phase:  # load._decode_each's stand-in
            unreadable[cat[1:]] = unreadable.get(cat[1:], 0) + c
            continue
        label = f"{cat or '(none)'} ({phase or '?'})"
        skipped[label] = skipped.get(label, 0) + c
    return unreadable


_COLUMNS = ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "seq", "fwd_tid", "file_index")


def concat_stores(parts: list[EventStore], offsets: list[int], threads: int = 1) -> EventStore:
    """The store of a file's events when ``parts[i]`` holds those from position ``offsets[i]`` on.

    Ids are assigned in first-seen order, so the result equals what one pass would build. The
    parts are used up: each column is joined into one array and the parts' own copies of it
    dropped once it is, so the join never holds two whole copies of the columns; ``threads``
    columns are joined at once (together.py: copies and gathers, which release the GIL).
    """
    if len(parts) == 1 and offsets[0] == 0:
        return parts[0]
    names, tracks = list(parts[0].names), list(parts[0].track_keys)
    name_ids = {k: i for i, k in enumerate(names)}
    track_ids = {k: i for i, k in enumerate(tracks)}

    def remap(b_keys: list, keys: list, ids: dict) -> np.ndarray:
        out = np.empty(len(b_keys), dtype=np.int32)
        for j, k in enumerate(b_keys):
            i = ids.get(k)
            if i is None:
                i = ids[k] = len(keys)
                keys.append(k)
            out[j] = i
        return out

    a = parts[0]
    maps = {"name_id": [None], "track": [None]}
    skipped, unreadable = dict(a.skipped), dict(a.unreadable)
    thread_names, process_names = dict(a.thread_names), dict(a.process_names)
    for b in parts[1:]:
        maps["name_id"].append(remap(b.names, names, name_ids))
        maps["track"].append(remap(b.track_keys, tracks, track_ids))
        for k, c in b.skipped.items():
            skipped[k] = skipped.get(k, 0) + c
        for k, c in b.unreadable.items():
            unreadable[k] = unreadable.get(k, 0) + c
        thread_names.update(b.thread_names)
        process_names.update(b.process_names)
    columns = dict(zip(_COLUMNS, together(
        [lambda f=f: _joined_column(parts, f, maps.get(f), offsets if f == "file_index" else None) for f in _COLUMNS],
        threads)))
    return EventStore(
        names=names, **columns, track_keys=tracks, source=a.source,
        thread_names=thread_names, process_names=process_names, flows=Flows.joined([p.flows for p in parts]),
        skipped=skipped, missing_fields=sum(p.missing_fields for p in parts), wrong_types=sum(p.wrong_types for p in parts),
        times_out_of_range=sum(p.times_out_of_range for p in parts),
        negative_durations=sum(p.negative_durations for p in parts), unreadable=unreadable,
        memory=Instants.joined([p.memory for p in parts], offsets),
    )


def _joined_column(parts: list[EventStore], field: str, maps: list | None, offsets: list | None) -> np.ndarray:
    """One column of every part in order, into one array filled in place; each part's array is
    dropped once copied. ``maps[i]``: part i's ids -> the joined ids; ``offsets[i]``: added."""
    cols = [getattr(p, field) for p in parts]
    out = np.empty(sum(map(len, cols)), dtype=np.result_type(*cols))
    at = 0
    for i, p in enumerate(parts):
        col, cols[i] = cols[i], None
        setattr(p, field, None)
        if maps is not None and maps[i] is not None:
            if len(col):  # "clip": every id is in range, and no buffered copy of the result
                np.take(maps[i], col, out=out[at:at + len(col)], mode="clip")
        else:
            out[at:at + len(col)] = col
        if offsets is not None:
            out[at:at + len(col)] += offsets[i]
        at += len(col)
        del col
    return out


MEMORY_NAME = "[memory]"
"""The name of profile_memory's instants (cat cpu_instant_event, ph "i"); memory.py reads them."""


@dataclass
class Instants:
    """The ``[memory]`` instants: position in traceEvents (their args are read from the lazy args
    pass, see memory.py), ts in ns (the store's convention) and the (pid, tid) that allocated."""
    file_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    keys: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def joined(parts: list["Instants"], offsets: list[int]) -> "Instants":
        return Instants(np.concatenate([p.file_index + o for p, o in zip(parts, offsets)]),
                        np.concatenate([p.ts for p in parts]), [k for p in parts for k in p.keys])


def memory_instants(events: list, ph: np.ndarray, rows: "_Rows | None" = None) -> tuple[Instants, np.ndarray]:
    """The ``[memory]`` instants among ``events`` (``ph``: their phase bytes), and a mask of the
    events they are. Their ts is read as the X events' is (``rows``: the written times, for
    large ones with a fraction); those without a usable ts are left out (and counted as skipped)."""
    idx = np.flatnonzero(ph == ord("i"))
    cand = [events[j] for j in idx.tolist()]
    fi = idx[np.fromiter((e.name == MEMORY_NAME for e in cand), dtype=bool, count=len(cand))]
    mine = [events[j] for j in fi.tolist()]
    reread = None
    if rows is not None and rows.get is not None:
        def reread(at: list[int]) -> list:  # shares the X events' re-read of the file
            if rows.rows is None:
                rows.rows = rows.get()
            return [rows.rows[j].ts for j in fi[at].tolist()]
    text = bool(mine) and isinstance(mine[0], TEXT_TIMES)
    ts, state = ns_column(list(map(_ts, mine)), reread, text)
    ok = state == OK
    fi, ts = fi[ok], ts[ok]
    mask = np.zeros(len(events), dtype=bool)
    mask[fi] = True
    return Instants(fi, ts, [(events[j].pid, events[j].tid) for j in fi.tolist()]), mask
