"""One rank -> tables: a loaded rank's steps, collectives, kernels, ops and memory as plain columns
(what a pool or Ray worker sends back, and what an index stores as Parquet).

Every time is int64 ns on the rank's own clock (``baseTimeNanoseconds`` + the event's time); a
base that would carry a time past int64 is not applied, and said (``BASE_LIMIT_NS``).
"""
from __future__ import annotations

from pathlib import Path


import msgspec
import numpy as np

from tracetui.jobs.collectives import rank_collectives
from tracetui.jobs.placement import Job, RankFile, skipped_line
from tracetui.read.errors import TraceError
from tracetui.read.events import K

# ---------------------------------------------------------------- one rank -> tables
STEP_COLUMNS = ("step", "name", "start_ns", "end_ns", "window_ns", "busy_ns", "compute_ns", "comm_ns",
                "comm_exposed_ns", "comm_overlapped_ns", "memcpy_ns", "memset_ns", "idle_ns", "kernels", "verdict",
                "work_start_ns", "work_ns")
"""Per-step table; figures a CPU-only rank cannot have are -1 (null in JSON). ``work_start_ns``
and ``work_ns`` (``_work``) split a late arrival into start skew and work imbalance."""

COMM_BOUND = ("communication-bound",
              "the step's exposed communication (its collectives' time not overlapped by compute kernels; "
              "on a CPU-only rank, all of it) is at least half of the step's window")
"""The verdict of a step that waited on its collectives, tried before the one-trace verdicts
(``model.windows.VERDICTS``): gloo's collectives run on its ``pt_gloo_runloop`` threads, not on
the GPU, so a GPU rank waiting on them looked idle ("CPU-bound", 92% host wait)."""

COMM_BOUND_SHARE = 0.5


def _union(s, e) -> int:
    from tracetui.model.windows import union_ns
    return union_ns(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64))


def _backend_intervals(coll: dict) -> tuple[np.ndarray, np.ndarray]:
    """The start and end (own clock, ns) of the collectives read from the backend's annotations
    (gloo's, or NCCL's where no kernel was recorded): communication whatever the device."""
    rows = [i for i, src in enumerate(coll["source"]) if src == "annotation"]
    return (np.array([coll["start_ns"][i] for i in rows], dtype=np.int64),
            np.array([coll["end_ns"][i] for i in rows], dtype=np.int64))


def is_comm_op(name: str) -> bool:
    """An op that launches a collective (``record_param_comms``, ``c10d::``, ...): the taxonomy's
    answer (``op_class``, cached per name), not a second pattern."""
    from tracetui.model.taxonomy import op_class
    return op_class(name) == "communication"


def _work(trace, w, ops: tuple, comm: tuple, compute_ns: int) -> dict:
    """When the rank started working in the step and how long it worked: the first CPU op that
    starts in the window (any thread; -1: none), and its compute time: the compute kernels' union
    on a GPU rank (``compute_ns``), else the union of its CPU ops in the window less the time
    covered by its communication: the backend's annotations and the collective ops
    (``is_comm_op``; gloo's ``c10d::allreduce_`` blocks the caller for ms: waiting, not work)."""
    o_s, o_e, o_comm = ops
    mine = (o_s >= w.start) & (o_s < w.end)
    s, e = o_s[mine], np.minimum(o_e[mine], w.end)
    start = int(s[~o_comm[mine]].min()) if (~o_comm[mine]).any() else -1
    if trace.has_gpu:
        return {"work_start_ns": start, "work_ns": compute_ns}
    c_s, c_e = np.r_[comm[0], s[o_comm[mine]]], np.minimum(np.r_[comm[1], e[o_comm[mine]]], w.end)
    s, e = s[~o_comm[mine]], e[~o_comm[mine]]
    return {"work_start_ns": start, "work_ns": _union(np.r_[s, c_s], np.r_[e, c_e]) - _union(c_s, c_e)}


def _step_figures(trace, step: int, ann: tuple, ops: tuple) -> dict:
    """A step's per-class time over its window (``Trace.step_breakdown``): compute (the union of
    its non-communication, non-copy kernels), communication (exposed, overlapped), memcpy,
    memset, idle. Communication also counts the backend's annotations launched in the step
    (``_backend_intervals``): the union of both, its overlap with compute kernels measured."""
    w = trace.step_window(step)
    out = {"start_ns": w.start, "end_ns": w.end}
    a_s, a_e = ann
    mine = (a_s >= w.start) & (a_s < w.end)
    a_s, a_e = a_s[mine], a_e[mine]
    if not trace.has_gpu:
        comm = _union(a_s, a_e)
        return {**out, "window_ns": w.end - w.start, "busy_ns": -1, "compute_ns": -1, "comm_ns": comm,
                "comm_exposed_ns": -1, "comm_overlapped_ns": -1, "memcpy_ns": -1, "memset_ns": -1,
                "idle_ns": -1, "kernels": 0, **_work(trace, w, ops, (a_s, a_e), -1),
                "verdict": COMM_BOUND[0] if comm >= COMM_BOUND_SHARE * (w.end - w.start) > 0 else "CPU only"}
    b = trace.step_breakdown(step)
    by_class = b["busy_by_class_ns"]
    out.update({k: b[k] for k in ("window_ns", "busy_ns", "compute_ns", "comm_ns", "comm_exposed_ns",
                                  "comm_overlapped_ns", "idle_ns", "kernels", "verdict")},
               memcpy_ns=by_class.get("memcpy", 0), memset_ns=by_class.get("memset", 0))
    if a_s.size:
        out.update(_with_backend_comm(trace, w, a_s, a_e))
    if out["comm_exposed_ns"] >= COMM_BOUND_SHARE * out["window_ns"] > 0:
        out["verdict"] = COMM_BOUND[0]
    out.update(_work(trace, w, ops, (a_s, a_e), out["compute_ns"]))
    return out


def _with_backend_comm(trace, w, a_s, a_e) -> dict:
    """Communication of a GPU rank's step with the backend's own intervals in it: the union of
    its communication kernels and those intervals; overlapped, its intersection with the compute
    kernels (|A| + |B| - |A u B|); exposed, the rest."""
    from tracetui.model.windows import COMM_CLASSES, NON_COMPUTE
    t = trace.tree
    g = w.gpu
    klass = trace.classes_of(g) if g.size else np.zeros(0, dtype=object)
    st, en = t.start[g], t.start[g] + t.dur[g]
    is_comm = np.isin(klass, list(COMM_CLASSES))
    is_comp = ~np.isin(klass, list(NON_COMPUTE))
    c_s, c_e = np.r_[st[is_comm], a_s], np.r_[en[is_comm], a_e]
    comm = _union(c_s, c_e)
    comp = _union(st[is_comp], en[is_comp])
    overlapped = comm + comp - _union(np.r_[c_s, st[is_comp]], np.r_[c_e, en[is_comp]])
    return {"comm_ns": comm, "comm_overlapped_ns": overlapped, "comm_exposed_ns": comm - overlapped}


def rank_tables(trace, rf: RankFile, world: int | None = None) -> dict:
    """One loaded rank as tables of plain columns: info, steps, collectives, kernels, ops.

    Every time is int64 ns on the rank's own clock (``baseTimeNanoseconds`` + ts).
    """
    base = rf.base_ns
    rank = int(rf.rank if rf.rank is not None else -1)
    coll = rank_collectives(trace, world or rf.world or 0)
    steps = _steps_table(trace, rank, base, _backend_intervals(coll))
    s0, s1 = np.array(steps["start_ns"], dtype=np.int64), np.array(steps["end_ns"], dtype=np.int64)
    for c in ("start_ns", "end_ns", "launch_ns"):
        coll[c] = [x + base for x in coll[c]]
    coll["step"] = _step_of(np.array(coll["launch_ns"], dtype=np.int64), s0, s1).tolist()
    coll["rank"] = [rank] * len(coll["name"])
    info = {"rank": [rank], "world": [int(rf.world) if rf.world else -1], "backend": [rf.backend or ""],
            "host": [rf.host or ""], "file": [str(rf.path)], "base_ns": [base], "rank_from": [rf.rank_from],
            "device": [trace.device_name or ""], "events": [len(trace.store)], "steps": [len(trace.steps)],
            "has_gpu": [bool(trace.has_gpu)], "groups": [process_groups(rf.pg_config)]}
    return {"info": info, "steps": steps, "collectives": coll, "kernels": _kernels_table(trace, rank, base),
            "ops": _ops_table(trace, rank, base, s0, s1), "memory": memory_table(trace, base, rank, s0, s1)}


def _steps_table(trace, rank: int, base: int, ann: tuple) -> dict:
    """The rank's steps (``STEP_COLUMNS``), start and end on its own clock."""
    steps = {c: [] for c in ("rank",) + STEP_COLUMNS}
    t = trace.tree
    op = np.nonzero(t.kind == K["op"])[0]
    ops = (t.start[op].astype(np.int64), (t.start[op] + t.dur[op]).astype(np.int64),
           np.array([is_comm_op(t.name(i)) for i in op.tolist()], dtype=bool))
    for k, s in enumerate(trace.steps):
        f = _step_figures(trace, s, ann, ops)
        f["start_ns"] += base
        f["end_ns"] += base
        if f["work_start_ns"] >= 0:
            f["work_start_ns"] += base
        steps["rank"].append(rank)
        steps["step"].append(k)
        steps["name"].append(trace.name(s))
        for c in STEP_COLUMNS[2:]:
            steps[c].append(f[c])
    return steps


def _kernels_table(trace, rank: int, base: int) -> dict:
    """Every GPU activity of the rank with its class, stream and step (-1: in none)."""
    t = trace.tree
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
    return kern


def _ops_table(trace, rank: int, base: int, s0: np.ndarray, s1: np.ndarray) -> dict:
    """Every CPU op of the rank with its device time, thread and step."""
    t = trace.tree
    ops = np.nonzero(t.kind == K["op"])[0]
    op_start = t.start[ops] + base
    return {"rank": [rank] * ops.size, "name": [t.name(i) for i in ops.tolist()],
            "start_ns": op_start.tolist(), "dur_ns": t.dur[ops].tolist(),
            "device_ns": trace.roll.device[ops].tolist(),
            "tid": [str(_tid(t, i)) for i in ops.tolist()],
            "step": _step_of(op_start, s0, s1).tolist()}


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
    src = trace.store.source_bytes()
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
        ts = e.ts * 1000
        if not -(1 << 62) < ts < (1 << 62) or not -(1 << 63) <= base + round(ts) < (1 << 63):
            continue  # an instant whose time int64 cannot hold
        out["ts_ns"].append(base + round(ts))
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


def base_fits(trace, base: int) -> bool:
    """Whether every event time of ``trace`` plus ``base`` stays inside int64 (a base near 2**63
    overflowed the tables' ns columns: a traceback from ``ranks`` and ``index``)."""
    t = trace.tree
    if not base or not t.start.size:
        return True
    lo = int(t.start.min())
    hi = int(t.start.max()) + max(int(t.dur.max()), 0)
    return -(1 << 63) <= lo + base and hi + base < (1 << 63)


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
    who = f"rank {rf.rank} ({rf.path.name})"
    notes = [f"{who}: {r}" for r in trace.report.repairs]
    if not base_fits(trace, rf.base_ns):
        notes.append(f"{who}: baseTimeNanoseconds {rf.base_ns:,} carries its times past the int64 range: "
                     f"not applied (this rank's times are as recorded, its clock offset estimated)")
        rf.base_ns = 0
    out = rank_tables(trace, rf, world)
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

