"""`tracetui index`: Parquet tables per rank, written atomically; job analyses as DuckDB queries;
the local pool and a local Ray instance write the same tables."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from tracetui.cli.main import main
from tracetui.jobs import index as ix

from .conftest import copy, gloo_annotations, raw


@pytest.fixture(scope="module")
def gen_index(gen_job, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("idx") / "job.idx"
    assert main(["index", str(gen_job["files"][0].parent), "-o", str(out), "--workers", "2"]) == 0
    return out


def test_index_tables_hold_the_raw_json(gen_job, gen_index):
    import pyarrow.parquet as pq

    def merged(table, r):  # info, steps and collectives: one file, every rank in order
        t = pq.read_table(gen_index / f"{table}.parquet").to_pydict()
        assert t["rank"] == sorted(t["rank"])
        keep = [i for i, x in enumerate(t["rank"]) if x == r]
        return {k: [v[i] for i in keep] for k, v in t.items()}

    assert not (gen_index / "collectives").exists()
    for r, f in enumerate(gen_job["files"]):
        ev = raw(f)["traceEvents"]
        coll = merged("collectives", r)
        anns = gloo_annotations(f)
        assert coll["name"] == [a["name"] for a in anns]
        base = raw(f)["baseTimeNanoseconds"]
        assert coll["start_ns"] == [base + round(a["ts"] * 1000) for a in anns]
        assert not (gen_index / "kernels" / f"rank-{r:06d}.parquet").exists()  # a CPU rank: no kernel rows
        ops = pq.read_table(gen_index / "ops" / f"rank-{r:06d}.parquet").to_pydict()
        raw_ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        assert len(ops["name"]) == len(raw_ops)
        assert sum(ops["dur_ns"]) == sum(round(e["dur"] * 1000) for e in raw_ops)
        steps = merged("steps", r)
        assert steps["name"] == sorted((e["name"] for e in ev if e.get("name", "").startswith("ProfilerStep#")),
                                       key=lambda n: int(n.split("#")[1]))
        info = merged("info", r)
        assert info["rank"] == [r] and info["host"] == [f"node{r // 2}"]


def test_ranks_on_the_index_is_ranks_on_the_traces(gen_job, gen_index, capsys):
    capsys.readouterr()
    assert main(["ranks", str(gen_index), "--json"]) == 0
    from_index = json.loads(capsys.readouterr().out)
    assert main(["ranks", str(gen_job["files"][0].parent), "--json", "--workers", "1"]) == 0
    from_traces = json.loads(capsys.readouterr().out)
    assert from_index == from_traces
    assert from_index["straggler"]["rank"] == gen_job["straggler"]


def test_straggler_sql_agrees_with_the_analysis(gen_job, gen_index):
    doc = ix.analyze_index(gen_index)
    rows = ix.straggler_query(gen_index)
    assert [r["rank"] for r in rows] == [p["rank"] for p in doc["per_rank"]]
    for r, p in zip(rows, doc["per_rank"]):
        assert r["collectives"] == p["collectives"]
        assert r["wait_total_ns"] == round(p["wait_total_us"] * 1000)
        assert r["last_count"] == p["last_count"]
        assert r["caused_wait_ns"] == round(p["caused_wait_us"] * 1000)
    top = max(rows, key=lambda r: r["caused_wait_ns"])
    assert top["rank"] == gen_job["straggler"]


def _killed_on_rank_2(rf, world, load_opts=None):
    """A pool worker's task that dies as the OOM killer would take it, on rank 2."""
    import os
    import signal
    if rf.rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_rank_parquet(rf, world, load_opts)


_real_rank_parquet = ix.rank_parquet


def test_index_is_replaced_atomically(gen_job, tmp_path, capsys, monkeypatch):
    out = tmp_path / "idx"
    files = [str(f) for f in gen_job["files"][:3]]
    assert main(["index", *files, "-o", str(out), "--workers", "1"]) == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = []  # ranks of this job cut before their first event: each alone is skipped, all of them fail
    for r in (3, 4):
        bad.append(tmp_path / f"broken_rank-{r}.pt.trace.json")
        info = dict(json.loads(gen_job["files"][0].read_text())["distributedInfo"], rank=r)
        bad[-1].write_text('{"distributedInfo": ' + json.dumps(info) + ', "traceEvents": [')
    capsys.readouterr()
    for workers in ("1", "2"):  # in this process, and from pool workers
        assert main(["index", *map(str, bad), "-o", str(out), "--workers", workers]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"tracetui: error: {bad[0]}"), err
    # a worker killed mid-build (pool.WorkerLost) stays an error, not a skipped rank
    monkeypatch.setattr(ix, "rank_parquet", _killed_on_rank_2)
    assert main(["index", *files, "-o", str(out), "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tracetui: error: a worker process was killed by SIGKILL"), err
    monkeypatch.undo()
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before                      # the failed builds left the old index whole
    assert out.is_symlink()  # the index is a link to its version folder (index_folder)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".idx") and p.name != os.readlink(out)]  # no temporary
    other = tmp_path / "not_an_index"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main(["index", *files, "-o", str(other), "--workers", "1"]) == 2
    assert (other / "keep.txt").read_text() == "mine"


def test_ray_builds_the_same_index(gen_job, gen_index, tmp_path):
    """A local Ray instance, started and stopped by the build, writes byte-identical tables."""
    pytest.importorskip("ray")
    out = tmp_path / "ray.idx"
    assert main(["index", str(gen_job["files"][0].parent), "-o", str(out), "--engine", "ray", "--workers", "2"]) == 0
    for a in sorted(gen_index.rglob("*.parquet")):
        b = out / a.relative_to(gen_index)
        assert b.read_bytes() == a.read_bytes(), a
    assert (out / ix.MANIFEST).read_bytes() == (gen_index / ix.MANIFEST).read_bytes()
    import ray
    assert not ray.is_initialized()


def test_memory_instants_are_indexed(gen_job, tmp_path):
    """profile_memory's [memory] instants, where a trace has them, become the memory table."""
    import pyarrow.parquet as pq
    doc = raw(gen_job["files"][0])
    steps = sorted((e for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    tid = steps[0]["tid"]
    mem = [{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": steps[0]["pid"], "tid": tid,
            "ts": steps[k]["ts"] + 1.5, "args": {"Addr": 1000 + k, "Bytes": b, "Total Allocated": t,
                                                 "Total Reserved": 4096, "Device Type": 0, "Device Id": -1}}
           for k, (b, t) in enumerate([(512, 512), (1024, 1536), (-512, 1024)])]
    doc["traceEvents"] += mem
    d = tmp_path / "job"
    d.mkdir()
    (d / "gen_rank-0.pt.trace.json").write_text(json.dumps(doc))
    assert main(["index", str(d), "-o", str(tmp_path / "idx"), "--workers", "1"]) == 0
    t = pq.read_table(tmp_path / "idx" / "memory" / "rank-000000.parquet").to_pydict()
    base = doc["baseTimeNanoseconds"]
    assert t["ts_ns"] == [base + round(m["ts"] * 1000) for m in mem]
    assert t["bytes"] == [m["args"]["Bytes"] for m in mem]
    assert t["total_allocated"] == [m["args"]["Total Allocated"] for m in mem]
    assert t["addr"] == [m["args"]["Addr"] for m in mem]
    assert t["step"] == [0, 1, 2]
    assert [p.name for p in (tmp_path / "idx" / "memory").iterdir()] == ["rank-000000.parquet"]


def test_memory_table_of_a_real_profile_memory_recording(tmp_path):
    """The bundled profile_memory recording, indexed as one rank: every [memory] instant, in file
    order, with its step from the ProfilerStep intervals in the raw JSON."""
    import gzip
    import pyarrow.parquet as pq
    from tests.conftest import DATA
    src = DATA / "cpu_transformer_eager_memory.json.gz"
    d = tmp_path / "job"
    d.mkdir()
    copy(src, d / "mem_rank-0.json.gz")
    assert main(["index", str(d), "-o", str(tmp_path / "idx"), "--workers", "1"]) == 0
    doc = json.loads(gzip.decompress(src.read_bytes()))
    base = doc.get("baseTimeNanoseconds") or 0
    mem = [e for e in doc["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    t = pq.read_table(tmp_path / "idx" / "memory" / "rank-000000.parquet").to_pydict()
    assert len(mem) > 100 and len(t["ts_ns"]) == len(mem)
    assert t["bytes"] == [e["args"]["Bytes"] for e in mem]
    assert t["total_allocated"] == [e["args"]["Total Allocated"] for e in mem]
    ns = lambda us: round(us * 1000)  # noqa: E731
    assert t["ts_ns"] == [base + ns(e["ts"]) for e in mem]
    steps = sorted(((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in doc["traceEvents"]
                    if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")))
    want = [next((k for k, (a, b) in enumerate(steps) if a <= ns(e["ts"]) < b), -1) for e in mem]
    assert t["step"] == want


def test_ray_places_node_local_files_on_their_node():
    seen = [[True, True, False, True], [False, True, True, True]]  # node A holds 0, 1, 3; B holds 1, 2, 3
    assert ix.placement(["A", "B"], seen) == ["A", None, "B", None]
    assert ix.placement(["A"], [[True, False]]) == [None, None]           # one node: anywhere
    local = [[True, True, True, False], [False, False, False, True]]
    assert ix.placement(["A", "B"], local) == ["A", "A", "A", "B"]


def _may_fork(_):
    from tracetui.read import forked
    return forked.available()


def test_one_worker_means_one_process(gen_job, tmp_path, monkeypatch):
    """Asked for one worker, a map loads in this process and forks no decode helper per rank (a
    large rank's two-process decode would be a hidden second worker); asked for none, it may."""
    from tracetui.read import forked
    from tracetui.jobs import index as ixm
    from tracetui.jobs.pool import run_map
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    if not forked.available():
        pytest.skip("no fork-based parallelism on this platform")
    assert run_map(_may_fork, [(1,), (2,)], workers=1) == [False, False]
    assert run_map(_may_fork, [(1,)], workers=None) == [True]
    seen = []
    real = ixm.rank_parquet
    monkeypatch.setattr(ixm, "rank_parquet", lambda *a: seen.append(forked.available()) or real(*a))
    ixm.build_index([str(f) for f in gen_job["files"][:2]], tmp_path / "idx", workers=1)
    assert seen == [False, False] and forked.available()


def test_a_rank_value_that_does_not_fit_the_index_names_its_rank(gen_job, tmp_path, monkeypatch):
    """A job-table value out of its column's type (a trace's "Seq": 1e30) is one line naming the
    rank's file; the job tables are built in the driver, so the error first named no rank."""
    from tracetui.jobs import tables as R  # where load_rank finds rank_tables
    from tracetui.read.errors import TraceError
    real = R.rank_tables
    bad = gen_job["files"][1]

    def with_overflow(trace, rf, world):
        t = real(trace, rf, world)
        if rf.rank == 1:
            t["collectives"]["seq"][0] = int(1e30)
        return t

    monkeypatch.setattr(R, "rank_tables", with_overflow)
    with pytest.raises(TraceError) as e:
        ix.build_index([str(f) for f in gen_job["files"]], tmp_path / "idx", workers=1)
    assert e.value.path.name == bad.name and "collectives table does not fit" in e.value.problem
    assert not (tmp_path / "idx").exists()
