"""Which files are which rank of one job: each file's header read (``distributedInfo``, else the
rank in its file name), the job chosen among them, and every file left out or rank missing said.

A size the files declare (``world_size``, a rank number) is checked against what the files hold
before anything is sized from it: a 130-byte file saying ``world_size: 1e9`` must not allocate a
billion of anything (``MAX_RANK``, ``_missing``).
"""
from __future__ import annotations

import glob as _glob
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from tracetui.read.errors import TraceError
from tracetui.read.load import LoadReport, base_time_ns, read_bytes

RANK_IN_NAME = re.compile(r"(?i)(?:^|[^a-z])rank[-_]?(\d+)(?!\d)")
"""A rank in a file name: tensorboard_trace_handler's ``rank-3``, ``rank_3``, ``rank3``."""

TRACE_SUFFIXES = (".json", ".json.gz")

MAX_RANK = (1 << 31) - 1
"""The largest rank number or world size taken from a file (the index stores them as int32):
beyond it, ``distributedInfo``'s value is not a rank and the file is placed as if it had none."""

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
    odd: str | None = None         # a header value that was not taken (said in the job's diagnostics)

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
    if di is not None and _is_int(di.get("rank")) and not 0 <= di["rank"] <= MAX_RANK:
        rf.odd = f"distributedInfo.rank {_short_num(di['rank'])} is not a rank (0 to {MAX_RANK:,}): not taken"
        di = None
    if di is not None and _is_int(di.get("rank")):
        rf.rank, rf.rank_from = di["rank"], "distributedInfo"
        w = di.get("world_size")
        rf.world = w if _is_int(w) and 1 <= w <= MAX_RANK else None
        if w is not None and rf.world is None:
            rf.odd = f"distributedInfo.world_size {_short_num(w)} is not a world size (1 to {MAX_RANK:,}): not taken"
        rf.backend = str(di["backend"]) if di.get("backend") is not None else None
        rf.pg_config = di.get("pg_config") if isinstance(di.get("pg_config"), list) else []
        rf.info = di
    else:
        m = RANK_IN_NAME.search(Path(path).name)
        if m and len(m.group(1)) <= 12 and int(m.group(1)) <= MAX_RANK:
            rf.rank, rf.rank_from = int(m.group(1)), "file name"
        elif m:
            rf.odd = f"the rank in its name ({m.group(1)[:20]}) is past {MAX_RANK:,}: not taken"
    return rf


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _short_num(v) -> str:
    """A header value in a diagnostic, cut short (an integer of 10,000 digits is not printed whole)."""
    text = repr(v) if not _is_int(v) or v.bit_length() < 200 else f"of {len(str(abs(v)))} digits"
    return text if len(text) <= 40 else text[:37] + "..."


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
            if not p.exists() and not p.is_symlink():  # a link that leads nowhere is a file left out, and said
                raise TraceError(p, "no such file")
            out.append(p)
    seen: dict = {}  # resolved -> the spellings it was named by, first kept
    for p in out:
        seen.setdefault(_resolved(p), []).append(p)
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


def _resolved(p: Path) -> Path:
    """``p`` with its links followed, or as given where they lead round in a loop."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python's "Symlink loop"
        return p.absolute()


@dataclass
class Job:
    """The ranks chosen (by rank) and what could not be placed, each said in ``diagnostics``."""
    ranks: list[RankFile]
    diagnostics: list[str]
    world: int | None = None
    backend: str | None = None
    skipped: list[RankFile] = field(default_factory=list)  # files that could not be read at all


def spans(nums: list[int]) -> str:
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


MISSING_SPANS = 64
"""Spans of missing ranks a diagnostic lists (the rest counted)."""


def _missing(world: int, present: set) -> tuple[int, str]:
    """How many of ranks ``0 .. world-1`` are not in ``present``, and those ranks as spans: from
    the gaps between the ranks present, so the work is the files', never the declared world's
    (``world_size`` 1e9 in one 130-byte file was a set of a billion ranks, and an OOM)."""
    have = sorted(r for r in present if r is not None and 0 <= r < world)
    gaps, prev = [], -1
    for r in have + [world]:
        if r > prev + 1:
            gaps.append((prev + 1, r - 1))
        prev = r
    n = sum(b - a + 1 for a, b in gaps)
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in gaps[:MISSING_SPANS])
    if len(gaps) > MISSING_SPANS:
        text += f" and {len(gaps) - MISSING_SPANS:,} more spans"
    return n, text


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
        if f.odd is not None:
            diags.append(f"{f.path.name}: {f.odd}")
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
        n, absent = _missing(world, set(chosen) | {f.rank for f in skipped})  # the skipped are said
        if n:
            diags.append(f"{n:,} of {world:,} ranks missing: {absent}")
        out_of = [r for r in chosen if r >= world]
        if out_of:
            diags.append(f"ranks {spans(out_of)} are outside world size {world}")
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
    return job_of(items) is not None


def job_of(items) -> Job | None:
    """The job ``items`` name when they are two or more files that are distinct ranks of it, else None."""
    try:
        paths = expand_inputs(items)
    except TraceError:
        return None
    if len(paths) < 2:
        return None
    try:
        job = discover(paths)
    except TraceError:
        return None
    # other files beside them are named in the job's diagnostics; a file named as a rank that
    # could not be read counts as one (the job view says it was skipped)
    ranks = {rf.rank for rf in job.ranks} | {f.rank for f in job.skipped if f.rank is not None}
    return job if len(job.ranks) >= 1 and len(ranks) >= 2 else None  # an unreadable copy of rank 0 is not rank 1


