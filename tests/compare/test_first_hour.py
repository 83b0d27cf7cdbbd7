"""What a new user met diffing CPU-only traces recorded without a profiler schedule (issue:
a new user's first hour). ``torch.profiler.profile`` without ``schedule=`` writes no
``ProfilerStep#N``, so such traces have no step markers; the diff then has no host time per step.

The traces are written here as torch 2.13 writes a CPU run (``cpu_op`` / ``user_annotation``
complete events, µs floats, a backward thread), and each figure is checked against the raw JSON.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracetui.cli.main import main

PID, MAIN, BWD = 4242, 4242, 4300


def _write(path: Path, step_us: float, mm_us: float, steps: int = 3) -> dict:
    """``steps`` iterations marked by a plain ``train_step`` annotation (not a step marker): a
    forward ``aten::addmm`` on the main thread, a backward ``aten::mm`` on autograd's thread."""
    ev = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": PID, "tid": BWD, "args": {"name": "pt_autograd_0"}}]

    def x(cat, name, tid, ts, dur):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": float(ts),
                   "dur": float(dur), "args": {"External id": len(ev)}})

    for k in range(steps):
        t = 1000.0 + k * (step_us + 50)
        x("user_annotation", "train_step", MAIN, t, step_us)
        x("cpu_op", "aten::linear", MAIN, t + 5, 60)
        x("cpu_op", "aten::addmm", MAIN, t + 10, 50)
        x("cpu_op", "aten::relu", MAIN, t + 70, 20)
        x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", BWD, t + 100, mm_us + 20)
        x("cpu_op", "AddmmBackward0", BWD, t + 105, mm_us + 10)
        x("cpu_op", "aten::mm", BWD, t + 110, mm_us)
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        rc = main(["diff", *argv])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def pair(tmp_path):
    """B's steps take twice A's host time; the compute ops are the same."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    da, db = _write(a, step_us=400, mm_us=100), _write(b, step_us=800, mm_us=100)
    return a, b, da, db


def _annotation_us(doc: dict) -> float:
    return sum(e["dur"] for e in doc["traceEvents"] if e.get("name") == "train_step")


@pytest.mark.parametrize("on", ["cpu", "wall"])
def test_a_host_time_gate_without_step_markers_cannot_pass(capsys, pair, on):
    """``--gate-on cpu|wall`` compared 0.0 with 0.0 and passed (exit 0) when neither trace had step
    markers, however much slower B's host was. It cannot judge: exit 3, saying why."""
    a, b, da, db = pair
    assert _annotation_us(db) == 2 * _annotation_us(da)  # B's host really is twice as slow
    assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in da["traceEvents"] + db["traceEvents"])
    rc, out, err = _run(capsys, str(a), str(b), "--json", "--gate", "5", "--gate-on", on)
    g = json.loads(out)["gate"]
    assert rc == 3 and g["exit_code"] == 3 and g["passed"] is False
    assert "step markers" in g["reason"] and "--steps" in g["reason"]
    assert "gate FAILED (exit 3)" in err


def test_the_same_gate_judges_once_steps_are_named(capsys, pair):
    """With ``--steps`` naming the annotation, the host figure exists and the gate fails B by the
    raw annotations' ratio (+100%)."""
    a, b, da, db = pair
    rc, out, _ = _run(capsys, str(a), str(b), "--json", "--gate", "5", "--gate-on", "cpu", "--steps", "^train_step$")
    g = json.loads(out)["gate"]
    n = 3
    assert g["a"] == pytest.approx(_annotation_us(da) / n) and g["b"] == pytest.approx(_annotation_us(db) / n)
    assert rc == 1 and g["change_pct"] == pytest.approx(100.0)


def test_the_report_does_not_claim_zero_host_time_without_step_markers(capsys, pair):
    """The text report said "host time 0.0 → 0.0 µs (the step markers' wall time)" for traces
    whose train_step annotations hold 1.2 and 2.4 ms of host time: it says there is no figure."""
    a, b, _, _ = pair
    rc, out, _ = _run(capsys, str(a), str(b), "--text")
    assert rc == 0
    line = next(x for x in out.splitlines() if x.startswith("per step"))
    assert "host time 0.0" not in line
    assert "host time -" in line and "no step markers" in line


def _write_stepped(path: Path, compiled: bool, kernel_profile: bool = False, steps: int = 2) -> dict:
    """CPU train steps under ``ProfilerStep#N``, eager or as torch.compile runs them on CPU: eager
    runs ``aten::native_layer_norm`` and ``aten::relu``; compiled runs one Inductor graph whose
    generated C++ kernel is recorded as an op only with ``cpp.enable_kernel_profile`` (else its
    time is the self time of the ``## Call CompiledFxGraph <hash> ##`` annotation)."""
    ev = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN, "args": {"name": "python"}}]

    def x(cat, name, ts, dur):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": MAIN, "ts": float(ts),
                   "dur": float(dur), "args": {"External id": len(ev)}})

    for k in range(steps):
        t = 1000.0 + k * 2000
        x("user_annotation", f"ProfilerStep#{k}", t, 1500)
        x("cpu_op", "aten::addmm", t + 10, 100)
        if compiled:
            x("cpu_op", "Torch-Compiled Region: 0/0", t + 200, 900)
            x("user_annotation", "## Call CompiledFxGraph fvbgqghhit5grkrn6w3m3xep7shes64jmx7lkxiukouze ##", t + 210, 800)
            x("cpu_op", "aten::mm", t + 220, 50)
            if kernel_profile:
                x("cpu_op", "graph_0_cpp_fused_native_layer_norm_relu_0", t + 300, 600)
        else:
            x("cpu_op", "aten::native_layer_norm", t + 200, 300)
            x("cpu_op", "aten::relu", t + 520, 200)
            x("cpu_op", "aten::mm", t + 740, 50)
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}))
    return {"traceEvents": ev}


def _graph_self_us_per_step(doc: dict) -> float:
    """The graph calls' self time per step from the raw events: duration less the ops inside."""
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    calls = [e for e in ev if e["name"].startswith("## Call CompiledFxGraph")]
    steps = sum(1 for e in ev if e["name"].startswith("ProfilerStep#"))
    own = 0.0
    for c in calls:
        inside = [e for e in ev if e is not c and c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"]]
        own += c["dur"] - sum(e["dur"] for e in inside)
    return own / steps


def test_a_cpu_compile_headline_says_its_kernels_are_not_in_compute_ops(tmp_path, capsys):
    """torch.compile on CPU without ``cpp.enable_kernel_profile`` records no op for Inductor's C++
    kernels: the headline's "compute ops" dropped them and called B 39.9% faster on a real pair
    whose host step was 17% faster. The headline now says B's graphs hide kernel time, and how much."""
    a, b = tmp_path / "eager.json", tmp_path / "compiled.json"
    _write_stepped(a, compiled=False)
    db = _write_stepped(b, compiled=True)
    rc, out, _ = _run(capsys, str(a), str(b), "--json")
    v = json.loads(out)["verdict"]
    hidden = _graph_self_us_per_step(db)
    assert hidden == pytest.approx(750.0)
    assert v["unrecorded_inductor"] == {"b": pytest.approx(hidden)}
    assert "B's Inductor C++ kernels are not ops" in v["line"] and f"{hidden:,.1f} µs" in v["line"]
    assert "enable_kernel_profile" in v["line"]


def test_no_such_caveat_when_the_kernels_are_recorded(tmp_path, capsys):
    """With ``cpp.enable_kernel_profile`` the kernels are ops the compute figure counts: no caveat."""
    a, b = tmp_path / "eager.json", tmp_path / "compiled.json"
    _write_stepped(a, compiled=False)
    _write_stepped(b, compiled=True, kernel_profile=True)
    rc, out, _ = _run(capsys, str(a), str(b), "--json")
    v = json.loads(out)["verdict"]
    assert rc == 0 and not v["unrecorded_inductor"] and "not ops" not in v["line"]


def test_the_header_says_a_stepless_trace_counts_whole_and_cpu_ops_launch_nothing(capsys, pair):
    """"per step: … kernels 21 → 21 (launches saved 0)" on two CPU traces of 3 unmarked iterations:
    the figures are the whole trace's (3 iterations), and CPU ops launch nothing."""
    a, b, da, _ = pair
    rc, out, _ = _run(capsys, str(a), str(b), "--text")
    line = next(x for x in out.splitlines() if x.startswith("per step"))
    assert "without step markers counts whole" in line and "launches saved" not in line
    # the compute-op count is the whole trace's: every leaf op of the raw JSON (3 iterations)
    parents = {"aten::linear", "autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0"}
    leaves = [e for e in da["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] not in parents]
    assert f"compute ops {len(leaves)} → {len(leaves)}" in line


def test_a_ladder_of_stepless_traces_shows_no_host_time_it_does_not_have(tmp_path, capsys):
    """The ladder said "CPU µs 0.0" per rung and "host time +0.0 µs" between rungs whose host
    time doubled (train_step annotations of 1.2, 2.4 and 3.6 ms, no step markers)."""
    paths, docs = [], []
    for k, step_us in enumerate((400, 800, 1200)):
        p = tmp_path / f"r{k}.json"
        docs.append(_write(p, step_us=step_us, mm_us=100))
        paths.append(str(p))
    assert [_annotation_us(d) for d in docs] == [1200.0, 2400.0, 3600.0]
    rc, out, _ = _run(capsys, *paths, "--text")
    assert rc == 0
    lines = out.splitlines()
    rungs = [x for x in lines if x.strip().endswith(".json") and x.startswith("  r")]
    assert len(rungs) == 3 and all(x.split()[-2] == "-" for x in rungs)  # the CPU µs column
    between = [x for x in lines if " → " in x and "host time" in x]
    assert len(between) == 2 and all("host time -" in x and "+0.0" not in x.split("host time")[1] for x in between)
