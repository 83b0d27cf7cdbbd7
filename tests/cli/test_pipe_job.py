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


def _two_jobs(tmp_path):
    """Two job folders of two ranks each, rank 1 the newest file in both; B's ranks run aten::mm
    100 µs longer than A's, and in each job rank 1's runs 300 µs longer than rank 0's."""
    import os
    out = []
    for name, late in (("jobA", 0.0), ("jobB", 100.0)):
        job = tmp_path / name
        job.mkdir()
        r0, r1 = job / "rank0.1700000000.pt.trace.json", job / "rank1.1700000100.pt.trace.json"
        _rank(r0, 0, late_us=late)
        _rank(r1, 1, late_us=late + 300.0)
        os.utime(r0, (1_700_000_000, 1_700_000_000))
        assert _mm_total_us(r0) != _mm_total_us(r1)
        out.append((job, r0))
    return out


def _mm_per_step_us(path) -> float:
    ev = json.loads(path.read_text())["traceEvents"]
    return _mm_total_us(path) / sum(str(e.get("name", "")).startswith("ProfilerStep#") for e in ev)


def _says_rank_0_of_each(err: str, jobs) -> None:
    lines = err.splitlines()
    assert len(lines) == 2 and "newest" not in err, err
    for line, (job, r0) in zip(lines, jobs):
        assert str(job) in line and "2 ranks" in line and "rank 0" in line and r0.name in line
        assert "tracetui ranks" in line


def test_diff_of_two_job_folders_reads_rank_0_of_each(tmp_path):
    """``diff DIR_A DIR_B`` opened each folder's newest trace (rank 1 here) while ``summary DIR``
    reads rank 0: it diffs rank 0 of each, one stderr line per folder."""
    jobs = _two_jobs(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tracetui", "diff", *(str(j) for j, _ in jobs), "--json",
                        "--no-cache"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["a"]["file"] == str(jobs[0][1]) and doc["b"]["file"] == str(jobs[1][1])
    mm = next(c for c in doc["cpu_changes"] if c["name"] == "aten::mm")
    assert mm["a_self_us"] == _mm_per_step_us(jobs[0][1]) and mm["b_self_us"] == _mm_per_step_us(jobs[1][1])
    _says_rank_0_of_each(r.stderr.decode(), jobs)


def test_two_job_folders_into_a_pipe_diff_rank_0_of_each(tmp_path):
    """``tracetui DIR_A DIR_B | cat`` (two jobs, not one): the diff report of rank 0 of each, the
    same report as naming the two rank-0 files."""
    jobs = _two_jobs(tmp_path)
    ref = subprocess.run([sys.executable, "-m", "tracetui", "diff", "--text", "--no-cache",
                          *(str(r0) for _, r0 in jobs)], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ref.returncode == 0 and not ref.stderr, ref.stderr
    r = subprocess.run([sys.executable, "-m", "tracetui", "--no-cache", *(str(j) for j, _ in jobs)],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and r.stdout == ref.stdout
    _says_rank_0_of_each(r.stderr.decode(), jobs)
