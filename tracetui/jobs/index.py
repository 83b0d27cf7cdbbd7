"""A job's index: each rank's tables as Parquet (pyarrow), and the job's analyses as DuckDB queries.

``build_index`` maps ``rank_parquet`` over the ranks, on a local process pool (the default: no
server) or on a Ray cluster, and writes ``INDEX/<table>/rank-NNNNNN.parquet`` (kernels, ops),
``INDEX/<table>.parquet`` (info, steps, collectives: all ranks, in rank order) and a manifest.
A local worker writes its rank's own tables into the folder being built; a Ray worker returns
them as Parquet bytes (a cluster needs no shared filesystem). Both send the job tables back as
plain columns, which the driver appends to one file per table in rank order, so both engines
write byte-for-byte the same tables. The index is built in a temporary folder beside INDEX and
swapped in by rename: a reader never sees half an index, and a failed build leaves the old one.

Queries read only the columns they need from every rank's files, so thousands of ranks never
sit in one process's memory: ``straggler_query`` is one SQL statement over the collectives.

Needs the ``dist`` extra (pyarrow, duckdb; ray for ``--engine ray``).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path

from tracetui.jobs import index_folder as folder
from tracetui.read.errors import TraceError

MANIFEST = folder.MANIFEST

INDEX_VERSION = 4
"""2: info.groups (the rank's process groups, from distributedInfo.pg_config); 3: steps.comm_ns
counts the backend's own intervals on every rank (gloo on GPU ranks), not -1 on CPU ranks;
4: steps.work_start_ns and steps.work_ns (start skew and work imbalance)."""

TABLES = ("info", "steps", "collectives", "kernels", "ops", "memory")

JOB_TABLES = ("info", "steps", "collectives")
"""Small per-rank tables that every job query reads: merged into one file each after the map
(``INDEX/<table>.parquet``), so a query over 1,024 ranks opens 3 files instead of 3,072."""

ROW_GROUP = 1 << 16
"""Rows per row group of a merged table (ranks are appended in order, a few at a time)."""


class MissingExtra(Exception):
    """pyarrow / duckdb / ray is not installed: said in one line, with the install command."""


class EngineError(Exception):
    """The engine cannot start (no Ray cluster at ``--address``): said in one line."""


RAY_PROBE_S = 10.0
"""How long a TCP connection to ``--address`` may take before the build gives up (``ray.init``
retries an address nobody answers for minutes, printing each retry)."""


def probe_address(address: str, timeout: float = RAY_PROBE_S) -> None:
    """Raise EngineError, at once, when nothing accepts a TCP connection at a ``host:port`` (or
    ``ray://host:port``) address; ``auto`` and other forms are left to Ray."""
    import socket
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise EngineError(f"--address {address}: no Ray cluster answers there ({why})") from None


def _pa():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("indexes need pyarrow and duckdb: pip install 'tracetui[dist]'") from None
    return pa, pq


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise MissingExtra("indexes need pyarrow and duckdb: pip install 'tracetui[dist]'") from None
    return duckdb


def schemas() -> dict:
    """The Arrow schema of every table: fixed, so empty tables and both engines agree."""
    pa, _ = _pa()
    i64, i32, s, f = pa.int64(), pa.int32(), pa.string(), pa.float64()
    return {
        "info": pa.schema([("rank", i32), ("world", i32), ("backend", s), ("host", s), ("file", s),
                           ("base_ns", i64), ("rank_from", s), ("device", s), ("events", i64), ("steps", i32),
                           ("has_gpu", pa.bool_()),
                           ("groups", pa.list_(pa.struct([("name", s), ("ranks", pa.list_(i32))])))]),
        "steps": pa.schema([("rank", i32), ("step", i32), ("name", s), ("start_ns", i64), ("end_ns", i64),
                            ("window_ns", i64), ("busy_ns", i64), ("compute_ns", i64), ("comm_ns", i64),
                            ("comm_exposed_ns", i64), ("comm_overlapped_ns", i64), ("memcpy_ns", i64),
                            ("memset_ns", i64), ("idle_ns", i64), ("kernels", i64), ("verdict", s),
                            ("work_start_ns", i64), ("work_ns", i64)]),
        "collectives": pa.schema([("rank", i32), ("name", s), ("kind", s), ("raw_name", s), ("source", s),
                                  ("group", s), ("seq", i64), ("comms_id", s), ("dtype", s), ("msg_bytes", i64),
                                  ("group_size", i64), ("algorithm", s), ("start_ns", i64), ("end_ns", i64),
                                  ("launch_ns", i64), ("stream", i64), ("step", i32)]),
        "kernels": pa.schema([("rank", i32), ("name", s), ("class", s), ("start_ns", i64), ("dur_ns", i64),
                              ("stream", i64), ("step", i32)]),
        "ops": pa.schema([("rank", i32), ("name", s), ("start_ns", i64), ("dur_ns", i64), ("device_ns", i64),
                          ("tid", s), ("step", i32)]),
        "memory": pa.schema([("rank", i32), ("ts_ns", i64), ("bytes", i64), ("total_allocated", i64),
                             ("total_reserved", i64), ("device_type", i32), ("device_id", i32), ("addr", i64),
                             ("step", i32)]),
    }


def _parquet_bytes(table: dict, schema) -> bytes:
    pa, pq = _pa()
    t = pa.Table.from_pydict({f.name: table.get(f.name, []) for f in schema}, schema=schema)
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="zstd")
    return buf.getvalue()


def rank_parquet(rf, world: int | None, load_opts: dict | None = None) -> tuple[int, dict]:
    """Load one rank and return (rank, {table: data}): what a pool or Ray worker runs. The big
    tables (kernels, ops) come as Parquet bytes, the job tables as plain columns (a few rows:
    pickling them costs 20 µs where an Arrow table's pickle cost 400), which the driver appends
    to their merged files."""
    from tracetui.jobs.tables import load_rank
    tables = load_rank(rf, world, load_opts)
    if "skipped" in tables:  # not readable as a trace: no tables, only why (ranks.load_rank)
        return int(rf.rank), tables
    sch = schemas()
    out = {name: (_parquet_bytes(tables[name], sch[name]) if tables[name].get("rank") else None)
           for name in TABLES if name not in JOB_TABLES}  # None: no rows (a CPU rank's kernels), no file
    out.update({name: {f.name: list(tables[name].get(f.name, [])) for f in sch[name]} for name in JOB_TABLES})
    out["diagnostics"] = tables["diagnostics"]
    return int(rf.rank), out


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def build_index(items, out, workers: int | None = None, engine: str = "local", address: str | None = None,
                load_opts: dict | None = None, progress=None) -> dict:
    """Index the ranks among ``items`` into ``out`` (replaced atomically). Returns what was done."""
    from tracetui.jobs.placement import discover, require_ranks
    _pa(), _duckdb()
    t0 = time.perf_counter()
    job = require_ranks(discover(items), items)
    out = folder.target(out, [rf.path for rf in job.ranks])
    with folder.writing(out):
        folder.clean_litter(out)
        tmp = folder.building(out)
        try:
            for t in TABLES:
                (tmp / t).mkdir(parents=True)
            merged = _Merged(tmp, [rf.rank for rf in job.ranks], {rf.rank: rf.path for rf in job.ranks})
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return _build(job, out, tmp, merged, t0, workers, engine, address, load_opts, progress)


def _build(job, out: Path, tmp: Path, merged, t0, workers, engine, address, load_opts, progress) -> dict:
    """``build_index``'s map into ``tmp``, its manifest, and the swap (``index_folder.swap``)."""
    from tracetui.jobs.placement import skipped_line
    from tracetui.jobs.tables import rank_results
    notes: dict = {}  # rank -> what it said: skipped (no rows, not in the manifest) or its repairs

    def write(rank: int, parts: dict) -> None:  # inside the folder being built: no reader sees it yet
        if "skipped" in parts:
            notes[rank] = parts
            merged.add(rank, {name: {c: [] for c in merged.schemas[name].names} for name in JOB_TABLES})
            return
        notes[rank] = {"diagnostics": parts.pop("diagnostics", [])}
        _write_rank_files(tmp, rank, parts)  # none left when a local worker wrote them itself
        merged.add(rank, {name: parts[name] for name in JOB_TABLES})

    try:
        if engine == "ray":
            used = _map_ray(job, write, workers, address, load_opts, progress)
        else:
            used = _map_local(job, write, workers, load_opts, progress, tmp)
        merged.close()
        _, diagnostics = rank_results(job, [notes[rf.rank] for rf in job.ranks])  # none read: the error
        manifest = {"version": INDEX_VERSION, "world_size": job.world, "backend": job.backend,
                    "ranks": [{"rank": rf.rank, "file": str(rf.path), "rank_from": rf.rank_from} for rf in job.ranks
                              if "skipped" not in notes[rf.rank]],
                    "diagnostics": diagnostics, "tables": list(TABLES)}
        _write_atomic(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
        folder.swap(out, tmp)
    except BaseException:
        with contextlib.suppress(Exception):  # a full disk fails the close too: the first error is said
            merged.close(failed=True)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"path": str(out), "ranks": len(manifest["ranks"]), "engine": engine, "workers": used,
            "seconds": time.perf_counter() - t0, "skipped": [skipped_line(f, f.problem) for f in job.skipped]
            + [notes[r]["skipped"] for r in sorted(notes) if "skipped" in notes[r]]}


class _Merged:
    """The job tables (``JOB_TABLES``) of every rank, appended to one Parquet file each in rank
    order as results arrive in any order: a rank that arrives early waits in ``pending`` until
    the ranks before it are written, and rows are written in row groups of ``ROW_GROUP``. The
    same sequence of ranks gives the same bytes, whichever engine ran the map."""

    def __init__(self, folder: Path, ranks: list, files: dict | None = None):
        pa, pq = _pa()
        self.files = files or {}
        self.pa = pa
        self.order, self.next = list(ranks), 0
        self.pending: dict = {}
        self.schemas = sch = schemas()
        self.writers = {n: pq.ParquetWriter(folder / f"{n}.parquet", sch[n], compression="zstd") for n in JOB_TABLES}
        self.buf = {n: [] for n in JOB_TABLES}
        self.rows = {n: 0 for n in JOB_TABLES}
        for n in JOB_TABLES:
            (folder / n).rmdir()

    def add(self, rank: int, tables: dict) -> None:
        """``tables``: a rank's job tables as ``{column: list}`` in schema order."""
        self.pending[rank] = tables
        while self.next < len(self.order) and self.order[self.next] in self.pending:
            for n, t in self.pending.pop(self.order[self.next]).items():
                self.buf[n].append(t)
                self.rows[n] += len(t["rank"])
                if self.rows[n] >= ROW_GROUP:
                    self._flush(n)
            self.next += 1

    def _flush(self, n: str) -> None:
        """The buffered ranks' rows as one Arrow table (one conversion per row group, not per rank)."""
        if self.buf[n]:
            cols = {c: [x for t in self.buf[n] for x in t[c]] for c in self.schemas[n].names}
            try:
                table = self.pa.Table.from_pydict(cols, schema=self.schemas[n])
            except (self.pa.ArrowException, OverflowError, TypeError, ValueError) as e:
                raise self._culprit(n, e) from None
            self.writers[n].write_table(table, row_group_size=ROW_GROUP)
        self.buf[n], self.rows[n] = [], 0

    def _culprit(self, n: str, err: Exception) -> TraceError:
        """The rank whose rows of table ``n`` do not fit its schema (a trace's ``Seq`` of 1e30
        overflows int64), as a one-line error naming its file: the rows arrive as plain columns,
        so the table is built here, where one rank's bad value would otherwise name no rank."""
        for t in self.buf[n]:
            try:
                self.pa.Table.from_pydict(t, schema=self.schemas[n])
            except (self.pa.ArrowException, OverflowError, TypeError, ValueError) as e:
                rank = t["rank"][0] if t.get("rank") else None
                return TraceError(self.files.get(rank, f"rank {rank}"), f"its {n} table does not fit the index ({e})")
        return TraceError(Path(f"{n}.parquet"), f"the {n} table could not be built ({err})")

    def close(self, failed: bool = False) -> None:
        for n, w in self.writers.items():
            if not failed:
                self._flush(n)
            w.close()
        self.writers = {}


def _write_rank_files(folder: Path, rank: int, parts: dict) -> None:
    """A rank's own tables (kernels, ops, memory), each one Parquet file; taken out of ``parts``."""
    for name in TABLES:
        if name not in JOB_TABLES and parts.get(name) is not None:
            (folder / name / f"rank-{rank:06d}.parquet").write_bytes(parts.pop(name))


def _rank_into(folder: Path, rf, world, load_opts) -> tuple[int, dict]:
    """A local worker's task: the rank's own tables written into the folder being built (the same
    bytes the driver would write, without sending them to it), its job tables returned."""
    rank, parts = rank_parquet(rf, world, load_opts)
    _write_rank_files(folder, rank, parts)
    return rank, parts


def _map_local(job, write, workers, load_opts, progress, folder: Path) -> int:
    """The local process pool (``pool.as_done``): each worker writes its rank's own files into
    ``folder``; the driver merges the job tables as they come. A rank that cannot be read comes
    back skipped (``ranks.load_rank``); any other error stops the rest."""
    from tracetui.jobs.pool import as_done, workers_for
    tasks = [(folder, rf, job.world, load_opts) for rf in job.ranks]
    for k, (_, got) in enumerate(as_done(_rank_into, tasks, workers), 1):
        write(*got)
        if progress:
            progress(k, len(job.ranks))
    return workers_for(len(tasks), workers)


def _map_ray(job, write, workers, address, load_opts, progress) -> int:
    """The same map on Ray: one task per rank, placed on a node that holds the rank's file when
    files are node-local (found by a probe task per node), anywhere when every node sees it."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise MissingExtra("--engine ray needs ray: pip install 'tracetui[dist]'") from None
    started = not ray.is_initialized()
    if started:
        if address:
            probe_address(address)
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError) as e:  # `auto` with no cluster running, a refused handshake
                raise EngineError(f"--address {address}: no Ray cluster to join ({str(e).splitlines()[0]})") from None
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"TRACETUI_PARALLEL": "0"}})
    try:
        paths = [str(rf.path.resolve()) for rf in job.ranks]
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(num_cpus=0)(_exists)
        seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False))
                        .remote(paths) for n in nodes])
        task = ray.remote(num_cpus=1)(_ray_rank)
        refs = []
        for rf, node in zip(job.ranks, placement(nodes, seen)):
            opts = {} if node is None else {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)}
            refs.append(task.options(**opts).remote(rf, job.world, load_opts))
        left = refs
        done = 0
        while left:
            ready, left = ray.wait(left, num_returns=1)
            try:
                got = ray.get(ready[0])
            except ray.exceptions.RayTaskError as e:  # bad input: its one-line TraceError, not Ray's traceback
                if isinstance(getattr(e, "cause", None), TraceError):
                    raise e.cause from None
                raise
            write(*got)
            done += 1
            if progress:
                progress(done, len(refs))
        return int(ray.cluster_resources().get("CPU", 1))
    finally:
        if started:
            ray.shutdown()


def placement(nodes: list, seen: list[list[bool]]) -> list:
    """For each file, the node to run its task on: one that holds it when only some nodes do
    (node-local files), spreading a node's files over the nodes that hold them; None (anywhere)
    when every node sees the file (a shared filesystem) or none does (Ray will say the error)."""
    out, load = [], {n: 0 for n in nodes}
    for k in range(len(seen[0]) if seen else 0):
        holders = [n for n, have in zip(nodes, seen) if have[k]]
        if not holders or len(holders) == len(nodes):
            out.append(None)
            continue
        best = min(holders, key=lambda n: load[n])
        load[best] += 1
        out.append(best)
    return out


def _exists(paths: list[str]) -> list[bool]:
    return [os.path.exists(p) for p in paths]


def _ray_rank(rf, world, load_opts):
    os.environ["TRACETUI_PARALLEL"] = "0"
    return rank_parquet(rf, world, load_opts)


# ---------------------------------------------------------------- queries
def _glob(index: Path, table: str) -> str:
    """What DuckDB reads for a table: its merged file, or every rank's file."""
    one = Path(index) / f"{table}.parquet"
    return str(one if one.exists() else Path(index) / table / "*.parquet").replace("'", "''")


MANIFEST_TYPES = {"world_size": (int, type(None)), "backend": (str, type(None)), "ranks": list,
                  "diagnostics": list, "tables": list}
"""The manifest's fields and the types a reader relies on (a field of another type was a traceback)."""

MANIFEST_MAX_BYTES = 64 << 20
"""A manifest larger than this is not one this tracetui wrote (it lists ranks and diagnostics)."""


def read_manifest(index: Path) -> dict:
    """The index's manifest, checked: a regular file, JSON, this version, every field of its type."""
    folder.check_files(Path(index), [MANIFEST])
    p = Path(index) / MANIFEST
    try:
        if p.stat().st_size > MANIFEST_MAX_BYTES:
            raise ValueError(f"{p.stat().st_size:,} bytes, more than a manifest holds")
        man = json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        raise TraceError(p, f"not a readable tracetui index ({str(e)[:200]})") from None
    v = man.get("version") if isinstance(man, dict) else None
    if v != INDEX_VERSION or type(v) is not int:
        raise TraceError(Path(index), f"index version {str(v)[:40]}, this tracetui reads version {INDEX_VERSION}: "
                                      "rebuild it with tracetui index")
    bad = [k for k, t in MANIFEST_TYPES.items() if not isinstance(man.get(k), t) or isinstance(man.get(k), bool)]
    if not bad and not all(isinstance(d, str) for d in man["diagnostics"]):
        bad.append("diagnostics")
    if not bad and not all(isinstance(r, dict) and type(r.get("rank")) is int and isinstance(r.get("file"), str)
                           for r in man["ranks"]):
        bad.append("ranks")
    if bad:
        raise TraceError(p, f"manifest field(s) {', '.join(bad)} of the wrong type: rebuild it with tracetui index")
    return man


def _connect():
    """An in-memory DuckDB connection that never draws a progress bar on our stdout."""
    con = _duckdb().connect()
    con.execute("SET enable_progress_bar = false")
    return con


def analyze_index(index: Path, rank_clocks: bool = False) -> dict:
    """``ranks.analyze`` over an index: the same document as ``tracetui ranks`` on the traces."""
    from tracetui.jobs.ranks import analyze
    index = folder.resolved(index)
    man = read_manifest(index)
    folder.check_files(index, [f"{t}.parquet" for t in JOB_TABLES] + list(JOB_TABLES))
    con = _connect()
    info = _lists(con, index, "info")
    coll = _lists(con, index, "collectives", order="rank, start_ns, end_ns")
    steps = _lists(con, index, "steps", order="rank, step")
    return analyze(info, coll, steps, man.get("diagnostics", []), man.get("world_size"), rank_clocks=rank_clocks)


def _lists(con, index, table, order="rank") -> dict:
    with _reading(con, index, (table,)):
        rel = con.sql(f"SELECT * FROM read_parquet('{_glob(index, table)}') ORDER BY {order}")
        cols = rel.columns
        rows = rel.fetchall()
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


class _reading:
    """Around a query over an index's ``tables``: a table file that is missing, truncated or not
    Parquet (DuckDB's IOException / InvalidInputException, pyarrow's ArrowInvalid) becomes one
    line naming the index and the table, not a traceback."""

    def __init__(self, con, index, tables):
        self.con, self.index, self.tables = con, Path(index), tables

    def __enter__(self):
        return self

    def __exit__(self, typ, e, tb):
        if e is None or not isinstance(e, _read_errors()):
            return False
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        bad = [t for t in self.tables if _table_path(self.index, t) in str(e)] or \
            [t for t in self.tables if not _table_opens(self.con, self.index, t)] or list(self.tables)
        raise TraceError(self.index, f"table {', '.join(bad)} unreadable ({first[:300]}): "
                                     "rebuild it with tracetui index") from None


def _read_errors() -> tuple:
    """What reading a damaged table raises: any DuckDB error, pyarrow's, the OS's."""
    errs = [_duckdb().Error, OSError]
    try:
        import pyarrow as pa
        errs.append(pa.ArrowException)
    except ImportError:
        pass
    return tuple(errs)


def _table_path(index: Path, table: str) -> str:
    one = Path(index) / f"{table}.parquet"
    return str(one if one.exists() else Path(index) / table)


def _table_opens(con, index, table) -> bool:
    """Whether every row of ``table`` reads (the probe that names the table a query failed on)."""
    try:
        con.sql(f"SELECT * FROM read_parquet('{_glob(index, table)}')").fetchall()
        return True
    except _read_errors():
        return False


STRAGGLER_SQL = """
WITH c0 AS (SELECT rank, start_ns, end_ns, seq, comms_id, name, dtype, msg_bytes, source, "group", stream
            FROM read_parquet('{coll}')
            WHERE NOT (kind = 'p2p' AND source = 'annotation' AND "group" = '' AND seq < 0 AND comms_id = '')),
info0 AS (SELECT rank, host, groups FROM read_parquet('{info}')),
present AS (SELECT list_sort(list(DISTINCT rank)) AS rs FROM c0 WHERE source = 'annotation' AND "group" = ''),
pgs AS (
  SELECT array_to_string(members, ',') AS rset, min(name) AS pg FROM (
    SELECT DISTINCT g.name AS name, list_sort(list_intersect(g.ranks, (SELECT rs FROM present))) AS members
    FROM (SELECT unnest(groups) AS g FROM info0))
  WHERE len(members) >= 1 AND len(members) < (SELECT len(rs) FROM present) GROUP BY members),
sig AS (SELECT name, dtype, msg_bytes, array_to_string(list_sort(list(DISTINCT rank)), ',') AS rset FROM c0
        WHERE source = 'annotation' AND "group" = '' GROUP BY name, dtype, msg_bytes),
c AS (
  SELECT c0.rank, start_ns, end_ns, seq, comms_id,
         CASE WHEN "group" <> '' THEN "group" WHEN source = 'kernel' AND stream >= 0 THEN 'stream ' || stream
              WHEN pgs.pg IS NOT NULL THEN pgs.pg ELSE '' END AS grp
  FROM c0 LEFT JOIN sig ON c0.source = 'annotation' AND c0."group" = '' AND sig.name = c0.name
                           AND sig.dtype IS NOT DISTINCT FROM c0.dtype AND sig.msg_bytes = c0.msg_bytes
          LEFT JOIN pgs ON pgs.rset = sig.rset),
modes AS (SELECT grp, bool_and(seq >= 0) AS by_seq, bool_and(comms_id <> '') AS by_id FROM c GROUP BY grp),
k AS (
  SELECT c.*, CASE WHEN by_seq THEN 'seq ' || seq WHEN by_id THEN 'id ' || comms_id
                   ELSE 'order ' || (row_number() OVER (PARTITION BY rank, c.grp ORDER BY start_ns, end_ns) - 1)
              END AS key
  FROM c JOIN modes USING (grp)),
info AS (SELECT rank, CASE WHEN host <> '' THEN host ELSE 'rank ' || rank END AS clock FROM info0),
ref AS (SELECT min(rank) AS r FROM info),
refend AS (SELECT grp, key, end_ns AS ref_end FROM k WHERE rank = (SELECT r FROM ref)),
hostoff AS (
  SELECT clock, CASE WHEN clock = (SELECT clock FROM info WHERE rank = (SELECT r FROM ref)) THEN 0
                     ELSE quantile_disc(k.end_ns - refend.ref_end, 0.5) END AS off
  FROM k JOIN refend USING (grp, key) JOIN info USING (rank) GROUP BY clock),
al AS (SELECT k.rank, k.grp, k.key, k.start_ns - coalesce(o.off, 0) AS s
       FROM k JOIN info USING (rank) LEFT JOIN hostoff o USING (clock)),
w AS (
  SELECT rank, max(s) OVER m - s AS wait, count(*) OVER m AS n,
         row_number() OVER (PARTITION BY grp, key ORDER BY s DESC, rank) AS pos,
         s - lead(s) OVER (PARTITION BY grp, key ORDER BY s DESC, rank) AS gap
  FROM al WINDOW m AS (PARTITION BY grp, key))
SELECT i.rank, count(w.rank) AS collectives, coalesce(sum(wait), 0) AS wait_total_ns,
       coalesce(avg(wait), 0) AS wait_mean_ns,
       count(*) FILTER (WHERE pos = 1 AND n > 1) AS last_count,
       coalesce(sum(gap) FILTER (WHERE pos = 1), 0) AS caused_wait_ns
FROM info0 i LEFT JOIN w ON w.rank = i.rank GROUP BY i.rank ORDER BY i.rank
"""
"""Per rank: total and mean wait, how often last, the waiting it caused; clocks aligned per host
as ``ranks.analyze`` does (lower median of collective-end differences to the reference rank);
annotations without a group placed in a subgroup as ``ranks.backend_groups`` does."""


def straggler_query(index: Path, con=None) -> list[dict]:
    """``STRAGGLER_SQL`` over an index: one row per rank, the straggler first by caused wait."""
    index = folder.resolved(index)
    read_manifest(index)
    folder.check_files(index, ["collectives.parquet", "info.parquet", "collectives", "info"])
    con = con or _connect()
    with _reading(con, index, ("collectives", "info")):
        rel = con.sql(STRAGGLER_SQL.format(coll=_glob(index, "collectives"), info=_glob(index, "info")))
        cols = rel.columns
        return [dict(zip(cols, r)) for r in rel.fetchall()]
