"""The bundled training recordings hold what traces/README.md and tests/data/README.md say they do,
read straight from the raw JSON (so a re-recording that loses a property fails here first)."""
from __future__ import annotations

import gzip
import json
from functools import lru_cache

import pytest

from tests.conftest import DATA, TRACES

H200 = ["transformer_eager", "transformer_compile", "transformer_max_autotune", "transformer_eager_rf",
        "transformer_eager_memory"]
CPU = ["cpu_transformer_eager", "cpu_transformer_compile", "cpu_transformer_eager_rf",
       "cpu_transformer_eager_memory"]


@lru_cache(maxsize=None)
def _doc(name: str) -> dict:
    folder = DATA if name.startswith("cpu_") else TRACES
    return json.loads(gzip.decompress((folder / f"{name}.json.gz").read_bytes()))


def _x(name: str) -> list[dict]:
    return [e for e in _doc(name)["traceEvents"] if e.get("ph") == "X"]


def _steps(name: str) -> list[dict]:
    rf = _doc(name)["tracetui"]["step_marker"] == "record_function"
    prefix = "train_step_" if rf else "ProfilerStep#"
    return [e for e in _x(name) if e.get("cat") == "user_annotation" and e["name"].startswith(prefix)]


@pytest.mark.parametrize("name", H200 + CPU)
def test_train_steps_span_two_threads(name):
    ev = _x(name)
    steps = _steps(name)
    assert len(steps) == 3
    (main,) = {e["tid"] for e in steps}
    bwd = [e for e in ev if e["name"].startswith("autograd::engine::evaluate_function: ")]
    assert bwd and main not in {e["tid"] for e in bwd}
    assert all(any(s["ts"] <= b["ts"] <= s["ts"] + s["dur"] for s in steps) for b in bwd)
    opt = [e for e in ev if e["name"] == "Optimizer.step#AdamW.step" and e.get("cat") == "user_annotation"]
    assert len(opt) == 3 and {e["tid"] for e in opt} == {main}
    prov = _doc(name)["tracetui"]
    assert prov["workload"] == "transformer" and prov["train"] and prov["with_stack"]


@pytest.mark.parametrize("name", H200)
def test_h200_kernels_launched_from_both_threads(name):
    ev = _x(name)
    launch_tid = {e["args"]["correlation"]: e["tid"] for e in ev
                  if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    tids = {launch_tid.get(k["args"].get("correlation")) for k in kernels}
    assert len(tids - {None}) == 2
    prov = _doc(name)["tracetui"]
    assert prov["torch"].startswith("2.11") and prov["device_type"] == "cuda" and prov["sizes"]["layers"] == 6


@pytest.mark.parametrize("name", ["transformer_eager", "transformer_eager_rf", "transformer_eager_memory",
                                  "cpu_transformer_eager", "cpu_transformer_eager_rf",
                                  "cpu_transformer_eager_memory"])
def test_eager_blocks_once_per_step(name):
    layers = _doc(name)["tracetui"]["sizes"]["layers"]
    blocks = [e["name"] for e in _x(name) if e["name"].startswith("nn.Module: Block_")]
    assert sorted(set(blocks)) == [f"nn.Module: Block_{i}" for i in range(layers)]
    assert all(blocks.count(b) == 3 for b in set(blocks))


@pytest.mark.parametrize("name", ["transformer_eager_rf", "cpu_transformer_eager_rf"])
def test_record_function_variant_has_no_profiler_step(name):
    assert not any("ProfilerStep" in str(e.get("name")) for e in _doc(name)["traceEvents"])
    assert sorted(e["name"] for e in _steps(name)) == ["train_step_0", "train_step_1", "train_step_2"]


@pytest.mark.parametrize("name", ["transformer_eager_memory", "cpu_transformer_eager_memory"])
def test_memory_variant_has_alloc_and_free_events(name):
    mem = [e for e in _doc(name)["traceEvents"] if e.get("name") == "[memory]"]
    assert any(e["args"]["Bytes"] > 0 for e in mem) and any(e["args"]["Bytes"] < 0 for e in mem)
    assert _doc(name)["tracetui"]["profile_memory"] is True


@pytest.mark.parametrize("name", ["transformer_max_autotune", "mlp_max_autotune"])
def test_max_autotune_recordings_hold_template_gemms(name):
    doc = json.loads(gzip.decompress((TRACES / f"{name}.json.gz").read_bytes()))
    assert doc["tracetui"]["compile_mode"] == "max-autotune-no-cudagraphs"
    assert any(e.get("cat") == "kernel" and e["name"].startswith("triton_tem_") for e in doc["traceEvents"])


def test_cpu_compile_records_inductor_cpp_kernels():
    assert any(e["name"].startswith("graph_0_cpp_fused_") for e in _x("cpu_transformer_compile"))
