"""A step marker recorded under another process id than the work it marks (HTA's peer trace
``triton_example``: ``ProfilerStep#1`` alone on pid 3100453, the Dynamo region, the Triton op, its
``cuLaunchKernel`` and the sync on pid 1670242, the kernel on the GPU). A step's window holds the
work of its own process (``model/windows.py``, HTA's rule), so the one step reads "CPU only" and
its kernel counted as other steps' work, in a trace of one step.

Not the recording's fault on our side: neither ``kernels/`` nor ``tracetui record`` wrote it (the
file is third-party test data; in a torch recording the markers and ops share the profiler's
pid). ``model/windows.py`` handles it: a step marker whose process holds no host work but step
markers owns the host work of every process in its interval that has no step markers of its own
(as ``_assign`` already does for GPU activity with no launcher, ``any_pid``). Processes with step
markers of their own keep their work: two ranks merged in one file, and a main process with a
DataLoader-like worker process beside it, read as before (the tests below).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tracetui.model import load_trace

PEER = Path(__file__).resolve().parents[2] / ".." / "shared" / "peer-traces" / "hta" / \
    "triton_example_triton_example.json.gz"
STEP_PID, WORK_PID = 3100453, 1670242


def _shaped_like_triton_example(path: Path) -> dict:
    """The peer trace's events, rebuilt: one step marker alone on its process, the work on another."""
    ev = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": "python3.10"}} for p in (WORK_PID, 0)]
    ev += [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": STEP_PID, "tid": STEP_PID,
            "ts": 1000.0, "dur": 5000.0, "args": {"External id": 5}},
           {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/0", "pid": WORK_PID, "tid": WORK_PID,
            "ts": 1050.0, "dur": 1350.0, "args": {"External id": 6}},
           {"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_cos_sin_0", "pid": WORK_PID, "tid": WORK_PID,
            "ts": 1260.0, "dur": 96.0, "args": {"External id": 7}},
           {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": WORK_PID, "tid": WORK_PID,
            "ts": 1300.0, "dur": 48.0, "args": {"External id": 7, "correlation": 11}},
           {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_cos_sin_0", "pid": 0, "tid": 7,
            "ts": 1350.0, "dur": 1.76, "args": {"External id": 7, "correlation": 11, "device": 0, "stream": 7}},
           {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": WORK_PID, "tid": WORK_PID,
            "ts": 1500.0, "dur": 17.0, "args": {"External id": 8, "correlation": 12}}]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-PG509-200"}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def _step_kernels_from_raw(doc: dict) -> list[float]:
    """Kernels whose launch (by correlation) starts inside a ProfilerStep's interval, any process."""
    ev = doc["traceEvents"]
    step = next(e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")
    launch = {e["args"]["correlation"]: e["ts"] for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    return [e["dur"] for e in ev if e.get("cat") == "kernel"
            and step["ts"] <= launch.get(e["args"].get("correlation"), -1) < step["ts"] + step["dur"]]


def _check(path: Path, doc: dict) -> None:
    want = _step_kernels_from_raw(doc)
    assert want  # the raw JSON: the step's interval holds the kernel's launch
    t = load_trace(path)
    assert len(t.steps) == 1
    g = t.step_gpu_nodes(t.steps[0])
    assert g.size == len(want)
    assert sorted((t.tree.dur[g] / 1e3).tolist()) == pytest.approx(sorted(want))


def test_a_step_marker_alone_on_its_pid_marks_the_work_in_its_interval(tmp_path):
    p = tmp_path / "triton_like.json"
    _check(p, _shaped_like_triton_example(p))


def test_hta_triton_example_step_holds_its_kernel():
    if not PEER.exists():
        pytest.skip("peer traces absent")
    doc = json.loads(gzip.decompress(PEER.read_bytes()))
    _check(PEER, doc)


# ---- processes with step markers of their own keep their work

def _x(name, cat, pid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": pid, "ts": ts, "dur": dur, "args": args}


def _launch(pid, ts, corr, kernel_ts, kernel_dur):
    """An op, its cudaLaunchKernel and the kernel it enqueues (stream 7 of device 0)."""
    return [_x("aten::mm", "cpu_op", pid, ts, 40.0, **{"External id": corr}),
            _x("cudaLaunchKernel", "cuda_runtime", pid, ts + 5, 10.0, correlation=corr, **{"External id": corr}),
            {"ph": "X", "cat": "kernel", "name": f"gemm_{pid}_{corr}", "pid": 0, "tid": 7, "ts": kernel_ts,
             "dur": kernel_dur, "args": {"correlation": corr, "External id": corr, "device": 0, "stream": 7}}]


def _several_processes(path: Path) -> dict:
    """Rank A (pid 10) and rank B (pid 20) merged in one file, each with its own two ProfilerSteps
    and work, their steps offset so B's work falls inside A's intervals too; a DataLoader-like
    worker (pid 30, ops and a kernel launch, no step markers) inside both ranks' first steps."""
    ev = []
    corr = 100
    for pid, t0 in ((10, 0.0), (20, 600.0)):
        for k in range(2):
            s = t0 + 1000.0 * k
            ev.append(_x(f"ProfilerStep#{k}", "user_annotation", pid, s, 1000.0))
            for j in range(2):
                corr += 1
                ev += _launch(pid, s + 100 + 300 * j, corr, s + 150 + 300 * j, 20.0 + corr % 7)
    corr += 1
    ev += _launch(30, 700.0, corr, 760.0, 9.0)  # the worker: inside A's step 0 and B's step 0
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def _own_process_reference(doc: dict) -> dict[tuple[int, str], list[float]]:
    """(pid, step name) -> durations of the kernels whose launch (by correlation) starts inside
    that step marker's interval on the marker's own process (HTA's rule), from the raw JSON."""
    ev = doc["traceEvents"]
    launch = {e["args"]["correlation"]: (e["pid"], e["ts"]) for e in ev if e.get("cat") == "cuda_runtime"}
    out = {}
    for s in (e for e in ev if str(e["name"]).startswith("ProfilerStep#")):
        out[(s["pid"], s["name"])] = sorted(
            e["dur"] for e in ev if e.get("cat") == "kernel"
            and launch[e["args"]["correlation"]][0] == s["pid"]
            and s["ts"] <= launch[e["args"]["correlation"]][1] < s["ts"] + s["dur"])
    return out


def _model_steps(t) -> dict[tuple[int, str], list[float]]:
    out = {}
    for s in t.steps:
        w = t.step_window(s)
        out[(w.pid, w.name)] = sorted((t.tree.dur[t.step_gpu_nodes(s)] / 1e3).tolist())
    return out


def test_ranks_merged_in_one_file_and_a_worker_keep_their_own_work(tmp_path):
    p = tmp_path / "two_ranks_and_a_worker.json"
    doc = _several_processes(p)
    want = _own_process_reference(doc)
    assert all(want.values()) and len(want) == 4
    assert _model_steps(load_trace(p)) == {k: pytest.approx(v) for k, v in want.items()}


def test_a_marker_alone_on_its_pid_takes_no_work_from_processes_with_their_own_steps(tmp_path):
    """The same ranks and worker, plus a step marker alone on a process of its own over all of it:
    the ranks' steps keep exactly their own work; the lone marker's step holds the worker's only."""
    p = tmp_path / "lone_marker_beside_ranks.json"
    doc = _several_processes(p)
    doc["traceEvents"].append(_x("ProfilerStep#0", "user_annotation", 99, 0.0, 3000.0))
    p.write_text(json.dumps(doc))
    want = _own_process_reference(doc)
    ev = doc["traceEvents"]
    worker_corr = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime" and e["pid"] == 30}
    want[(99, "ProfilerStep#0")] = sorted(e["dur"] for e in ev if e.get("cat") == "kernel"
                                          and e["args"]["correlation"] in worker_corr)
    assert want[(99, "ProfilerStep#0")] and len(want) == 5
    assert _model_steps(load_trace(p)) == {k: pytest.approx(v) for k, v in want.items()}


def test_allocations_on_the_work_pid_count_for_the_lone_markers_step(tmp_path):
    """Memory's step attribution follows the window (``StepWindow.pids``): allocations made by the
    work process inside the lone marker's interval belong to its step; one before it to none."""
    p = tmp_path / "triton_like_memory.json"
    doc = _shaped_like_triton_example(p)
    step = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#1")
    for i, ts in enumerate((900.0, 1270.0, 1280.0)):  # before the step, then twice inside the Triton op
        doc["traceEvents"].append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                                   "pid": WORK_PID, "tid": WORK_PID, "ts": ts,
                                   "args": {"Addr": 100 + i, "Bytes": 64, "Total Allocated": 64 * (i + 1),
                                            "Total Reserved": 0, "Device Type": 1, "Device Id": 0}})
    p.write_text(json.dumps(doc))
    want = [step["ts"] <= e["ts"] < step["ts"] + step["dur"] for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    assert want == [False, True, True]
    t = load_trace(p)
    mem = t.memory
    order = np.argsort(mem.ts, kind="stable")
    assert [int(mem.step[k]) == t.steps[0] for k in order.tolist()] == want
    assert [int(mem.step[k]) for k in order.tolist()][0] == -1


def test_the_diffs_window_ops_of_the_lone_markers_step_are_the_work_pids(tmp_path):
    """The diff's per-step ops (compare/items.py) come from the same window: the work process's
    ops starting inside the marker's interval, from the raw JSON."""
    from tracetui.compare.items import _window_ops
    p = tmp_path / "triton_like.json"
    doc = _shaped_like_triton_example(p)
    step = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#1")
    want = sorted(e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"
                  and step["ts"] <= e["ts"] < step["ts"] + step["dur"])
    assert want
    t = load_trace(p)
    assert sorted(t.name(int(o)) for o in _window_ops(t, t.step_window(t.steps[0]))) == want


def test_drilling_from_the_lone_markers_step_reaches_its_kernel(tmp_path):
    """The tree says the step holds the kernel (dev, k=1: its window's); drilling from it should
    reach that kernel, as it reaches a backward thread's (README: a step shows each other thread's
    work in its interval as a group)."""
    p = tmp_path / "triton_like.json"
    doc = _shaped_like_triton_example(p)
    want = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    t = load_trace(p)
    s = t.steps[0]
    assert int(t.roll.kernels[s]) == len(want)  # the step's node carries its window's kernels
    seen, todo = [], [s]
    while todo:
        n = todo.pop()
        if t.kind(n) == "kernel":
            seen.append(t.name(n))
        todo.extend(int(c) for c in t.tree.children(n))
    assert seen == want


def test_two_lone_markers_claim_nothing_so_no_work_is_counted_twice(tmp_path):
    """Two processes that each hold only a step marker over the same work (review): which one's it
    is cannot be told, so neither claims it. Before, both windows held the work process and the
    tree put its events under two groups (one left empty)."""
    p = tmp_path / "two_lone_markers.json"
    doc = _shaped_like_triton_example(p)
    doc["traceEvents"].append(_x("ProfilerStep#2", "user_annotation", STEP_PID + 1, 1000.0, 5000.0))
    p.write_text(json.dumps(doc))
    t = load_trace(p)
    assert len(t.steps) == 2
    for s in t.steps:
        w = t.step_window(s)
        assert w.pids == (w.pid,) and t.step_gpu_nodes(s).size == 0  # the marker's own process only
    groups = [n for n in range(len(t.tree.kind)) if t.kind(n) == "thread" and int(t.tree.parent[n]) in t.steps]
    assert not groups
