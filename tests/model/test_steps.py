"""Step markers (ProfilerStep, numbered record_function, --steps) and the per-step breakdown on a
trace shaped like training: forward on the main thread, backward on the autograd thread, two
streams, the GPU running behind the host. Expected figures are computed here from the events."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracetui.model import load_trace
from tracetui.model.windows import runtime_role

from tests.model.test_windows import raw, reference, union

PID, MAIN, BWD = 100, 100, 200


def _x(cat, name, tid, ts, dur, pid=PID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def training_trace(marker="train_step_{}", steps=4, lag_us=0.0) -> dict:
    """``steps`` steps of 1000 µs: forward launches 2 kernels on stream 7 from the main thread,
    backward 3 kernels on stream 7 and one on stream 13 from the autograd thread, a sync at the end.
    ``lag_us`` delays every kernel (the GPU behind the host)."""
    ev = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": BWD, "args": {"name": "pt_autograd_0"}}]
    corr = ext = 0
    for i in range(steps):
        t0 = 10_000.0 + 1000.0 * i
        ev.append(_x("user_annotation", marker.format(i), MAIN, t0, 990.0, **{"External id": (ext := ext + 1)}))
        launches = [(MAIN, t0 + 10 + 50 * k, 7) for k in range(2)] + \
                   [(BWD, t0 + 400 + 60 * k, 7) for k in range(3)] + [(BWD, t0 + 600, 13)]
        for tid, ts, stream in launches:
            ext += 1
            corr += 1
            ev.append(_x("cpu_op", "aten::mm", tid, ts - 2, 20.0, **{"External id": ext}))
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", tid, ts, 5.0, correlation=corr, **{"External id": ext}))
            ev.append(_x("kernel", "ampere_sgemm_128x64_tn", 0, ts + 8 + lag_us, 30.0, correlation=corr,
                         stream=stream, device=0, **{"External id": ext}))
        ev.append(_x("cuda_runtime", "cudaDeviceSynchronize", MAIN, t0 + 900, 80.0, correlation=(corr := corr + 1)))
    # a numbered, non-step annotation family that must not be taken for steps
    for i in range(steps * 2):
        ev.append(_x("user_annotation", f"Torch-Compiled Region: {i}/0", MAIN, 10_000.0 + 500 * i + 100, 5.0))
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "Test GPU"}]}


def _write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_numbered_record_function_steps_are_detected(tmp_path):
    p = _write(tmp_path, training_trace())
    t = load_trace(p)
    assert [t.name(s) for s in t.steps] == [f"train_step_{i}" for i in range(4)]
    assert t.step_choice.rule == "numbered annotation" and "train_step_N" in t.step_choice.description
    for s in t.steps:
        b = t.step_breakdown(s)
        assert b["kernels"] == 6          # 2 forward + 4 backward, both threads, both streams
        assert b["threads"] == 2
        assert b["launches"] == 6 and b["syncs"] == 1
        assert b["launch_cpu_ns"] == 6 * 5_000 and b["sync_cpu_ns"] == 80_000


def test_steps_regex_names_the_marker(tmp_path):
    p = _write(tmp_path, training_trace(marker="iter-{}"))
    assert load_trace(p).step_choice.rule == "numbered annotation"  # "iter" is step-like
    t = load_trace(p, steps=r"^Torch-Compiled Region")
    assert t.step_choice.rule == "--steps" and t.n_steps == 8
    out = subprocess.run([sys.executable, "-m", "tracetui", "summary", "--json", "--steps", r"^iter-\d+$", str(p)],
                         capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    assert d["steps"] == 4 and d["step_marker"]["rule"] == "--steps"
    assert [s["kernels"] for s in d["per_step"]] == [6] * 4
    bad = subprocess.run([sys.executable, "-m", "tracetui", "summary", "--steps", "(", str(p)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--steps" in bad.stderr


def test_no_markers_says_so(tmp_path):
    doc = training_trace(marker="fwd_{}")  # numbered, but nothing says "step"
    t = load_trace(_write(tmp_path, doc))
    assert t.n_steps == 0 and t.step_choice.rule == "none"
    out = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(_write(tmp_path, doc, "u.json"))],
                         capture_output=True, text=True, check=True).stdout
    assert "no step markers" in out


def test_breakdown_when_the_gpu_runs_behind(tmp_path):
    """Kernels delayed past the step's end: busy stays the step's own work, idle never exceeds the
    window, and the next step's window sees the queue as other steps' work, not idle."""
    doc = training_trace(marker="ProfilerStep#{}", lag_us=700.0)
    t = load_trace(_write(tmp_path, doc))
    ref = reference(raw(tmp_path / "t.json"))
    assert len(ref) == t.n_steps == 4
    for s, r in zip(t.steps, ref):
        b = t.step_breakdown(s)
        assert b["busy_ns"] == r["busy"] and b["kernels"] == r["kernels"] == 6
        assert b["window_ns"] > b["cpu_ns"]              # ends with its last kernel, after the host
        assert b["busy_ns"] + b["other_steps_ns"] + b["idle_ns"] == b["window_ns"]
        assert 0 <= b["idle_ns"] <= b["window_ns"]
    later = [t.step_breakdown(s)["other_steps_ns"] for s in t.steps[1:]]
    assert all(x > 0 for x in later)


def test_idle_split_by_hand(tmp_path):
    """One step, one stream: kernel A 0-10 µs, B enqueued early but starts 2 µs after A (kernel
    wait), C launched 50 µs after B ended (host wait), D enqueued early but waits 20 µs (other)."""
    ev = [_x("user_annotation", "ProfilerStep#0", MAIN, 0.0, 300.0)]
    spec = [  # (launch ts, kernel start, kernel dur)
        (0.0, 5.0, 10.0),      # A: 5-15
        (1.0, 17.0, 10.0),     # B: 17-27, enqueued at 1+1=2 <= 15: 2 µs kernel wait
        (77.0, 80.0, 10.0),    # C: launched at 77 > 27: 53 µs host wait
        (81.0, 110.0, 10.0),   # D: enqueued at 82 <= 90: a 20 µs gap -> other
    ]
    for k, (lts, kts, kd) in enumerate(spec, start=1):
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", MAIN, lts, 1.0, correlation=k))
        ev.append(_x("kernel", f"k{k}", 0, kts, kd, correlation=k, stream=7, device=0))
    t = load_trace(_write(tmp_path, {"traceEvents": ev}))
    b = t.step_breakdown(t.steps[0])
    assert b["window_ns"] == 300_000 and b["busy_ns"] == 40_000
    sp = b["idle_split_ns"]
    # leading 5 µs (enqueued at 1 > 0: host wait) + 53 + trailing 180 µs after D
    assert sp == {"host_wait": 5_000 + 53_000 + 180_000, "kernel_wait": 2_000, "other": 20_000}


@pytest.mark.parametrize("name, role", [
    ("cudaLaunchKernel", "launch"), ("cuLaunchKernelEx", "launch"), ("hipExtModuleLaunchKernel", "launch"),
    ("cudaGraphLaunch", "launch"), ("cudaMemcpyAsync", "launch"), ("hipMemsetAsync", "launch"),
    ("cudaDeviceSynchronize", "sync"), ("hipDeviceSynchronize", "sync"), ("cudaStreamSynchronize", "sync"),
    ("cudaEventSynchronize", "sync"), ("cudaMemcpy", "sync"), ("cudaMalloc", "alloc"), ("cudaFree", "alloc"),
    ("cudaStreamWaitEvent", "other"), ("cudaEventRecord", "other"), ("cudaGetDevice", "other"),
])
def test_runtime_roles(name, role):
    assert runtime_role(name) == role


def test_torch_record_function_steps(tmp_path):
    """A real CPU training loop marked with record_function(f"train_step_{i}"), no prof.step():
    six steps, each holding its own forward, backward and optimizer ops (CPU autograd runs backward
    on the calling thread; the autograd-thread shape is covered above and by the peer traces)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(6):
            with record_function(f"train_step_{i}"):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    path = tmp_path / "rf.json"
    prof.export_chrome_trace(str(path))
    doc = raw(path)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    marks = sorted((e for e in xs if str(e.get("name", "")).startswith("train_step_")), key=lambda e: e["ts"])
    t = load_trace(path)
    assert [t.name(s) for s in t.steps] == [e["name"] for e in marks] and t.step_choice.rule == "numbered annotation"
    out = json.loads(subprocess.run([sys.executable, "-m", "tracetui", "summary", "--json", str(path)],
                                    capture_output=True, text=True, check=True).stdout)
    assert out["steps"] == 6 and out["step_marker"]["rule"] == "numbered annotation"
    for s, m in zip(t.steps, marks):
        inside = [e for e in xs if e.get("cat") == "cpu_op" and m["ts"] <= e["ts"] < m["ts"] + m["dur"]]
        assert any("Backward" in e["name"] for e in inside) and any("sgd" in e["name"].lower() or "add_" in e["name"]
                                                                     for e in inside)
        w = t.step_window(s)
        assert w.start == int(round(float(m["ts"]) * 1000))
