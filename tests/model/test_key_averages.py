"""Our numbers against torch.profiler's own key_averages() on the same run: counts exact, times 1%."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracetui.model import load_trace
from tracetui.read.events import GPU_KINDS, K
from tracetui.model.stats import aggregate, rollups
from tracetui.model.trace import OP_KINDS
from tracetui.workloads.record import key_averages_path, read_key_averages

from tests.conftest import DATA, TRACES

# Known gap, kept visible (strict: passes once the model nests Kineto's `overhead` events): without
# a schedule, Kineto's "Activity Buffer Request" events (cat overhead, tid 0) fall inside the first
# step. key_averages() nests them under the host op they overlap (train_step_0, aten::arange) and
# lists them as a row; the model drops them, so those self times and that row differ.
OVERHEAD_GAP = {"transformer_eager_rf.json.gz"}
# Known difference, kept visible (strict), where key_averages() is the one that is off: with the
# step's backward replayed as a CUDA graph, it credits the second replay's 4 kernels (270.0 us,
# External id 571, launched by GraphedBackward on the autograd thread) to the main thread's
# cudaDeviceSynchronize whose *correlation* id is 571, so ProfilerStep* reads 1,310.5 us against
# ours 1,040.5 and cudaDeviceSynchronize 270.0 against 0. Every other row matches.
GRAPHS_GAP = {"h200_mlp_train_fused_graphs_op.json.gz"}
GPU_TRACES = [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="Kineto overhead events not nested"))
              if p.name in OVERHEAD_GAP else
              pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="key_averages() credits a graph replay to a sync by a colliding id"))
              if p.name in GRAPHS_GAP else p
              for p in sorted(TRACES.glob("*.json.gz")) + sorted(DATA.glob("h200_*.json.gz"))]
CPU_DATA = sorted(DATA.glob("cpu_*.json.gz"))


def _close(ours: float, theirs: float) -> bool:
    # 1% relative, with 0.01 µs of slack for rounding of tiny values (the file has ns precision)
    return abs(ours - theirs) <= max(0.01 * abs(theirs), 0.011)


def check_against_key_averages(trace_path: Path, device: bool) -> int:
    ref, _ = read_key_averages(key_averages_path(trace_path))
    t = load_trace(trace_path)
    # key_averages() leaves GPU time launched outside any op unattributed; compare in that mode
    # torch 2.13 puts Python frames in key_averages() and in its tree; 2.11 leaves them out
    frames = any(t.tree.kind[a.nodes[0]] in (K["python"], K["module"]) for a in t.op_table
                 if a.name in {r["name"] for r in ref})
    compat = rollups(t.tree, torch_compat=True, python_owns_time=frames)
    ops = {a.name: a for a in aggregate(t.tree, compat, OP_KINDS)}
    kernels = {a.name: a for a in aggregate(t.tree, compat, GPU_KINDS)}
    checked = 0
    for row in ref:
        if not row["cpu_total_us"] and row["name"] not in kernels and row["name"] in ops:
            # the GPU-side twin of an annotation (gpu_user_annotation): counted as skipped, not dropped
            assert t.tree.diagnostics["skipped_categories"].get("gpu_user_annotation"), row["name"]
            continue
        a = ops.get(row["name"]) if row["cpu_total_us"] else kernels.get(row["name"], ops.get(row["name"]))
        assert a is not None, f"{row['name']!r} from key_averages() missing in {trace_path.name}"
        assert a.count == row["count"], f"{row['name']}: count {a.count} != {row['count']}"
        if row["cpu_total_us"]:
            assert _close(a.cpu_total_us, row["cpu_total_us"]), (row["name"], a.cpu_total_us, row["cpu_total_us"])
            assert _close(a.cpu_self_us, row["cpu_self_us"]), (row["name"], a.cpu_self_us, row["cpu_self_us"])
        if device:
            assert _close(a.device_total_us, row["device_total_us"]), (row["name"], a.device_total_us,
                                                                     row["device_total_us"])
        checked += 1
    return checked


@pytest.mark.parametrize("name", ["linear_eager", "mlp_eager", "mlp_eager_stack", "mlp_compile_stack"])
def test_cpu_recordings_match_key_averages(cpu_traces, name):
    assert check_against_key_averages(cpu_traces[name], device=False) > 5


@pytest.mark.parametrize("path", CPU_DATA, ids=lambda p: p.name)
def test_bundled_cpu_training_recordings_match_key_averages(path):
    """torch 2.13 CPU train steps with stacks, backward on a second thread (tests/data/README.md)."""
    assert check_against_key_averages(path, device=False) > 100


@pytest.mark.parametrize("path", GPU_TRACES, ids=lambda p: p.name)
def test_h200_recordings_match_key_averages(path):
    if not key_averages_path(path).exists():
        pytest.skip("no key_averages sidecar")
    assert check_against_key_averages(path, device=True) > 5


def test_user_triton_kernel_counts_for_its_scope():
    """The one place we differ from key_averages(): an op-less kernel still counts for its step."""
    t = load_trace(TRACES / "mlp_fused.json.gz")
    compat = rollups(t.tree, torch_compat=True)
    fused = [a for a in t.kernel_table if a.name == "geglu_dual_gemm_tma_kernel"]
    assert fused and all(t.launching_op(int(n)) is None for n in fused[0].nodes)
    for s in t.steps:
        extra = sum(int(t.tree.dur[n]) for n in fused[0].nodes if t.roll.step_of[n] == s)
        assert extra > 0
        assert t.roll.device[s] - compat.device[s] == extra
