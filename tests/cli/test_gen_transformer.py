"""`tracetui gen transformer` on the CPU: a real training step, checked straight from the raw JSON."""
from __future__ import annotations

import gzip
import json

import pytest

from tracetui.cli.main import main

TINY = ["--device", "cpu", "--layers", "2", "--dim", "32", "--heads", "2", "--seq", "16", "--batch", "2",
        "--vocab", "64", "--active", "2"]


def _gen(tmp_path, name, *extra) -> dict:
    pytest.importorskip("torch")
    out = tmp_path / f"{name}.json.gz"
    assert main(["gen", "transformer", *TINY, *extra, "-o", str(out)]) == 0
    return json.loads(gzip.decompress(out.read_bytes()))


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def test_train_step_threads_optimizer_and_blocks(tmp_path):
    doc = _gen(tmp_path, "eager", "--backward-thread")
    ev = _complete(doc)
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 2
    main_tid = {e["tid"] for e in steps}
    assert len(main_tid) == 1
    fwd = [e for e in ev if e["name"] == "aten::embedding"]
    assert fwd and {e["tid"] for e in fwd} == main_tid  # the forward runs on the stepping thread
    bwd = [e for e in ev if e["name"].startswith("autograd::engine::evaluate_function: ")]
    assert bwd and not ({e["tid"] for e in bwd} & main_tid)  # backward: another thread
    names = {e["name"].split(": ", 1)[1] for e in bwd}
    assert {"EmbeddingBackward0", "NllLossBackward0"} <= names
    # every backward op starts inside a step window although no step event is on its thread
    assert all(any(s["ts"] <= b["ts"] <= s["ts"] + s["dur"] for s in steps) for b in bwd)
    opt = [e for e in ev if e["name"] == "Optimizer.step#AdamW.step"]
    assert len(opt) == 2 and {e["tid"] for e in opt} == main_tid
    blocks = [e["name"] for e in ev if e["name"].startswith("nn.Module: Block_")]
    assert sorted(set(blocks)) == ["nn.Module: Block_0", "nn.Module: Block_1"]
    assert all(blocks.count(b) == 2 for b in set(blocks))  # once per step each
    prov = doc["tracetui"]
    assert prov["workload"] == "transformer" and prov["train"] and prov["backward_thread"]
    assert prov["sizes"]["layers"] == 2 and prov["step_marker"] == "profiler"


def test_record_function_steps_replace_profiler_steps(tmp_path):
    doc = _gen(tmp_path, "rf", "--step-marker", "record_function")
    ev = _complete(doc)
    assert not any("ProfilerStep" in e["name"] for e in doc["traceEvents"])
    marks = sorted(e["name"] for e in ev if e["name"].startswith("train_step_") and e.get("cat") == "user_annotation")
    assert marks == ["train_step_0", "train_step_1"]
    opt = [e for e in ev if e["name"] == "Optimizer.step#AdamW.step"]
    assert len(opt) == 2
    # without --backward-thread, CPU autograd runs backward on the calling thread
    bwd = [e for e in ev if e["name"].startswith("autograd::engine::evaluate_function: ")]
    assert bwd and {e["tid"] for e in bwd} == {e["tid"] for e in opt}
    assert doc["tracetui"]["step_marker"] == "record_function"


def test_memory_events(tmp_path):
    doc = _gen(tmp_path, "mem", "--memory")
    mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    assert mem and all({"Addr", "Bytes", "Total Allocated"} <= set(e["args"]) for e in mem)
    assert any(e["args"]["Bytes"] > 0 for e in mem) and any(e["args"]["Bytes"] < 0 for e in mem)
    assert doc["tracetui"]["profile_memory"] is True


@pytest.mark.parametrize("argv, message", [
    (["gen", "mlp", "--device", "cpu", "--backward-thread"], "runs no backward"),
    (["gen", "transformer", "--device", "cpu", "--mode", "max-autotune"], "needs --impl compile"),
    (["gen", "transformer", "--impl", "triton", "--device", "cpu"], "has no impl"),
])
def test_gen_rejects_bad_options(capsys, argv, message):
    pytest.importorskip("torch")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tracetui: error: ") and message in err[-1]
