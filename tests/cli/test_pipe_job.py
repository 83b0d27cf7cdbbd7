"""``tracetui DIR`` on a folder of a job's ranks, with stdout a pipe (``| less``, CI, ssh without
a tty): the app started anyway, wrote escape codes into the pipe and never ended. A pipe gets the
report the job view opens on, ``tracetui ranks DIR``, as a single trace gets its summary."""
from __future__ import annotations

import json
import subprocess
import sys


def _rank(path, rank: int, late_us: float) -> None:
    """One rank of a 2-rank gloo job, as torch writes it: distributedInfo, two ProfilerSteps, each
    with an all_reduce (``c10d::allreduce_`` on the main thread, ``gloo:all_reduce`` on gloo's)."""
    pid = 1000 + rank
    ev = [{"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid + 5, "args": {"name": "pt_gloo_runloop"}}]
    for k in range(2):
        t = 10_000.0 + 5_000 * k
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": pid, "tid": pid,
                   "ts": t, "dur": 4_000.0, "args": {}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": pid, "ts": t + 10,
                   "dur": 500.0 + late_us, "args": {}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": pid, "tid": pid,
                   "ts": t + 600 + late_us, "dur": 50.0, "args": {}})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": pid, "tid": pid + 5,
                   "ts": t + 620 + late_us, "dur": 1_500.0 - late_us, "args": {}})
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev,
           "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2}}
    path.write_text(json.dumps(doc))


def test_a_job_folder_into_a_pipe_prints_the_ranks_report_and_ends(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for r in (0, 1):
        _rank(job / f"rank{r}.1700000000.pt.trace.json", r, late_us=300.0 * r)
    ref = subprocess.run([sys.executable, "-m", "tracetui", "ranks", str(job)], capture_output=True, timeout=120)
    assert ref.returncode == 0, ref.stderr
    assert b"2 rank(s) of world size 2" in ref.stdout
    r = subprocess.run([sys.executable, "-m", "tracetui", str(job)], capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout
    assert r.stdout == ref.stdout


def _job(tmp_path):
    """Two ranks; rank 1's file is the newer (its handler stamp and its mtime), so "the newest
    trace in the folder" is rank 1's."""
    import os
    job = tmp_path / "job"
    job.mkdir()
    r0, r1 = job / "rank0.1700000000.pt.trace.json", job / "rank1.1700000100.pt.trace.json"
    _rank(r0, 0, late_us=0.0)
    _rank(r1, 1, late_us=300.0)
    os.utime(r0, (1_700_000_000, 1_700_000_000))
    return job, r0, r1


def _mm_total_us(path) -> float:
    return sum(e["dur"] for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "aten::mm")


def test_summary_of_a_job_folder_reads_rank_0_and_says_where_the_job_report_is(tmp_path):
    """``summary DIR`` on a job folder opened the newest rank's file, whichever rank finished last.
    A summary is one trace's (its JSON a script reads as such): it reads rank 0, and says the job
    has N ranks and that ``tracetui ranks DIR`` reports them."""
    job, r0, r1 = _job(tmp_path)
    assert _mm_total_us(r0) != _mm_total_us(r1)
    r = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(job), "--json"], capture_output=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["file"].endswith(r0.name)
    mm = next(o for o in doc["ops"] if o["name"] == "aten::mm")
    assert mm["cpu_total_us"] == _mm_total_us(r0)  # rank 0's figure, from its raw JSON
    err = r.stderr.decode()
    assert "2 ranks" in err and "rank 0" in err and r0.name in err and "tracetui ranks" in err
    assert "newest" not in err and err.count("\n") == 1


def test_tree_of_a_job_folder_reads_rank_0_too(tmp_path):
    job, r0, _ = _job(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tracetui", "tree", str(job), "--json"], capture_output=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "rank 0" in r.stderr.decode() and r0.name in r.stderr.decode()
