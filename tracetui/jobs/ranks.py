"""Many ranks of one job: which files are which rank, per-rank tables, and the job's analysis.

Data flows one way: ``discover`` names the ranks (from ``distributedInfo``, else the file name,
and says what it could not place); ``rank_tables`` turns one loaded rank into plain columns
(steps, collectives, kernels, ops); ``analyze`` matches collectives across ranks, estimates each
rank's clock offset, and computes waits and stragglers from the collectives and steps tables
alone, so the same analysis runs on traces in memory and on a Parquet index (``index.py``).

Times in tables are int64 ns on each rank's own clock (``baseTimeNanoseconds`` added), the
analysis' output is in µs and bytes.
"""
from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from tracetui.jobs.collectives import busbw_factor, rank_collectives
from tracetui.read.errors import TraceError
from tracetui.read.events import K
from tracetui.read.load import LoadReport, base_time_ns, read_bytes

RANK_IN_NAME = re.compile(r"(?i)(?:^|[^a-z])rank[-_]?(\d+)(?!\d)")
"""A rank in a file name: tensorboard_trace_handler's ``rank-3``, ``rank_3``, ``rank3``."""

TRACE_SUFFIXES = (".json", ".json.gz")

HTA_MIN_NORMALIZED_DURATION = 0.01
"""HTA's straggler metric only looks at collectives longer than 1% of the mean step time."""

RUN_APART_NS = 10 * 10**9
"""A rank whose matched collectives end this far from the reference rank's (median) is named in a
diagnostic: synchronised hosts differ by milliseconds, ranks of one host by nothing, so such a
gap says the files come from two runs (a log folder keeps every run's files)."""

STRAGGLER_SHARE = 0.5
"""A rank is named the likely straggler when the waits it caused (as the last arriver) are at
least this share of all waits caused in the job; otherwise no single rank is to blame."""


class RankHeader(msgspec.Struct):
    """The top-level fields that place a file in a job; traceEvents is skipped, not decoded.
    Any JSON value is taken (``_rank_file`` keeps what is usable): one odd field must not throw
    away ``distributedInfo`` with it."""
    distributedInfo: object = None
    host_name: object = None
    baseTimeNanoseconds: object = None


_header = msgspec.json.Decoder(RankHeader)


@dataclass
class RankFile:
    """One input file and where it sits in the job."""
    path: Path
    rank: int | None = None
    world: int | None = None
    backend: str | None = None
    host: str | None = None
    base_ns: int = 0
    rank_from: str = ""            # "distributedInfo" | "file name" | ""
    pg_config: list = field(default_factory=list)
    info: dict = field(default_factory=dict)  # the file's distributedInfo, as written
    problem: str | None = None     # why it could not be read (it is then left out, and said so)

    @property
    def job_key(self) -> tuple:
        """What every rank of one job shares: its size, backend and number of process groups.
        Not the groups themselves: a rank's ``pg_config`` lists only the groups it belongs to
        (ranks 2-3 of a job with ``new_group([0, 1])`` list one group, ranks 0-1 two), so the
        groups are checked for agreement instead (``_group_conflicts``)."""
        return (self.world, self.backend, self.pg_count)

    @property
    def pg_count(self) -> int | None:
        return self.info.get("pg_count") if isinstance(self.info.get("pg_count"), int) else None


def header_of(data) -> RankHeader:
    try:
        return _header.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return RankHeader()


HEAD_BYTES = 1 << 20
"""A rank file is placed from its first MiB (of what it gunzips to, for a gzipped one): Kineto
writes ``distributedInfo`` before ``traceEvents``, and placing needs nothing else. Placing 1,000
ranks of 100 MB so reads 1 GB, not 100 GB, and gunzips nothing past each head; the worker that
loads a rank reads ``host_name`` and ``baseTimeNanoseconds`` from its own decode. A file whose
head has no ``distributedInfo`` before its events is decoded whole (the key may come later)."""


HEAD_CHUNK = 1 << 12
"""Compressed bytes fed to zlib at a time: a damaged block loses the output of its whole call, so
small calls keep all but the last 4 KiB before the damage (64 KiB lost a header at byte 197
to damage at byte 30,000)."""


def _head(path: Path) -> bytes | None:
    """The first ``HEAD_BYTES`` of the file's JSON text (gunzipped as far as that), or None."""
    import stat
    import zlib
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a named pipe never blocks us
        with open(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:  # read_bytes says what it is
                return None
            first = f.read(2)
            f.seek(0)
            if first != b"\x1f\x8b":
                return f.read(HEAD_BYTES)
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = bytearray()
            try:
                while len(out) < HEAD_BYTES and not z.eof:
                    chunk = f.read(HEAD_CHUNK)
                    if not chunk:
                        break
                    out += z.decompress(chunk, HEAD_BYTES - len(out))
                    while z.unconsumed_tail and len(out) < HEAD_BYTES:
                        out += z.decompress(z.unconsumed_tail, HEAD_BYTES - len(out))
            except zlib.error:  # damaged further on: what came before still places the rank
                pass
            return bytes(out) or None
    except OSError:
        return None


def _info_in_head(path: Path) -> dict | None:
    """``distributedInfo`` when it stands before ``traceEvents`` in the file's head, else None."""
    import json as _json
    head = _head(path)
    if not head:
        return None
    at, events_at = head.find(b'"distributedInfo"'), head.find(b'"traceEvents"')
    if at < 0 or (0 <= events_at < at):
        return None
    colon = head.find(b":", at + len(b'"distributedInfo"'))
    text = head[colon + 1:].decode("utf-8", "replace").lstrip()
    try:
        value, _ = _json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _rank_file(path: Path, di, host=None, base_ns=None) -> RankFile:
    """A RankFile from a header's fields: rank and world from distributedInfo, else the file name."""
    rf = RankFile(path=Path(path).absolute(), host=host if isinstance(host, str) else None,
                  base_ns=base_time_ns(base_ns) or 0)  # the loader's reading, so both placings agree
    di = di if isinstance(di, dict) else None
    if di is not None and isinstance(di.get("rank"), int):
        rf.rank, rf.rank_from = di["rank"], "distributedInfo"
        rf.world = di.get("world_size") if isinstance(di.get("world_size"), int) else None
        rf.backend = str(di["backend"]) if di.get("backend") is not None else None
        rf.pg_config = di.get("pg_config") if isinstance(di.get("pg_config"), list) else []
        rf.info = di
    else:
        m = RANK_IN_NAME.search(Path(path).name)
        if m:
            rf.rank, rf.rank_from = int(m.group(1)), "file name"
    return rf


def read_rank_file(path: Path, data=None) -> RankFile:
    """Where ``path`` sits in its job (``HEAD_BYTES`` says what is read). ``host`` and ``base_ns``
    are filled only when the file was decoded whole; ``load_rank`` fills them from its load."""
    di = _info_in_head(Path(path)) if data is None else None
    if di is not None:
        return _rank_file(path, di)
    try:
        data = data if data is not None else read_bytes(path, LoadReport())
    except TraceError as e:  # empty, unreadable, not a regular file: left out and said, not the job's end
        rf = _rank_file(path, None)
        rf.problem = e.problem
        return rf
    h = header_of(data)
    return _rank_file(path, h.distributedInfo, h.host_name, h.baseTimeNanoseconds)


def skipped_line(rf: RankFile, problem: str) -> str:
    """The diagnostic of a file that could not be read as a trace: ``rank N (FILE): skipped: ...``."""
    problem = (str(problem).splitlines() or [""])[0]
    who = f"rank {rf.rank} ({rf.path.name})" if rf.rank is not None else rf.path.name
    return f"{who}: skipped: {problem}"


def expand_inputs(items, said: list[str] | None = None) -> list[Path]:
    """Files named on the command line: folders give every trace in them, globs are expanded.
    A file named more than once (twice, or itself and its folder) is read once, and ``said``
    (when given) gets a line saying so."""
    out: list[Path] = []
    for it in items:
        s = str(it)
        p = Path(s)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise TraceError(p, "folder holds no *.json[.gz] trace")
            out += found
        elif any(c in s for c in "*?[") and not p.exists():
            found = sorted(Path(q) for q in _glob.glob(s) if Path(q).is_file())
            if not found:
                raise TraceError(p, "pattern matches no file")
            out += found
        else:
            if not p.exists():
                raise TraceError(p, "no such file")
            out.append(p)
    seen: dict = {}  # resolved -> the spellings it was named by, first kept
    for p in out:
        seen.setdefault(p.resolve(), []).append(p)
    if said is not None:
        again = [names for names in seen.values() if len(names) > 1]
        if len(again) > 3:  # a folder given twice: one line, not one per file
            said.append(f"{len(again)} files named more than once (e.g. {again[0][0]}; a folder given twice?): "
                        f"each read once")
        for names in again if len(again) <= 3 else []:
            others = sorted({str(q) for q in names[1:]} - {str(names[0])})
            said.append(f"{names[0]}: named {len(names)} times"
                        + (f" (also as {', '.join(others)})" if others else "") + ": read once")
    return [names[0] for names in seen.values()]


@dataclass
class Job:
    """The ranks chosen (by rank) and what could not be placed, each said in ``diagnostics``."""
    ranks: list[RankFile]
    diagnostics: list[str]
    world: int | None = None
    backend: str | None = None
    skipped: list[RankFile] = field(default_factory=list)  # files that could not be read at all


def _spans(nums: list[int]) -> str:
    """1, 2, 3, 7 -> '1-3, 7' (what a diagnostic prints for many missing ranks)."""
    out, i = [], 0
    nums = sorted(nums)
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(out)


def _job_desc(key: tuple) -> str:
    """A job key in words: world size, backend, process groups ("not recorded" where absent)."""
    world, backend, pg_count = key
    out = f"world size {world if world is not None else 'not recorded'}, backend {backend or 'not recorded'}"
    return out + (f", {pg_count} process group(s)" if pg_count is not None else "")


HANDLER_STAMP = re.compile(r"\.(\d{13}|\d{16}|\d{19})\.pt\.trace\.json(?:\.gz)?$")
"""tensorboard_trace_handler's file name: ``{worker}.{time of export}.pt.trace.json``, the time in
ms (older torch) or ns (torch 2.x): when the trace was written, whatever copies did to mtime."""


def written_at(path: Path) -> float:
    """When a trace was written, in seconds: its handler's name stamp, else its mtime (a copy
    without ``cp -p`` resets mtime; the name keeps the run's time)."""
    m = HANDLER_STAMP.search(path.name)
    if m:
        return int(m.group(1)) / 10 ** (len(m.group(1)) - 10)
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _group_conflicts(files: list[RankFile]) -> list[str]:
    """Process groups that the ranks describe differently: one ``pg_name`` with another size or
    member list in another rank's ``pg_config`` (each rank lists only the groups it is in)."""
    seen: dict = {}
    out = []
    for f in files:
        for g in f.pg_config:
            if not isinstance(g, dict) or g.get("pg_name") is None:
                continue
            name, desc = str(g["pg_name"]), (g.get("pg_size"), tuple(g["ranks"]) if isinstance(g.get("ranks"), list) else None)
            if name not in seen:
                seen[name] = (desc, f.rank)
            elif seen[name][0] != desc and desc[1] is not None and seen[name][0][1] is not None:
                out.append(f"process group {name}: rank {seen[name][1]} records size {seen[name][0][0]} "
                           f"and ranks {list(seen[name][0][1])}, rank {f.rank} size {desc[0]} and ranks {list(desc[1])}")
    return out


RUN_GAP_S = 60.0
"""Files of one rank written further apart than this are of two runs: a job's ranks export their
traces at the same step's end, seconds apart, and a log folder gets a new run's files minutes later."""


def _newest_run(placed: list[RankFile], main_key, diags: list[str]) -> list[RankFile]:
    """Where some rank has several files (a log folder keeps every run), the job's files of the
    newest run only: the job's files sorted by when they were written, cut at the first gap over
    ``RUN_GAP_S``. The older run's files are named, and a rank the newest run lacks is missing
    rather than taken from another run (one rank of each run gave waits of 6,431 s)."""
    mine = [f for f in placed if main_key is None or f.rank_from != "distributedInfo" or f.job_key == main_key]
    ranks = [f.rank for f in mine]
    if len(set(ranks)) == len(ranks):
        return placed
    times = sorted(((written_at(f.path), f) for f in mine), key=lambda x: -x[0])
    cut = next((t for (t, _), (u, _) in zip(times, times[1:]) if t - u > RUN_GAP_S), None)
    if cut is None:
        return placed
    newest = min(t for t, _ in times if t >= cut)
    older = {id(f) for t, f in times if t < cut}
    for t, f in times:
        if id(f) in older:
            diags.append(f"{f.path.name}: from an earlier run (written {_ago(newest - t)} before the newest "
                         f"run's files): left out")
    return [f for f in placed if id(f) not in older]


def _ago(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 7200 else f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def place_ranks(files: list[RankFile]) -> Job:
    """Choose the job's ranks among ``files`` and name every file left out and every rank missing."""
    diags: list[str] = []
    skipped = [f for f in files if f.problem is not None]
    for f in files:
        if f.problem is not None:
            diags.append(skipped_line(f, f.problem))
        elif f.rank is None:
            diags.append(f"{f.path.name}: no distributedInfo and no rank in its name: left out")
        elif f.rank_from == "file name":
            diags.append(f"{f.path.name}: no distributedInfo; rank {f.rank} taken from the file name")
    files = [f for f in files if f.problem is None]
    placed = [f for f in files if f.rank is not None]
    keys: dict = {}
    for f in placed:
        if f.rank_from == "distributedInfo":
            keys.setdefault(f.job_key, []).append(f)
    # the job: the key with the most distinct ranks (three unrelated traces that each say rank 0
    # are one rank, not a job), then one that records its world size, then the lowest rank
    main_key = max(keys, key=lambda k: (len({x.rank for x in keys[k]}), k[0] is not None,
                                        -min(x.rank for x in keys[k]))) if keys else None
    placed = _newest_run(placed, main_key, diags)
    chosen: dict[int, RankFile] = {}
    # of two files of one rank, the newer is kept (a log folder holds every run, and a single
    # trace opens its newest file too): by the handler's name stamp, else mtime, else the name
    for f in sorted(placed, key=lambda f: (f.rank, -written_at(f.path), str(f.path))):
        if main_key is not None and f.rank_from == "distributedInfo" and f.job_key != main_key:
            diags.append(f"{f.path.name}: from another job ({_job_desc(f.job_key)}; the job's: "
                         f"{_job_desc(main_key)}): left out")
            continue
        if f.rank in chosen:
            diags.append(f"{f.path.name}: rank {f.rank} again, older than {chosen[f.rank].path.name} "
                         f"(an earlier run?): left out")
            continue
        chosen[f.rank] = f
    diags += _group_conflicts(list(chosen.values()))
    world = main_key[0] if main_key else None
    if world:
        missing = sorted(set(range(world)) - set(chosen) - {f.rank for f in skipped})  # those are said
        if missing:
            diags.append(f"{len(missing)} of {world} ranks missing: {_spans(missing)}")
        out_of = [r for r in chosen if r >= world]
        if out_of:
            diags.append(f"ranks {_spans(out_of)} are outside world size {world}")
    return Job(ranks=[chosen[r] for r in sorted(chosen)], diagnostics=diags, world=world,
               backend=main_key[1] if main_key else None, skipped=skipped)


DISCOVER_POOL_BYTES = 256 << 20
"""Placing files takes the local pool from this many bytes in all (and 16 files): below it, forking
a pool costs more than reading their headers here."""


def discover(items, workers: int | None = None) -> Job:
    """The ranks among files, folders and globs (each file's header read, not its events; on the
    local pool when there are many, since a gzipped file must be gunzipped whole to be read)."""
    from tracetui.jobs.pool import run_map
    said: list[str] = []
    paths = expand_inputs(items, said)
    big = len(paths) >= 16 and sum(p.stat().st_size for p in paths) >= DISCOVER_POOL_BYTES
    w = workers if big else 1
    job = place_ranks(run_map(read_rank_file, [(p,) for p in paths], w))
    job.diagnostics[:0] = said
    return job


def require_ranks(job: Job, items) -> Job:
    """``job``, or the one-line error when it holds no rank to load: a lone unreadable file's own
    problem, else every reason the files were left out."""
    if job.ranks:
        return job
    if len(job.skipped) == 1 and len(job.diagnostics) == 1:
        raise TraceError(job.skipped[0].path, job.skipped[0].problem)
    raise TraceError(Path(str(items[0]) if items else "."), "no rank of a job found: " + "; ".join(job.diagnostics))


def is_job(items) -> bool:
    """True when ``items`` name two or more files that are distinct ranks of one job."""
    try:
        paths = expand_inputs(items)
    except TraceError:
        return False
    if len(paths) < 2:
        return False
    try:
        job = discover(paths)
    except TraceError:
        return False
    # other files beside them are named in the job's diagnostics; a file named as a rank that
    # could not be read counts as one (the job view says it was skipped)
    ranks = {rf.rank for rf in job.ranks} | {f.rank for f in job.skipped if f.rank is not None}
    return len(job.ranks) >= 1 and len(ranks) >= 2  # distinct ranks: an unreadable copy of rank 0 is not rank 1


# ---------------------------------------------------------------- one rank -> tables
STEP_COLUMNS = ("step", "name", "start_ns", "end_ns", "window_ns", "busy_ns", "compute_ns", "comm_ns",
                "comm_exposed_ns", "comm_overlapped_ns", "memcpy_ns", "memset_ns", "idle_ns", "kernels", "verdict")
"""Per-step table; figures a CPU-only rank cannot have are -1 (null in JSON)."""


def _union(s: np.ndarray, e: np.ndarray) -> int:
    from tracetui.model.windows import union_ns
    return union_ns(s, e)


def _step_figures(trace, step: int) -> dict:
    """A step's per-class time over its window (``Trace.step_breakdown``): compute (the union of
    its non-communication, non-copy kernels), communication (exposed, overlapped), memcpy,
    memset, idle."""
    w = trace.step_window(step)
    out = {"start_ns": w.start, "end_ns": w.end}
    if not trace.has_gpu:
        return {**out, "window_ns": w.end - w.start, "busy_ns": -1, "compute_ns": -1, "comm_ns": -1,
                "comm_exposed_ns": -1, "comm_overlapped_ns": -1, "memcpy_ns": -1, "memset_ns": -1,
                "idle_ns": -1, "kernels": 0, "verdict": "CPU only"}
    b = trace.step_breakdown(step)
    by_class = b["busy_by_class_ns"]
    return {**out, **{k: b[k] for k in ("window_ns", "busy_ns", "compute_ns", "comm_ns", "comm_exposed_ns",
                                         "comm_overlapped_ns", "idle_ns", "kernels", "verdict")},
            "memcpy_ns": by_class.get("memcpy", 0), "memset_ns": by_class.get("memset", 0)}


def rank_tables(trace, rf: RankFile, world: int | None = None) -> dict:
    """One loaded rank as tables of plain columns: info, steps, collectives, kernels, ops.

    Every time is int64 ns on the rank's own clock (``baseTimeNanoseconds`` + ts).
    """
    base = rf.base_ns
    t = trace.tree
    rank = int(rf.rank if rf.rank is not None else -1)
    steps = {c: [] for c in ("rank",) + STEP_COLUMNS}
    step_iv = []
    for k, s in enumerate(trace.steps):
        f = _step_figures(trace, s)
        f["start_ns"] += base
        f["end_ns"] += base
        steps["rank"].append(rank)
        steps["step"].append(k)
        steps["name"].append(trace.name(s))
        for c in STEP_COLUMNS[2:]:
            steps[c].append(f[c])
        step_iv.append((f["start_ns"], f["end_ns"]))
    coll = rank_collectives(trace, world or rf.world or 0)
    for c in ("start_ns", "end_ns", "launch_ns"):
        coll[c] = [x + base for x in coll[c]]
    s0 = np.array([a for a, _ in step_iv], dtype=np.int64)
    s1 = np.array([b for _, b in step_iv], dtype=np.int64)
    coll["step"] = _step_of(np.array(coll["launch_ns"], dtype=np.int64), s0, s1).tolist()
    coll["rank"] = [rank] * len(coll["name"])
    gpu = trace._gpu_nodes
    kern = {"rank": [rank] * gpu.size, "name": [t.name(i) for i in gpu.tolist()],
            "class": trace.gpu_classes.tolist(), "start_ns": (t.start[gpu] + base).tolist(),
            "dur_ns": t.dur[gpu].tolist(),
            "stream": [_stream(t, i) for i in gpu.tolist()]}
    step_of_gpu = np.full(gpu.size, -1, dtype=np.int64)
    pos = {int(n): j for j, n in enumerate(gpu.tolist())}
    for k, s in enumerate(trace.steps):
        for n in trace.step_window(s).gpu.tolist():
            step_of_gpu[pos[n]] = k
    kern["step"] = step_of_gpu.tolist()
    ops = np.nonzero(t.kind == K["op"])[0]
    op_start = t.start[ops] + base
    opt = {"rank": [rank] * ops.size, "name": [t.name(i) for i in ops.tolist()],
           "start_ns": op_start.tolist(), "dur_ns": t.dur[ops].tolist(),
           "device_ns": trace.roll.device[ops].tolist(),
           "tid": [str(_tid(t, i)) for i in ops.tolist()],
           "step": _step_of(op_start, s0, s1).tolist()}
    mem = memory_table(trace, base, rank, s0, s1)
    info = {"rank": [rank], "world": [int(rf.world) if rf.world else -1], "backend": [rf.backend or ""],
            "host": [rf.host or ""], "file": [str(rf.path)], "base_ns": [base], "rank_from": [rf.rank_from],
            "device": [trace.device_name or ""], "events": [len(trace.store)], "steps": [len(trace.steps)],
            "has_gpu": [bool(trace.has_gpu)], "groups": [process_groups(rf.pg_config)]}
    return {"info": info, "steps": steps, "collectives": coll, "kernels": kern, "ops": opt, "memory": mem}


class _RawEvent(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    ts: float = float("nan")
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _RawEvents(msgspec.Struct):
    traceEvents: list[_RawEvent]


_raw_events = msgspec.json.Decoder(_RawEvents)
_any = msgspec.json.Decoder()
MEMORY_COLUMNS = ("rank", "ts_ns", "bytes", "total_allocated", "total_reserved", "device_type", "device_id",
                  "addr", "step")


def memory_table(trace, base: int, rank: int, s0: np.ndarray, s1: np.ndarray) -> dict:
    """The ``[memory]`` instants of a ``profile_memory`` trace (allocations > 0, frees < 0, the
    allocator's totals after each), read from the trace's bytes only when they hold one."""
    out = {c: [] for c in MEMORY_COLUMNS}
    src = trace.store.source
    if src is None or b'"[memory]"' not in src:
        return out
    try:
        evs = _raw_events.decode(src).traceEvents
    except (msgspec.DecodeError, msgspec.ValidationError):
        return out
    def ival(a: dict, k: str) -> int:  # an int64 column: anything else (or an address past 2^63) is -1
        v = a.get(k)
        return v if isinstance(v, int) and -(1 << 63) <= v < (1 << 63) else -1

    for e in evs:
        if e.ph != "i" or e.name != "[memory]" or e.ts != e.ts:
            continue
        a = _any.decode(e.args)
        if not isinstance(a, dict):
            continue
        out["ts_ns"].append(base + round(e.ts * 1000))
        for col, key in (("bytes", "Bytes"), ("total_allocated", "Total Allocated"),
                         ("total_reserved", "Total Reserved"), ("device_type", "Device Type"),
                         ("device_id", "Device Id"), ("addr", "Addr")):
            out[col].append(ival(a, key))
    n = len(out["ts_ns"])
    out["rank"] = [rank] * n
    out["step"] = _step_of(np.array(out["ts_ns"], dtype=np.int64), s0, s1).tolist()
    return out


def _step_of(ts: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    """Index of the step whose [start, end) holds each time, else -1 (steps never overlap)."""
    if not s0.size or not ts.size:
        return np.full(ts.size, -1, dtype=np.int64)
    o = np.argsort(s0, kind="stable")
    k = np.searchsorted(s0[o], ts, side="right") - 1
    ok = (k >= 0) & (ts < s1[o][np.maximum(k, 0)])
    return np.where(ok, o[np.maximum(k, 0)], -1)


def _stream(t, i: int) -> int:
    e = int(t.ev[i])
    if e < 0:
        return -1
    key = t.store.track_keys[t.store.track[e]]
    try:
        return int(key[-1])
    except (TypeError, ValueError):
        return -1


def _tid(t, i: int):
    e = int(t.ev[i])
    return t.store.track_keys[t.store.track[e]][-1] if e >= 0 else ""


RANK_LEFT_OUT = ("events_missing_fields", "times_out_of_range")
"""A rank's own diagnostics (``tree.DIAGNOSTICS``) that say events were left out: carried into the
job's diagnostics with the loader's repairs, since they change that rank's figures. Events of a
wrong-typed field are among the repairs already; the rest (nesting, flows, categories) describe
a healthy trace too and stay in the rank's own summary."""


def load_rank(rf: RankFile, world: int | None = None, load_opts: dict | None = None) -> dict:
    """Load one rank's trace and return its tables (what a worker of the local pool or Ray runs),
    with ``diagnostics``: what loading repaired or left out, each line naming the rank.

    A file that cannot be read as a trace (``TraceError``: not JSON, empty, truncated beyond
    repair, unreadable) is not the job's end: the result is ``{"skipped": line, "file", "problem"}``
    and the rank is left out (``rank_results``). This is the one place a rank is skipped, whichever engine ran it;
    any other error (a bug, a worker killed) still stops the job."""
    from tracetui.model.trace import load_trace
    from tracetui.model.tree import DIAGNOSTICS
    try:
        trace = load_trace(rf.path, **(load_opts or {}))
    except TraceError as e:
        return {"skipped": skipped_line(rf, e.problem), "file": str(rf.path), "problem": e.problem}
    if rf.host is None:  # placed from the file's head: the rest of its header comes from this load
        rf.host = trace.meta.get("host_name")
        rf.base_ns = trace.meta.get("baseTimeNanoseconds") or 0
    out = rank_tables(trace, rf, world)
    who = f"rank {rf.rank} ({rf.path.name})"
    notes = [f"{who}: {r}" for r in trace.report.repairs]
    notes += [f"{who}: {trace.tree.diagnostics[k]:,} {DIAGNOSTICS[k]}" for k in RANK_LEFT_OUT
              if trace.tree.diagnostics.get(k)]
    out["diagnostics"] = notes
    return out


def rank_results(job: Job, results: list[dict]) -> tuple[list[dict], list[str]]:
    """The ranks that loaded, and the job's diagnostics with each rank's own (skipped, repaired),
    in rank order. When every rank was skipped, the one-line error: a job of none is no job."""
    diags = list(job.diagnostics)
    kept = []
    for r in results:
        if "skipped" in r:
            diags.append(r["skipped"])
        else:
            kept.append(r)
            diags += r.get("diagnostics", [])
    if results and not kept:
        skipped = [r["skipped"] for r in results] + [skipped_line(f, f.problem) for f in job.skipped]
        problem = (results[0]["problem"].splitlines() or [""])[0]
        if len(skipped) > 1:
            more = "; ".join(skipped[1:4]) + (f"; and {len(skipped) - 4} more" if len(skipped) > 4 else "")
            problem += f" (no rank of the job could be read: {more})"
        raise TraceError(Path(results[0]["file"]), problem)
    return kept, diags


# ---------------------------------------------------------------- the job
def concat(tables: list[dict]) -> dict:
    """Columns of several ranks' copies of one table, joined."""
    if not tables:
        return {}
    keys = list(tables[0])
    return {k: [x for t in tables for x in t[k]] for k in keys}


def process_groups(pg_config) -> list[dict]:
    """``distributedInfo.pg_config`` as ``[{"name", "ranks"}]``: the process groups this rank is
    in, with their members (entries without a name or a list of int ranks are left out)."""
    out = []
    for p in pg_config or []:
        if not isinstance(p, dict) or p.get("pg_name") is None or not isinstance(p.get("ranks"), list):
            continue
        rs = p["ranks"]
        if all(isinstance(r, int) and not isinstance(r, bool) and -(1 << 31) <= r < (1 << 31) for r in rs):
            out.append({"name": str(p["pg_name"]), "ranks": sorted(set(rs))})
    return out


UNRECORDED = "default"
"""The group of collectives whose records name none (gloo's annotations, an NCCL annotation
without its kernel): the default process group, and any subgroup ``backend_groups`` cannot place."""


def _without_unpaired_p2p(coll: dict) -> tuple[dict, dict]:
    """``coll`` without the point-to-point rows no id pairs (a backend annotation's send/recv with
    no group, sequence or comms id), and how many each rank had. Matched by order with the
    world's collectives, a send on rank 0 to rank 1 was 'the same collective' as unrelated
    sends and recvs on every other rank, with waits and a last arriver (``STRAGGLER_SQL`` drops
    the same rows)."""
    drop = [i for i, (kind, src, g, seq, cid) in enumerate(zip(coll.get("kind", []), coll.get("source", []),
                                                               coll.get("group", []), coll.get("seq", []),
                                                               coll.get("comms_id", [])))
            if kind == "p2p" and src == "annotation" and not g and seq < 0 and not cid]
    if not drop:
        return coll, {}
    counts: dict = {}
    for i in drop:
        counts[coll["rank"][i]] = counts.get(coll["rank"][i], 0) + 1
    gone = set(drop)
    return {k: [v for i, v in enumerate(vals) if i not in gone] for k, vals in coll.items()}, counts


def _subgroups_not_told_apart(info: dict, coll: dict) -> list[str]:
    """The process groups smaller than the job that ``pg_config`` lists but that no collective was
    placed in, when the backend's annotations name no group (gloo): their collectives, if any
    ran, sit in the default group's order (``backend_groups`` needs a signature that only their
    ranks hold; without ``record_shapes`` every all-reduce looks alike)."""
    if not any(src == "annotation" and not g for src, g in zip(coll.get("source", []), coll.get("group", []))):
        return []
    n = len(set(info.get("rank", [])))
    names = {str(g["name"]) for gl in (info.get("groups") or []) for g in (gl or [])
             if isinstance(g, dict) and g.get("ranks") and len(set(g["ranks"])) < n and str(g["name"]) != "0"}
    # "0": torch's default group, the world (a generated job may still list its source's world)
    missing = sorted(names - {str(g) for g in coll.get("group", []) if g})
    if not missing:
        return []
    return [f"process group(s) {', '.join(missing)} (smaller than the job, in pg_config) hold no collective "
            f"told apart as theirs: any they ran are matched in the default group's order (record with "
            f"record_shapes=True so their sizes tell them apart)"]


def backend_groups(info: dict, coll: dict, world: int | None = None) -> dict:
    """``coll`` with the process group filled in where the backend's annotations leave it out.

    gloo's ``gloo:*`` annotations carry no group, and gloo runs each process group on its own
    worker threads, so a subgroup's collectives interleave with the default group's. A collective
    signature (name, dtype, size) held by exactly the ranks of one process group smaller than the
    job (``distributedInfo.pg_config``; members absent from the job left out, so a subgroup with
    one member left still takes that rank's collectives out of the world's order) is that group's: its
    rows get the group's name and size (an all-gather's size, reckoned with the world size, is
    rescaled to the group's). Everything else keeps no group. ``STRAGGLER_SQL`` does the same."""
    free = [i for i, (src, g) in enumerate(zip(coll.get("source", []), coll.get("group", []))) if src == "annotation" and not g]
    # the ranks that hold such collectives: a rank with none (its annotations cut away) must not
    # make the world's collectives look like those of a subgroup of the others
    present = sorted({coll["rank"][i] for i in free})
    groups = info.get("groups") or [[] for _ in info.get("rank", [])]
    by_set: dict = {}
    sizes: dict = {}
    for gl in groups:
        for g in gl or []:
            rs = tuple(r for r in sorted(set(g["ranks"])) if r in set(present))
            if 1 <= len(rs) < len(present):  # one present member: the others are missing from the folder
                by_set[rs] = min(by_set.get(rs, g["name"]), g["name"])
                sizes[(rs, g["name"])] = len(g["ranks"])
    if not by_set or not coll.get("rank"):
        return coll
    holders: dict = {}
    for i in free:
        holders.setdefault((coll["name"][i], coll["dtype"][i], coll["msg_bytes"][i]), set()).add(coll["rank"][i])
    out = {**coll, "group": list(coll["group"]), "group_size": list(coll["group_size"]),
           "msg_bytes": list(coll["msg_bytes"])}
    world = world or len(present)
    for i in free:
        rs = tuple(sorted(holders[(coll["name"][i], coll["dtype"][i], coll["msg_bytes"][i])]))
        if rs in by_set:
            name = by_set[rs]
            n = sizes[(rs, name)]
            out["group"][i] = name
            if out["group_size"][i] <= 0:
                out["group_size"][i] = n
                m = out["msg_bytes"][i]
                if coll["kind"][i] == "all_gather" and m > 0 and m % world == 0:
                    out["msg_bytes"][i] = m // world * n
    return out


def match_keys(coll: dict) -> tuple[list, dict]:
    """The key that matches each collective across ranks, and how each group was matched.

    Per group (``Process Group Name``; NCCL kernels without one by their stream, since each
    communicator has its own; annotations with none in ``UNRECORDED``, after ``backend_groups``
    placed a subgroup's): ``seq`` when every record of the
    group has ``Seq``, ``comms_id`` when every one has ``Comms Id``, else ``order``, the ordinal
    in start order on its rank.
    """
    n = len(coll["rank"])
    group = [g if g else (f"stream {s}" if src == "kernel" and s >= 0 else UNRECORDED)
             for g, s, src in zip(coll["group"], coll["stream"], coll["source"])]
    by_group: dict = {}
    for i in range(n):
        by_group.setdefault(group[i], []).append(i)
    how = {}
    keys = [None] * n
    for g, idx in by_group.items():
        if all(coll["seq"][i] >= 0 for i in idx):
            how[g] = "seq"
            for i in idx:
                keys[i] = (g, "seq", coll["seq"][i])
        elif all(coll["comms_id"][i] for i in idx):
            how[g] = "comms_id"
            for i in idx:
                keys[i] = (g, "id", coll["comms_id"][i])
        else:
            how[g] = "order"
            per_rank: dict = {}
            for i in sorted(idx, key=lambda i: (coll["rank"][i], coll["start_ns"][i], coll["end_ns"][i])):
                k = per_rank.get(coll["rank"][i], 0)
                per_rank[coll["rank"][i]] = k + 1
                keys[i] = (g, "order", k)
    return keys, how


def analyze(info: dict, coll: dict, steps: dict, diagnostics: list[str] | None = None,
            job_world: int | None = None) -> dict:
    """The job: collectives matched across ranks, clock offsets, waits, stragglers, per-step figures.

    Inputs are the concatenated ``info``, ``collectives`` and ``steps`` tables of every rank;
    output is the ``ranks --json`` document (µs, bytes).
    """
    diags = list(diagnostics or [])
    ranks = sorted(set(info["rank"]))
    coll, p2p = _without_unpaired_p2p(coll)  # before grouping, as STRAGGLER_SQL's first step
    coll = backend_groups(info, coll, job_world)
    diags += _subgroups_not_told_apart(info, coll)
    if p2p:
        diags.append(f"{sum(p2p.values())} point-to-point transfer(s) left out of matching and waits "
                     f"(gloo's send/recv annotations name no peer; " + ", ".join(f"rank {r}: {n}" for r, n in sorted(p2p.items()))
                     + "): a send pairs with one rank's recv, not with every rank's")
    n_ranks = len(ranks)
    if n_ranks == 1:
        diags.append(f"one rank only (rank {ranks[0]}): waits, arrivals and stragglers compare ranks, "
                     f"so there is nothing to compare it with")
    keys, how = match_keys(coll) if coll.get("rank") else ([], {})
    rank_a = np.array(coll.get("rank", []), dtype=np.int64)
    start = np.array(coll.get("start_ns", []), dtype=np.int64)
    end = np.array(coll.get("end_ns", []), dtype=np.int64)
    # each matched collective: the rows of its ranks
    by_key: dict = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    for k, rows in by_key.items():
        rs = [coll["rank"][i] for i in rows]
        if len(set(rs)) != len(rs):
            diags.append(f"collective {_key_str(k)} appears more than once on rank(s) "
                         f"{_spans(sorted({r for r in rs if rs.count(r) > 1}))}")
    # clock offsets: one clock per host (ranks of one host share it; a rank whose host is not
    # recorded is its own). Each host's offset is the median, over the matched collectives and
    # the host's ranks, of (end on that rank - end on the reference rank): collectives end together.
    # The lower median, so the figure is one measured difference (and DuckDB's quantile_disc).
    ref = ranks[0] if ranks else 0
    host_of = {r: (h if h else f"rank {r}") for r, h in zip(info["rank"], info["host"])}
    ref_end = {k: int(end[i]) for k, rows in by_key.items() for i in rows if coll["rank"][i] == ref}
    diffs: dict = {r: [] for r in ranks}
    for k, rows in by_key.items():
        if k in ref_end:
            for i in rows:
                diffs[coll["rank"][i]].append(int(end[i]) - ref_end[k])
    est = {r: (_median_low(diffs[r]) if diffs[r] else None) for r in ranks}
    unsure: list[str] = []  # why the matching cannot be trusted to name a straggler
    for r in ranks:
        if est[r] is not None and abs(est[r]) > RUN_APART_NS:
            unsure.append(f"rank {r}'s collectives end {est[r] / 1e9:+,.1f} s from rank {ref}'s (another run?)")
            diags.append(f"rank {r}: its collectives end {est[r] / 1e9:+,.1f} s from rank {ref}'s (median); "
                         f"clocks are rarely that far apart: is it from another run?")
    per_host: dict = {}
    for r in ranks:
        per_host.setdefault(host_of[r], []).extend(diffs[r])
    host_off = {h: (_median_low(d) if d else 0) for h, d in per_host.items()}
    host_off[host_of.get(ref, "")] = 0
    offset = {r: host_off[host_of[r]] for r in ranks}
    offset_n = {r: len(per_host[host_of[r]]) for r in ranks}
    for h, d in per_host.items():
        if not d and h != host_of.get(ref) and by_key:
            diags.append(f"{h} shares no collective with rank {ref}: its clock is left as recorded")
    off_a = np.array([offset.get(int(r), 0) for r in rank_a.tolist()], dtype=np.int64)
    a_start, a_end = start - off_a, end - off_a
    wait = np.zeros(rank_a.size, dtype=np.int64)
    last = np.zeros(rank_a.size, dtype=bool)
    caused = {r: 0 for r in ranks}
    n_groups: dict = {}
    collectives = []
    expected = {}
    for k, rows in by_key.items():
        expected.setdefault(k[0], set()).update(coll["rank"][i] for i in rows)
    for k, rows in sorted(by_key.items(), key=lambda kv: int(a_start[kv[1]].min())):
        rows = sorted(rows, key=lambda i: coll["rank"][i])
        ra = np.array(rows, dtype=np.int64)
        latest = int(a_start[ra].max())
        wait[ra] = latest - a_start[ra]
        li = rows[int(np.argmax(a_start[ra]))]
        last[li] = len(rows) > 1  # a collective one rank holds alone has no one to be last against
        if len(rows) > 1:
            second = int(np.sort(a_start[ra])[-2])
            caused[coll["rank"][li]] += latest - second
        dur = a_end[ra] - a_start[ra]
        names = {coll["name"][i] for i in rows}
        dtypes = {coll["dtype"][i] for i in rows}
        sizes = {coll["msg_bytes"][i] for i in rows}
        if len(names) > 1 or len(dtypes) > 1 or len(sizes) > 1:
            diags.append(f"collective {_key_str(k)}: ranks disagree on "
                         + ", ".join(w for w, s in (("name", names), ("dtype", dtypes), ("size", sizes))
                                     if len(s) > 1)
                         + f" ({', '.join(sorted(map(str, names)))})")
        i0 = rows[0]
        gs = max(coll["group_size"][i] for i in rows)
        n = gs if gs > 0 else (job_world or len(expected[k[0]]))
        lat = int(dur.min())
        msg = max(coll["msg_bytes"][i] for i in rows)
        f = busbw_factor(coll["kind"][i0], n)
        algbw = msg / lat if (msg > 0 and lat > 0) else None  # bytes per ns = GB/s
        n_groups[k[0]] = n_groups.get(k[0], 0) + 1
        algos = {coll["algorithm"][i] for i in rows} - {None}
        collectives.append({
            "group": k[0], "match": k[1], "index": k[2], "name": coll["name"][i0], "kind": coll["kind"][i0],
            "dtype": coll["dtype"][i0], "msg_bytes": msg if msg >= 0 else None, "ranks": len(rows),
            "group_size": n, "last_rank": coll["rank"][li], "latency_us": lat / 1e3,
            "algorithm": next(iter(algos)) if len(algos) == 1 else (sorted(algos) or None),
            "algbw_gbps": algbw, "busbw_gbps": (algbw * f) if (algbw is not None and f is not None) else None,
            # int ns / 1000 in Python: the float nearest the exact time (float64(ns) first lost up to 128 ns)
            "per_rank": [{"rank": coll["rank"][i], "start_us": int(a_start[i]) / 1000, "end_us": int(a_end[i]) / 1000,
                          "wait_us": int(wait[i]) / 1e3, "step": coll["step"][i]} for i in rows],
        })
    # equal counts: every rank of a group should hold the same collectives
    for g, members in expected.items():
        per = {r: 0 for r in members}
        for k, rows in by_key.items():
            if k[0] == g:
                for i in rows:
                    per[coll["rank"][i]] += 1
        if len(set(per.values())) > 1:
            diags.append(f"group {g or 'default'}: ranks hold different numbers of collectives: "
                         + ", ".join(f"rank {r}: {c}" for r, c in sorted(per.items())))
            if how.get(g) == "order":  # one collective missing on a rank shifts every match after it
                unsure.append(f"group {g or 'default'} is matched by order and its ranks hold different "
                              f"numbers of collectives (a rank cut short, or one the others lack)")
    idle = [r for r in ranks if not (rank_a == r).any()]
    if idle and len(idle) < len(ranks):
        diags.append(f"rank(s) {_spans(idle)} hold no collective while the others do (cut short, or "
                     f"their annotations were not recorded)")
    # stragglers
    hta = _hta_straggler_counts(ranks, rank_a, a_start, a_end, coll, keys, steps, offset)
    per_rank = []
    waits_total = int(sum(caused.values()))
    for r in ranks:
        mine = rank_a == r
        w = wait[mine]
        per_rank.append({
            "rank": r, "clock": host_of[r], "offset_us": offset[r] / 1e3, "offset_from": offset_n[r],
            "offset_rank_us": None if est[r] is None else est[r] / 1e3, "collectives": int(mine.sum()),
            "wait_total_us": int(w.sum()) / 1e3, "wait_mean_us": (float(w.mean()) / 1e3) if w.size else 0.0,
            "last_count": int(last[mine].sum()), "caused_wait_us": caused[r] / 1e3,
            "hta_straggler_count": hta.get(r, 0),
        })
    straggler = _name_straggler(per_rank, waits_total, len(collectives))
    if unsure and straggler["rank"] is not None:  # a wrong match names a wrong rank: say why, name none
        straggler = {"rank": None, "share": straggler.get("share"),
                     "evidence": "not named, the matching is not reliable: " + "; ".join(unsure)
                                 + ". Taken at face value: " + straggler["evidence"]}
    info_by = {r: i for i, r in enumerate(info["rank"])}
    for pr in per_rank:
        j = info_by[pr["rank"]]
        pr.update({"file": info["file"][j], "host": info["host"][j] or None, "device": info["device"][j] or None,
                   "rank_from": info["rank_from"][j]})
    step_rows = _step_rows(ranks, steps, coll, wait)
    return {"world_size": job_world, "ranks": n_ranks, "reference_rank": ref,
            "matched_by": {(g or "default"): m for g, m in sorted(how.items())},
            "per_rank": per_rank, "straggler": straggler, "steps": step_rows,
            "collectives": collectives, "diagnostics": diags}


def _median_low(values: list[int]) -> int:
    """The lower median (an element, so exact in ns; DuckDB's ``quantile_disc(x, 0.5)``)."""
    v = sorted(values)
    return int(v[(len(v) - 1) // 2])


def _key_str(k) -> str:
    g, how, v = k
    return f"{g or 'default'}#{v}" if how == "order" else f"{g or 'default'} {how} {v}"


def _name_straggler(per_rank: list, caused_total: int, n_coll: int) -> dict:
    """The likely straggler and the evidence: the rank whose late arrivals caused most of the
    waiting (``STRAGGLER_SHARE``), with how often it was last and the HTA metric beside it."""
    if not per_rank or caused_total <= 0:
        return {"rank": None, "evidence": "no collective waited on a late rank"}
    top = max(per_rank, key=lambda p: (p["caused_wait_us"], p["last_count"]))
    share = top["caused_wait_us"] * 1e3 / caused_total
    others = [p for p in per_rank if p is not top]
    mean_other_wait = float(np.mean([p["wait_mean_us"] for p in others])) if others else 0.0
    ev = (f"rank {top['rank']} arrived last at {top['last_count']} of {n_coll} collectives; the others "
          f"waited {top['caused_wait_us']:.1f} µs for it ({100 * share:.0f}% of all waiting caused by a late "
          f"rank); its own mean wait {top['wait_mean_us']:.1f} µs vs {mean_other_wait:.1f} µs for the "
          f"others; HTA's late-start metric flags it in {top['hta_straggler_count']} step(s)")
    if share < STRAGGLER_SHARE:
        return {"rank": None, "evidence": "no single rank dominates: " + ev, "share": share}
    return {"rank": top["rank"], "evidence": ev, "share": share}


def _hta_straggler_counts(ranks, rank_a, a_start, a_end, coll, keys, steps, offset) -> dict:
    """HTA's ``find_stragglers_with_late_start_comm_kernels``, on matched collectives: per step,
    the collectives longer than 1% of the mean step time on their longest rank (HTA filters each
    rank's copy alone, which drops the late rank itself wherever it did not wait: on gloo its
    copy is short, and the ranks that waited were flagged); per (rank, step, name) the last of them;
    the name whose duration varies most across ranks (mean over steps of the std); per step the
    k ranks whose last such collective starts latest are flagged (HTA's k = 2, here 1 for jobs of
    up to 4 ranks, where 2 would flag half of them). Returns rank -> steps flagged."""
    if not rank_a.size or not steps.get("rank"):
        return {}
    st_rank = np.array(steps["rank"], dtype=np.int64)
    st_s = np.array(steps["start_ns"], dtype=np.int64) - np.array([offset.get(int(r), 0) for r in st_rank.tolist()],
                                                                   dtype=np.int64)
    st_e = np.array(steps["end_ns"], dtype=np.int64) - np.array([offset.get(int(r), 0) for r in st_rank.tolist()],
                                                                 dtype=np.int64)
    n_iter = len(set(steps["step"]))
    if not n_iter:
        return {}
    mean_iter = (int(st_e.max()) - int(st_s.min())) / n_iter
    step_a = np.array(coll["step"], dtype=np.int64)
    dur = a_end - a_start
    longest: dict = {}  # per matched collective, its longest rank's duration
    for i, k in enumerate(keys):
        longest[k] = max(longest.get(k, 0), int(dur[i]))
    sig = (step_a >= 0) & (np.array([longest[k] for k in keys], dtype=np.int64) >= HTA_MIN_NORMALIZED_DURATION * mean_iter)
    if not sig.any():
        return {}
    names = np.array(coll["name"], dtype=object)
    last: dict = {}
    for i in np.nonzero(sig)[0].tolist():
        k = (int(rank_a[i]), int(step_a[i]), names[i])
        if k not in last or a_start[i] > a_start[last[k]]:
            last[k] = i
    spread: dict = {}
    for nm in set(k[2] for k in last):
        per_step = {}
        for (r, s, n), i in last.items():
            if n == nm:
                per_step.setdefault(s, []).append(dur[i] / mean_iter)
        stds = [float(np.std(v, ddof=1)) for v in per_step.values() if len(v) > 1]
        spread[nm] = float(np.mean(stds)) if stds else 0.0
    chosen = max(spread, key=lambda n: (spread[n], n))
    k_top = 1 if len(ranks) <= 4 else 2
    out = {r: 0 for r in ranks}
    by_step: dict = {}
    for (r, s, n), i in last.items():
        if n == chosen:
            by_step.setdefault(s, []).append((int(a_start[i]), r))
    for s, lst in by_step.items():
        if len(lst) < 2:  # a step one rank alone reached: no one to be late against
            continue
        lst.sort(reverse=True)
        threshold = lst[min(k_top, len(lst)) - 1][0]
        for ts, r in lst:
            if ts >= threshold:
                out[r] += 1
    return out


def _step_rows(ranks, steps, coll, wait) -> list:
    """Per rank, per step: the step's figures (µs) and the waits of the collectives launched in it."""
    out = []
    if not steps.get("rank"):
        return out
    w_by = {}
    n_by = {}
    for i, (r, s) in enumerate(zip(coll.get("rank", []), coll.get("step", []))):
        if s >= 0:
            w_by[(r, s)] = w_by.get((r, s), 0) + int(wait[i])
            n_by[(r, s)] = n_by.get((r, s), 0) + 1
    comm_cpu = {}
    for i, (r, s) in enumerate(zip(coll.get("rank", []), coll.get("step", []))):
        if s >= 0:
            comm_cpu.setdefault((r, s), []).append((coll["start_ns"][i], coll["end_ns"][i]))
    us = lambda v: None if v < 0 else v / 1e3  # noqa: E731
    for j in range(len(steps["rank"])):
        r, s = steps["rank"][j], steps["step"][j]
        comm = steps["comm_ns"][j]
        if comm < 0:  # CPU-only: the union of the backend's own intervals launched in the step
            iv = np.array(comm_cpu.get((r, s), []), dtype=np.int64).reshape(-1, 2)
            comm = _union(iv[:, 0], iv[:, 1])
        ov = steps["comm_overlapped_ns"][j]
        tot = steps["comm_ns"][j]
        out.append({"rank": r, "step": s, "name": steps["name"][j],
                    "step_us": (steps["end_ns"][j] - steps["start_ns"][j]) / 1e3,
                    "window_us": steps["window_ns"][j] / 1e3, "busy_us": us(steps["busy_ns"][j]),
                    "compute_us": us(steps["compute_ns"][j]), "comm_us": comm / 1e3,
                    "comm_exposed_us": us(steps["comm_exposed_ns"][j]), "comm_overlapped_us": us(ov),
                    "overlap_ratio": (ov / tot) if (tot is not None and tot > 0 and ov >= 0) else None,
                    "memcpy_us": us(steps["memcpy_ns"][j]), "memset_us": us(steps["memset_ns"][j]),
                    "idle_us": us(steps["idle_ns"][j]), "kernels": steps["kernels"][j],
                    "wait_us": w_by.get((r, s), 0) / 1e3, "collectives": n_by.get((r, s), 0),
                    "verdict": steps["verdict"][j]})
    return out


def load_job(items, workers: int | None = None, load_opts: dict | None = None, progress=None):
    """Discover the ranks among ``items``, load them in parallel, and return (job, tables per rank)."""
    from tracetui.jobs.pool import map_ranks
    job = require_ranks(discover(items), items)
    tables = map_ranks(job, workers=workers, load_opts=load_opts, progress=progress)
    return job, tables


def analyze_tables(job: Job, tables: list[dict]) -> dict:
    """``analyze`` over the results ``load_job`` returned (skipped ranks left out and said)."""
    tables, diags = rank_results(job, tables)
    return analyze(concat([t["info"] for t in tables]), concat([t["collectives"] for t in tables]),
                   concat([t["steps"] for t in tables]), diags, job.world)
