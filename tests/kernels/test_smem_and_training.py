"""Issue 33 on the CPU: every tile config fits the device's shared memory for its dtype, and the
trainable packed parameter trains with no weight copies, against float64 references written here.

The shared-memory arithmetic is checked against the one independent number we have: the H100's
own OutOfResources for the bench's fp32 pointer config ("Required: 294912, Hardware limit:
232448", ../shared/gpu-runs/2026-12-05-h100/bench_crash.log) and the per-architecture limits of
the CUDA programming guide. The training path runs the real kernels under TRITON_INTERPRET=1.
"""
from __future__ import annotations

import gzip
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tracetui.kernels.fused import PATHS, PackedGeGLU  # noqa: E402
from tracetui.kernels import op as op_mod  # noqa: E402
from tracetui.kernels.gate_up import GateUpProj  # noqa: E402
from tracetui.kernels.geglu_gemm import (SMEM_LIMITS, TMA_CONFIG, _autotuned, configs_that_fit,  # noqa: E402
                                         fit_config, smem_bytes)

LIMITS = {"sm_90": 232448, "sm_86": 101376, "sm_80": 166912}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BENCH_PTR = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8)  # bench.PTR_CONFIG
C, A = math.sqrt(2 / math.pi), 0.044715


def need(cfg, es, epilogue=False):
    """Written here from the definition: stages x (A BMxBK + B BKx2BN) x bytes (+ BMxBN out tile)."""
    s = cfg.get("num_stages", 3)
    return s * (cfg["BLOCK_M"] * cfg["BLOCK_K"] + cfg["BLOCK_K"] * 2 * cfg["BLOCK_N"]) * es + \
        (cfg["BLOCK_M"] * cfg["BLOCK_N"] * es if epilogue else 0)


def test_smem_bytes_reproduces_the_h100_crash():
    assert smem_bytes(BENCH_PTR, 4) == 294912  # the H100's "Required: 294912" for fp32
    assert smem_bytes(BENCH_PTR, 2) == 294912 // 2 <= LIMITS["sm_90"]  # why bf16 ran
    assert smem_bytes(BENCH_PTR, 4) > LIMITS["sm_90"]
    assert SMEM_LIMITS[(9, 0)] == LIMITS["sm_90"] and SMEM_LIMITS[(8, 6)] == LIMITS["sm_86"]
    assert SMEM_LIMITS[(8, 0)] == LIMITS["sm_80"]
    for cfg in (BENCH_PTR, TMA_CONFIG, dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=16)):
        for es in (2, 4):
            assert smem_bytes(cfg, es) == need(cfg, es)
            assert smem_bytes(cfg, es, epilogue=True) == need(cfg, es, True)


@pytest.mark.parametrize("arch", sorted(LIMITS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_path_picks_configs_that_fit(arch, dtype):
    """On each device, for each dtype: the TMA config, the bench's pinned pointer config and the
    autotuner's pruned list all fit; a config that already fits is left alone."""
    limit, es = LIMITS[arch], torch.empty((), dtype=dtype).element_size()
    for cfg, epi in ((TMA_CONFIG, True), (BENCH_PTR, False)):
        got = fit_config(cfg, es, limit, epilogue=epi)
        assert need(got, es, epi) <= limit
        assert got["num_stages"] >= 2 and all(got[b] >= 16 for b in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        if need(cfg, es, epi) <= limit:
            assert got == {**cfg, "num_stages": cfg.get("num_stages", 3)}
    kept = configs_that_fit(_autotuned.configs, es, limit)
    assert kept and all(need({**c.kwargs, "num_stages": c.num_stages}, es) <= limit for c in kept)
    every = [c for c in _autotuned.configs if need({**c.kwargs, "num_stages": c.num_stages}, es) <= limit]
    assert len(kept) == max(1, len(every))
    # the plans themselves, on every path, with the device's limit set as a GPU would set it
    wg, wu = torch.randn(40, 24).to(dtype), torch.randn(40, 24).to(dtype)
    for path in PATHS:
        for config in (None, BENCH_PTR):
            p = PackedGeGLU(wg, wu, path=path, config=config)
            p.smem_limit = limit
            plan = p.plan(4096, dtype, True, True)
            if plan.config is not None:
                assert plan.smem == need(plan.config, es, path == "tma") <= limit, (path, config)


def test_fp32_pointer_config_on_the_h100_limit_is_what_would_have_run():
    got = fit_config(BENCH_PTR, 4, LIMITS["sm_90"])
    assert got["num_stages"] == 2 and got["BLOCK_K"] == 64 and need(got, 4) == 196608


# --- training through the packed parameter ------------------------------------------------

def gelu64(g):
    return 0.5 * g * (1 + torch.tanh(C * (g + A * g ** 3)))


def dgelu64(g):
    t = torch.tanh(C * (g + A * g ** 3))
    return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * C * (1 + 3 * A * g * g)


def rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def reference(x, w, dh):
    """float64 forward and gradients of gelu(x @ w[0::2].T) * (x @ w[1::2].T) from the formulas."""
    x, w, dh = x.double().reshape(-1, x.shape[-1]), w.double(), dh.double().reshape(-1, w.shape[0] // 2)
    g, u = x @ w[0::2].T, x @ w[1::2].T
    dg, du = dh * u * dgelu64(g), dh * gelu64(g)
    dw = torch.empty_like(w)
    dw[0::2], dw[1::2] = dg.T @ x, du.T @ x
    return gelu64(g) * u, dg @ w[0::2] + du @ w[1::2], dw


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m", [1, 37, 64])
def test_packed_parameter_forward_and_grads_match_float64(path, m):
    torch.manual_seed(m)
    mod = GateUpProj(24, 40, path=path)
    x = torch.randn(m, 24, requires_grad=True)
    h = mod(x)
    dh = torch.randn_like(h)
    h.backward(dh)
    want_h, want_dx, want_dw = reference(x.detach(), mod.weight.detach(), dh)
    assert rel(h.detach(), want_h) <= 1e-5
    assert rel(x.grad, want_dx) <= 1e-5 and rel(mod.weight.grad, want_dw) <= 1e-5
    (plan,) = mod.plans().plans.values()
    assert plan.path == path and mod.plans().packs == 0


def test_packed_parameter_bf16_batched_dispatch():
    """bf16, a 3-D input that wants no gradient (data), the rule table's own path."""
    torch.manual_seed(0)
    mod = GateUpProj(24, 40).to(torch.bfloat16)
    x = torch.randn(2, 9, 24).to(torch.bfloat16)
    h = mod(x)
    assert h.shape == (2, 9, 40)
    dh = torch.randn_like(h)
    h.backward(dh)
    want_h, _, want_dw = reference(x, mod.weight.detach(), dh)
    assert x.grad is None and rel(h.detach().reshape(-1, 40), want_h) <= 1e-2
    assert rel(mod.weight.grad, want_dw) <= 2e-2


def test_gradient_lands_in_place(monkeypatch):
    """The backward's dW is the parameter's .grad itself: AccumulateGrad took it, copied nothing."""
    seen = []
    orig = op_mod._backward_impl

    def spy(*args):
        out = orig(*args)
        seen.append(out[1].data_ptr())
        return out
    monkeypatch.setattr(op_mod, "_backward_impl", spy)  # the plain eager path (no profiler, no compile)
    mod = GateUpProj(24, 40)
    mod(torch.randn(5, 24)).square().sum().backward()
    assert seen == [mod.weight.grad.data_ptr()]
    assert mod.weight.grad.shape == mod.weight.shape and mod.weight.grad.is_contiguous()


def test_optimizer_step_before_backward_is_caught():
    mod = GateUpProj(24, 40)
    h = mod(torch.randn(5, 24, requires_grad=True))
    with torch.no_grad():
        mod.weight.add_(1.0)
    with pytest.raises(RuntimeError, match="inplace"):
        h.sum().backward()


def test_views_follow_the_parameter():
    mod = GateUpProj(8, 6)
    with torch.no_grad():
        mod.weight.copy_(torch.arange(12 * 8, dtype=torch.float32).reshape(12, 8))
    assert mod.gate.data_ptr() == mod.weight.data_ptr() and torch.equal(mod.gate[1], mod.weight[2])
    assert torch.equal(mod.up[0], mod.weight[1])


# --- the recorded training step: no weight copies, read from the raw trace -------------------

def contained(events, outer):
    end = outer["ts"] + outer["dur"]
    return [e for e in events if e.get("tid") == outer.get("tid") and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]


def weight_copies(doc, hidden, dim):
    """aten::copy_/clone of a weight-shaped tensor inside the GeGLU module's scope, and any copy
    inside an AccumulateGrad: (module copies, AccumulateGrad copies), straight from the JSON."""
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    shapes = ([hidden, dim], [dim, hidden], [2 * hidden, dim], [dim, 2 * hidden])
    mods = [e for e in ev if e.get("name", "").startswith("nn.Module: GeGLU")]
    acc = [e for e in ops if e["name"] == "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
    assert mods and acc, "the recording has no GeGLU scope or no AccumulateGrad: nothing would be checked"
    in_mod = [e for m in mods for e in contained(ops, m) if e["name"] in ("aten::copy_", "aten::clone")
              and any(d in shapes for d in e.get("args", {}).get("Input Dims", []))]
    in_acc = [e for a in acc for e in contained(ops, a) if e["name"] in ("aten::copy_", "aten::clone")]
    return in_mod, in_acc


def test_recorded_fused_train_step_copies_no_weights(tmp_path):
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    ws = workloads(train_mlp=True, batch=2, seq=4, dim=24, hidden=40)
    out = record(ws["mlp"], "fused", tmp_path / "mlp_train_fused.json.gz", device="cpu", warmup_iters=1,
                 active=2, save_key_averages=False, with_stack=True)
    doc = json.loads(gzip.decompress(out.read_bytes()))
    names = [e.get("name", "") for e in doc["traceEvents"]]
    assert sum(n == "tracetui::geglu_mlp" for n in names) == 2  # the fused path really ran, twice
    in_mod, in_acc = weight_copies(doc, 40, 24)
    assert in_mod == [] and in_acc == []


def test_the_copy_check_sees_the_old_per_step_repack(tmp_path):
    """The same check on the separate-weights path (re-packs after every optimizer step, strided
    weight gradients) finds the copies: the check above has teeth."""
    from torch.profiler import ProfilerActivity, profile
    from tracetui.kernels.fused import fused_geglu
    from torch import nn

    class GeGLU(nn.Module):  # named like the bundled one, so the scope check applies
        def __init__(self):
            super().__init__()
            self.gate, self.up = nn.Linear(24, 40, bias=False), nn.Linear(24, 40, bias=False)
            self.packed = None

        def forward(self, x):
            if self.packed is None:
                self.packed = PackedGeGLU(self.gate.weight, self.up.weight)
            return fused_geglu(x, self.gate.weight, self.up.weight, self.packed)
    mod = GeGLU()
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-3)
    x = torch.randn(8, 24)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            mod(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    path = tmp_path / "legacy.json"
    prof.export_chrome_trace(str(path))
    in_mod, in_acc = weight_copies(json.loads(path.read_text()), 40, 24)
    assert in_mod and in_acc
