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
