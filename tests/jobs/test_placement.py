"""Which files are the job: ranks of one job whose process groups differ per rank, the job among
unrelated traces, the newer of two runs' files, a damaged gzip's head, and ranks from two runs.
Expected values are written here from the headers each test writes, not through tracetui."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from tracetui.jobs import placement as P, ranks as R


def _pg(name: str, members: list[int]) -> dict:
    return {"pg_name": name, "pg_desc": "default_pg" if name == "0" else "undefined",
            "backend_config": "cpu:gloo,cuda:gloo", "pg_size": len(members), "ranks": members}


def _rank(folder: Path, name: str, rank: int, world: int, groups: list[dict], pg_count: int | None = None,
          backend: str = "gloo") -> Path:
    """A rank file with the header torch 2.13 writes (a rank's pg_config lists only its groups)."""
    di = {"backend": backend, "rank": rank, "world_size": world, "pg_count": pg_count or len(groups),
          "pg_config": groups}
    p = folder / name
    p.write_text(json.dumps({"distributedInfo": di, "traceEvents": []}))
    return p


def test_ranks_listing_different_subgroups_are_one_job(tmp_path):
    """torch lists in pg_config only the groups a rank is in: with new_group([0, 1]), ranks 0-1
    list two groups and ranks 2-3 one, yet all four are one job (every rank records pg_count 2)."""
    world, sub = [0, 1, 2, 3], [0, 1]
    for r in world:
        _rank(tmp_path, f"rank{r}.pt.trace.json", r, 4, [_pg("0", world)] + ([_pg("1", sub)] if r in sub else []),
              pg_count=2)
    job = R.discover([tmp_path])
    assert [rf.rank for rf in job.ranks] == world
    assert not any("another job" in d or "missing" in d for d in job.diagnostics)
    assert R.is_job([tmp_path])


def test_a_group_the_ranks_describe_differently_is_named(tmp_path):
    _rank(tmp_path, "rank0.pt.trace.json", 0, 2, [_pg("0", [0, 1]), _pg("1", [0, 1])], pg_count=2)
    _rank(tmp_path, "rank1.pt.trace.json", 1, 2, [_pg("0", [0, 1]), _pg("1", [1])], pg_count=2)
    job = R.discover([tmp_path])
    assert [rf.rank for rf in job.ranks] == [0, 1]
    assert any(d.startswith("process group 1: rank 0 records size 2 and ranks [0, 1], rank 1 size 1 and ranks [1]")
               for d in job.diagnostics), job.diagnostics


def test_the_job_is_the_key_with_most_distinct_ranks(tmp_path):
    """Three unrelated single-process traces that each say rank 0 are one rank, not a job: the two
    ranks of a 128-rank job beside them are the job (and a foreign file does not stop the job view)."""
    for k in range(3):
        p = tmp_path / f"single{k}.pt.trace.json"
        p.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": []}))
    for r in (0, 1):
        _rank(tmp_path, f"big_rank-{r}.pt.trace.json", r, 128, [_pg("0", list(range(128)))], backend="nccl")
    job = R.discover([tmp_path])
    assert job.world == 128 and [rf.rank for rf in job.ranks] == [0, 1]
    assert sum("from another job" in d for d in job.diagnostics) == 3
    assert R.is_job([tmp_path])


def test_of_two_runs_the_newer_files_are_kept(tmp_path):
    """A log folder keeps every run: rank 0 and 1 of an old and of a new run; the new run's are
    kept whatever their names sort as, the old ones named."""
    groups = [_pg("0", [0, 1])]
    old = [_rank(tmp_path, f"zz_old_rank{r}.pt.trace.json", r, 2, groups) for r in (0, 1)]
    new = [_rank(tmp_path, f"aa_new_rank{r}.pt.trace.json", r, 2, groups) for r in (0, 1)]
    now = new[0].stat().st_mtime
    for p in old:
        os.utime(p, (now - 3600, now - 3600))
    job = R.discover([tmp_path])
    assert [rf.path.name for rf in job.ranks] == [p.name for p in new]
    for p in old:  # an hour apart: the other run's files, named as such
        assert f"{p.name}: from an earlier run (written 60 min before the newest run's files): left out" in job.diagnostics
    for p in old:  # 5 s apart: one run's files; of a rank's two, the newer
        os.utime(p, (now - 5, now - 5))
    job = R.discover([tmp_path])
    assert [rf.path.name for rf in job.ranks] == [p.name for p in new]
    for r, p in enumerate(old):
        assert f"{p.name}: rank {r} again, older than {new[r].name} (an earlier run?): left out" in job.diagnostics


def test_a_rank_the_newest_run_lacks_is_missing_not_taken_from_an_older_run(tmp_path):
    """Review: with the newest run's rank 1 unreadable (a re-run that crashed), rank 1 came from
    the older run, silently, beside the newer rank 0 (waits of 6,431 s)."""
    groups = [_pg("0", [0, 1])]
    old = [_rank(tmp_path, f"w.{1_796_432_351_029_602_067 + r}.pt.trace.json", r, 2, groups) for r in (0, 1)]
    new0 = _rank(tmp_path, "w.1796432708188616934.pt.trace.json", 0, 2, groups)
    (tmp_path / "w.1796432708188573675.pt.trace.json").write_bytes(b"")  # the new run's rank 1: empty
    job = R.discover([tmp_path])
    assert [rf.path.name for rf in job.ranks] == [new0.name]
    assert "1 of 2 ranks missing: 1" in job.diagnostics
    assert all(any(d.startswith(f"{p.name}: from an earlier run") for d in job.diagnostics) for p in old)


def test_a_gzip_damaged_after_its_head_is_still_placed_from_distributedInfo(tmp_path, monkeypatch):
    """100 bytes zeroed in the middle of a 40 KB .gz: zlib decodes garbage on and fails only at
    the end, on the checksum; the head before the damage still holds distributedInfo, so the rank
    is placed from it (not from its file name, and without decoding the whole file)."""
    import zlib
    di = {"backend": "gloo", "rank": 1, "world_size": 2, "pg_count": 1, "pg_config": [_pg("0", [0, 1])]}
    events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1, "args": {"pad": os.urandom(8).hex()}}
              for i in range(1500)]
    packed = bytearray(gzip.compress(json.dumps({"distributedInfo": di, "traceEvents": events}).encode()))
    mid = len(packed) // 2
    packed[mid:mid + 100] = bytes(100)
    try:
        zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(bytes(packed))
        pytest.fail("the damage went unnoticed")
    except zlib.error:
        pass
    p = tmp_path / "rank_9.pt.trace.json.gz"  # a name that would say another rank
    p.write_bytes(bytes(packed))
    monkeypatch.setattr(P, "header_of", lambda data: pytest.fail("decoded whole"))  # placed from the head
    rf = R.read_rank_file(p)
    assert (rf.rank, rf.world, rf.rank_from) == (1, 2, "distributedInfo")


def _tables(end_shift_ns: int) -> tuple[dict, dict, dict]:
    """Two ranks on one host with three matched collectives; rank 1's end ``end_shift_ns`` later."""
    info = {"rank": [0, 1], "host": ["node0", "node0"], "file": ["r0.json", "r1.json"], "device": ["", ""],
            "rank_from": ["distributedInfo"] * 2}
    starts = [1_000_000, 2_000_000, 3_000_000]
    coll = {c: [] for c in ("rank", "name", "kind", "raw_name", "source", "group", "seq", "comms_id", "dtype",
                            "msg_bytes", "group_size", "algorithm", "start_ns", "end_ns", "launch_ns", "stream", "step")}
    for r in (0, 1):
        for s in starts:
            row = dict(rank=r, name="all_reduce", kind="all_reduce", raw_name="gloo:all_reduce", source="annotation",
                       group="", seq=-1, comms_id="", dtype="Float", msg_bytes=4, group_size=2, algorithm="",
                       start_ns=s + r * end_shift_ns, end_ns=s + 500_000 + r * end_shift_ns, launch_ns=-1, stream=-1, step=-1)
            for k, v in row.items():
                coll[k].append(v)
    steps = {c: [] for c in ("rank", "step")}
    return info, coll, steps


def test_ranks_from_two_runs_are_named():
    """Collectives that end 100 s apart on ranks of one host: from two runs, said in a diagnostic;
    5 ms apart (a rank that is merely late) is not."""
    far = R.analyze(*_tables(100 * 10**9))
    assert any(d.startswith("rank 1: its collectives end +100.0 s from rank 0's") and "another run" in d
               for d in far["diagnostics"]), far["diagnostics"]
    assert far["straggler"]["rank"] is None and "another run" in far["straggler"]["evidence"]
    near = R.analyze(*_tables(5_000_000))
    assert not any("another run" in d for d in near["diagnostics"])


def test_the_newer_run_is_told_by_the_handler_stamp_when_copies_reset_mtime(tmp_path):
    """tensorboard_trace_handler names a file ``{worker}.{export time}.pt.trace.json``; a copy
    without ``cp -p`` gives every file the copy's mtime (here the old run's are even newer), so
    the stamp in the name decides which run is the newer."""
    groups = [_pg("0", [0, 1])]
    old_ns, new_ns = 1_796_432_351_029_602_067, 1_796_432_708_188_616_934  # a gloo job's names, 6 min apart
    new = [_rank(tmp_path, f"host_{100 + r}.{new_ns + r}.pt.trace.json", r, 2, groups) for r in (0, 1)]
    old = [_rank(tmp_path, f"host_{200 + r}.{old_ns + r}.pt.trace.json", r, 2, groups) for r in (0, 1)]
    later = new[0].stat().st_mtime + 60
    for p in old:
        os.utime(p, (later, later))
    job = R.discover([tmp_path])
    assert [rf.path.name for rf in job.ranks] == [p.name for p in new]
    ms = tmp_path / "ms"  # older torch: the stamp in ms
    ms.mkdir()
    a = _rank(ms, "w_1.1682725898348.pt.trace.json", 0, 1, [_pg("0", [0])])
    b = _rank(ms, "w_2.1682725899348.pt.trace.json", 0, 1, [_pg("0", [0])])
    os.utime(b, (a.stat().st_mtime - 60,) * 2)
    assert [rf.path.name for rf in R.discover([ms]).ranks] == [b.name]


def test_no_straggler_is_named_when_order_matching_lost_its_step():
    """A rank cut short (or lacking one collective) under order matching shifts every match after
    the gap: 12 of 27 'late arrivals' came from misaligned pairs on a QA recording, and the cut
    rank was named. Unequal counts in an order-matched group withhold the verdict, and say why."""
    info, coll, steps = _tables(5_000_000)  # rank 1 late by 5 ms: named when complete
    assert R.analyze(info, coll, steps)["straggler"]["rank"] == 1
    drop = [i for i, r in enumerate(coll["rank"]) if r == 0][1]  # rank 0 lacks its second collective
    cut = {k: [v for i, v in enumerate(vals) if i != drop] for k, vals in coll.items()}
    doc = R.analyze(info, cut, steps)
    assert doc["straggler"]["rank"] is None
    assert "matched by order and its ranks hold different numbers" in doc["straggler"]["evidence"]


def test_replicated_ranks_carry_a_default_group_of_the_new_world(tmp_path):
    """The generator kept its source's pg_config (a default group of 3 ranks in a job of 4): a
    job's metadata that disagreed with itself, and a 'subgroup' of the world in the analysis."""
    from tests.conftest import DATA
    from tracetui.workloads.replicate import replicate
    out = replicate(DATA / "gloo_rank0.pt.trace.json.gz", tmp_path, 4, seed=1)
    for f in out["files"]:
        di = json.loads(Path(f).read_text())["distributedInfo"]
        (default,) = [g for g in di["pg_config"] if g["pg_desc"] == "default_pg"]
        assert (di["world_size"], default["pg_size"], default["ranks"]) == (4, 4, [0, 1, 2, 3])
    job = R.discover([tmp_path])
    assert len(job.ranks) == 4 and not job.diagnostics
