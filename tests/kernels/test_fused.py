"""The fused GeGLU launch path (prepared weights, plans, dispatch) and its training backward, on
the CPU through TRITON_INTERPRET=1 (set in conftest), against float64 references written here
from the formulas: gelu_tanh(g) = 0.5 g (1 + tanh(c (g + a g^3))), c = sqrt(2/pi), a = 0.044715.

The persistent TMA kernel (device-built descriptors) runs in the interpreter; what cannot run
here is Triton's scratch allocator on a GPU and a real Hopper capability check, so TMA
selection is tested by marking the prepared weights TMA-capable.
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tracetui.kernels.fused import (CUBLAS_MAX_M, DISPATCH_RULES, PATHS, POINTER_MAX_M, Case,  # noqa: E402
                                    PackedGeGLU, choose, fused_geglu, geglu_autograd)
from tracetui.kernels.geglu import geglu_backward, geglu_interleaved_backward  # noqa: E402

C, A = math.sqrt(2 / math.pi), 0.044715


def gelu64(g):
    return 0.5 * g * (1 + torch.tanh(C * (g + A * g ** 3)))


def dgelu64(g):
    t = torch.tanh(C * (g + A * g ** 3))
    return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * C * (1 + 3 * A * g * g)


def rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def weights(n, k, dtype=torch.float32):
    return ((torch.randn(n, k) / k ** 0.5).to(dtype), (torch.randn(n, k) / k ** 0.5).to(dtype))


def forward64(x, wg, wu):
    x, wg, wu = x.double().reshape(-1, x.shape[-1]), wg.double(), wu.double()
    return gelu64(x @ wg.T) * (x @ wu.T)


# --- dispatch table ----------------------------------------------------------------------------

def test_every_rule_has_a_reason_and_is_reached():
    cases = [Case(1, 3072, 768, torch.bfloat16, True), Case(8192, 3072, 768, torch.float32, True),
             Case(8192, 3072, 768, torch.bfloat16, False), Case(512, 2048, 768, torch.bfloat16, True),
             Case(8192, 3072, 768, torch.bfloat16, True)]
    hit = {id(choose(c)[1]) for c in cases}
    assert hit == {id(r) for r in DISPATCH_RULES}
    assert all(r.path in PATHS and len(r.reason) > 40 and r.when for r in DISPATCH_RULES)


@pytest.mark.parametrize("m,dtype,tma,want", [
    (1, torch.bfloat16, True, "cublas"), (CUBLAS_MAX_M, torch.bfloat16, True, "cublas"),
    (CUBLAS_MAX_M, torch.float32, False, "cublas"),
    (CUBLAS_MAX_M + 1, torch.bfloat16, True, "pointer"), (512, torch.bfloat16, True, "pointer"),
    (POINTER_MAX_M + 1, torch.bfloat16, True, "tma"),
    (2048, torch.float16, True, "tma"), (16384, torch.bfloat16, True, "tma"),
    (8192, torch.float32, True, "pointer"), (8192, torch.bfloat16, False, "pointer"),
    (512, torch.float16, False, "pointer"),
])
def test_dispatch_picks_the_path_its_rules_say(m, dtype, tma, want):
    """The table as documented: tiny M -> cuBLAS; fp32, no TMA or M up to the measured pointer
    threshold (512: H200 v7 run, pointer 23.0 us vs TMA 36.2) -> pointer; else TMA."""
    assert choose(Case(m, 3072, 768, dtype, tma))[0] == want


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prepared_weights_dispatch_and_each_path_matches_float64(dtype):
    """Shapes that are no multiple of any tile (K=24, N=40); TMA marked available as on Hopper."""
    wg, wu = weights(40, 24, dtype)
    p = PackedGeGLU(wg, wu)
    p.tma_capable = True
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    cases = {  # rows -> (x, path the rules give)
        "small": (torch.randn(5, 24, dtype=dtype), "cublas"),
        "mid": (torch.randn(CUBLAS_MAX_M + 7, 24, dtype=dtype), "pointer"),
        "big": (torch.randn(POINTER_MAX_M + 7, 24, dtype=dtype), "tma" if dtype != torch.float32 else "pointer"),
        "strided": (torch.randn(CUBLAS_MAX_M + 3, 48, dtype=dtype)[:, ::2], "pointer"),  # TMA needs unit stride
    }
    for name, (x, want) in cases.items():
        out = p(x)
        (plan,) = [pl for pl in p.plans.values() if pl.m == x.shape[0]]
        assert plan.path == want, name
        assert out.shape == (x.shape[0], 40)
        assert rel(out, forward64(x, wg, wu)) <= tol, name


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape", [(37, 24, 40), (1, 24, 40), (3, 7, 16, 24)])
def test_each_path_forward_and_saved_preactivations(path, shape):
    *lead, k, n = shape
    wg, wu = weights(n, k)
    x = torch.randn(*lead, k)
    p = PackedGeGLU(wg, wu, path=path)
    m = x.numel() // k
    pre = torch.full((m, 2 * n), float("nan"))
    out = torch.full((*lead, n), float("nan"))
    got = p(x, out=out, pre=pre)
    assert got.data_ptr() == out.data_ptr() and got.shape == (*lead, n)
    assert rel(out.reshape(m, n), forward64(x, wg, wu)) <= 1e-5
    x2 = x.double().reshape(m, k)
    assert rel(pre[:, 0::2], x2 @ wg.double().T) <= 1e-5
    assert rel(pre[:, 1::2], x2 @ wu.double().T) <= 1e-5


# --- caching -----------------------------------------------------------------------------------

def test_weights_packed_once_and_plans_reused_across_calls():
    wg, wu = weights(40, 24)
    p = PackedGeGLU(wg, wu, path="cublas")
    wp_ptr = p.w_packed.data_ptr()
    outs = []
    for _ in range(3):
        x = torch.randn(9, 24)
        outs.append((p.sync(wg, wu)(x), x))
    assert p.packs == 1 and len(p.plans) == 1
    plan = next(iter(p.plans.values()))
    assert plan.workspace is not None  # the cuBLAS path's intermediate lives in the plan
    ws_ptr = plan.workspace.data_ptr()
    p(torch.randn(9, 24))
    assert plan.workspace.data_ptr() == ws_ptr and p.w_packed.data_ptr() == wp_ptr
    for out, x in outs:  # earlier outputs are not overwritten by later calls
        assert rel(out, forward64(x, wg, wu)) <= 1e-5


def test_weight_change_invalidates_the_packing():
    wg, wu = weights(40, 24)
    p = PackedGeGLU(wg, wu, path="pointer")
    x = torch.randn(11, 24)
    p(x)
    with torch.no_grad():
        wg.mul_(-2.0)  # in place: the version counter moves, the pointer does not
    assert rel(p.sync(wg, wu)(x), forward64(x, wg, wu)) <= 1e-5
    assert p.packs == 2
    wu2 = wu.clone() * 0.5  # another tensor: the pointer moves
    assert rel(p.sync(wg, wu2)(x), forward64(x, wg, wu2)) <= 1e-5
    assert p.packs == 3
    p.sync(wg, wu2)
    assert p.packs == 3  # unchanged weights: nothing re-packed
    wg3, wu3 = weights(32, 24)  # new shape: new buffer, plans dropped
    assert rel(p.sync(wg3, wu3)(x), forward64(x, wg3, wu3)) <= 1e-5
    assert p.w_packed.shape == (64, 24) and all(pl.m == 11 for pl in p.plans.values()) and len(p.plans) == 1


def test_bad_inputs_are_refused():
    wg, wu = weights(40, 24)
    p = PackedGeGLU(wg, wu)
    with pytest.raises(ValueError, match="does not match"):
        p(torch.randn(3, 25))
    with pytest.raises(ValueError, match="does not match"):
        p(torch.randn(3, 24, dtype=torch.float64))
    with pytest.raises(ValueError, match="out must be"):
        p(torch.randn(3, 24), out=torch.empty(3, 41))
    with pytest.raises(ValueError, match="unknown path"):
        PackedGeGLU(wg, wu, path="cudnn")
    with pytest.raises(ValueError, match="equal 2-D"):
        PackedGeGLU(wg, wu[:, :5])


# --- backward ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(37, 40), (1, 40), (4099,), (2, 3, 1025)])
def test_pointwise_backward_matches_formula(shape):
    g = torch.randn(shape) * 3
    u = torch.randn(shape)
    dout = torch.randn(shape)
    want_dg = dout.double() * u.double() * dgelu64(g.double())
    want_du = dout.double() * gelu64(g.double())
    dg, du = geglu_backward(dout, g, u)
    assert rel(dg, want_dg) <= 1e-5 and rel(du, want_du) <= 1e-5
    if len(shape) > 1:  # the interleaved layout the fused MLP saves
        pre = torch.stack([g, u], dim=-1).reshape(*shape[:-1], 2 * shape[-1])
        dpre = geglu_interleaved_backward(dout, pre)
        assert rel(dpre[..., 0::2], want_dg) <= 1e-5 and rel(dpre[..., 1::2], want_du) <= 1e-5


def test_pointwise_backward_bf16():
    g, u, dout = (torch.randn(37, 40).to(torch.bfloat16) for _ in range(3))
    dg, du = geglu_backward(dout, g, u)
    assert dg.dtype == torch.bfloat16
    assert rel(dg, dout.double() * u.double() * dgelu64(g.double())) <= 1e-2
    assert rel(du, dout.double() * gelu64(g.double())) <= 1e-2


def grads64(x, wg, wu, dh):
    k = x.shape[-1]
    x2, wg, wu, dh = x.double().reshape(-1, k), wg.double(), wu.double(), dh.double().reshape(-1, wg.shape[0])
    g, u = x2 @ wg.T, x2 @ wu.T
    dg, du = dh * u * dgelu64(g), dh * gelu64(g)
    return (dg @ wg + du @ wu).reshape(x.shape), dg.T @ x2, du.T @ x2


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m", [37, 1])
def test_autograd_gradients_match_formula(path, m):
    k, n = 24, 40
    wg, wu = (w.requires_grad_() for w in weights(n, k))
    x = torch.randn(m, k, requires_grad=True)
    p = PackedGeGLU(wg, wu, path=path)
    h = fused_geglu(x, wg, wu, p)
    assert rel(h.detach(), forward64(x, wg, wu)) <= 1e-5
    dh = torch.randn_like(h)
    h.backward(dh)
    for got, want in zip((x.grad, wg.grad, wu.grad), grads64(x, wg, wu, dh)):
        assert got.shape == want.shape
        assert rel(got, want) <= 1e-5


def test_autograd_bf16_batched_input_without_input_grad():
    k, n = 24, 40
    wg, wu = (w.requires_grad_() for w in weights(n, k, torch.bfloat16))
    x = torch.randn(2, 9, k).to(torch.bfloat16)  # data: no grad wanted, so no dx GEMM
    h = fused_geglu(x, wg, wu, PackedGeGLU(wg, wu, path="tma"))
    dh = torch.randn_like(h)
    h.backward(dh)
    _, want_g, want_u = grads64(x, wg, wu, dh)
    assert x.grad is None
    assert rel(wg.grad, want_g) <= 2e-2 and rel(wu.grad, want_u) <= 2e-2


def test_repack_before_backward_is_caught():
    wg, wu = (w.requires_grad_() for w in weights(40, 24))
    p = PackedGeGLU(wg, wu, path="pointer")
    x = torch.randn(5, 24)
    h = fused_geglu(x, wg, wu, p)
    with torch.no_grad():
        wg.add_(1.0)
    fused_geglu(x, wg, wu, p)  # re-packs in place: h's saved packed weight is now stale
    with pytest.raises(RuntimeError, match="inplace"):
        h.sum().backward()


def test_triton_rung_pointwise_autograd():
    g = torch.randn(7, 33, requires_grad=True)
    u = torch.randn(7, 33, requires_grad=True)
    out = geglu_autograd(g, u)
    dout = torch.randn_like(out)
    out.backward(dout)
    assert rel(out.detach(), gelu64(g.double()) * u.double()) <= 1e-5
    assert rel(g.grad, dout.double() * u.double() * dgelu64(g.double())) <= 1e-5
    assert rel(u.grad, dout.double() * gelu64(g.double())) <= 1e-5


def test_fused_module_trains_like_eager():
    """Two AdamW steps of the bundled GeGLU, fused vs eager: same losses and gradients, and the
    second step's forward sees the updated weights, read in place from the one packed parameter
    (never copied: ``packs`` stays 0 and the plans point at the parameter itself)."""
    from tracetui.workloads.models import GeGLU
    torch.manual_seed(1)
    eager = GeGLU(24, 40)
    fused = GeGLU(24, 40, act="fused")
    fused.load_state_dict(eager.state_dict())
    x = torch.randn(2, 19, 24)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, fused)]
    for step in range(2):
        losses = []
        for mod, opt in zip((eager, fused), opts):
            loss = mod(x).square().mean()
            loss.backward()
            losses.append(loss.item())
            mod.grads = {n: p.grad.clone() for n, p in mod.named_parameters()}
            opt.step()
            opt.zero_grad(set_to_none=True)
        assert abs(losses[0] - losses[1]) <= 1e-5 * abs(losses[0])
        packed = fused.grads["gate_up_proj.weight"]
        assert rel(packed[0::2], eager.grads["gate_proj.weight"].double()) <= 1e-4
        assert rel(packed[1::2], eager.grads["up_proj.weight"].double()) <= 1e-4
        assert rel(fused.grads["down_proj.weight"], eager.grads["down_proj.weight"].double()) <= 1e-4
    plans = fused.gate_up_proj.plans()
    assert plans.packs == 0 and plans.w_packed is fused.gate_up_proj.weight
    sd, w = fused.state_dict(), fused.gate_up_proj.weight.detach()
    assert list(sd) == list(eager.state_dict())  # the eager names, in the eager order
    assert torch.equal(sd["gate_proj.weight"], w[0::2]) and torch.equal(sd["up_proj.weight"], w[1::2])
    eager.load_state_dict(sd)  # and back: the fused checkpoint loads into the eager form
    assert torch.equal(eager.gate_proj.weight, w[0::2]) and torch.equal(eager.up_proj.weight, w[1::2])


def test_gen_records_a_fused_train_step(tmp_path):
    """``gen mlp --train --impl fused`` on the CPU: one fused forward and one fused backward per
    recorded step, read straight from the trace's events."""
    import gzip
    import json
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    ws = workloads(train_mlp=True, batch=2, seq=4, dim=24, hidden=40)
    out = record(ws["mlp"], "fused", tmp_path / "mlp_train_fused.json.gz", device="cpu", warmup_iters=1,
                 active=2, save_key_averages=False)
    doc = json.loads(gzip.decompress(out.read_bytes()))
    names = [e.get("name", "") for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = [n for n in names if n.startswith("ProfilerStep#")]
    assert len(steps) == 2
    # the custom ops by name: one forward and one backward per step (the backward under autograd's node)
    assert sum(n.endswith("FusedGeGLUBackward") and "evaluate_function" in n
               for n in names) == 2
    assert sum(n == "tracetui::geglu_mlp" for n in names) == 2
    assert sum(n == "tracetui::geglu_mlp_backward" for n in names) == 2
    assert doc["tracetui"]["train"] is True and doc["tracetui"]["impl"] == "fused"


def test_tma_build_failure_falls_back_to_the_pointer_kernel(monkeypatch):
    """On a GPU/Triton pairing where the TMA kernel cannot build, the dispatch keeps the model
    running on the pointer kernel, says so once, and records why; a forced path still raises."""
    from tracetui.kernels import fused as fused_mod

    class Broken:
        def __getitem__(self, grid):
            def launch(*a, **k):
                raise RuntimeError("no TMA here")
            return launch
    monkeypatch.setattr(fused_mod, "_TMA", Broken())  # the TMA path's launcher
    wg, wu = weights(40, 24, torch.bfloat16)
    p = PackedGeGLU(wg, wu)
    p.tma_capable = True
    x = torch.randn(POINTER_MAX_M + 5, 24).to(torch.bfloat16)
    with pytest.warns(UserWarning, match="no TMA here"):
        out = p(x)
    (plan,) = p.plans.values()
    assert plan.path == "pointer" and "no TMA here" in plan.fallback
    assert rel(out, forward64(x, wg, wu)) <= 1e-2
    assert rel(p(x), forward64(x, wg, wu)) <= 1e-2  # later calls: the pointer plan, no warning
    forced = PackedGeGLU(wg, wu, path="tma")
    with pytest.raises(RuntimeError, match="no TMA here"):
        forced(x)


class OutOfResources(Exception):
    """Stands in for triton.runtime.errors.OutOfResources (what the H100 raised for fp32)."""


def failing(message):
    def launch(*a, **k):
        raise OutOfResources(message)
    return launch


def test_out_of_resources_falls_back_along_the_chain_and_warns_once(monkeypatch):
    """A launcher that fails like the H100's fp32 pointer kernel (injected: the interpreter has no
    shared-memory limit): the model runs on the next path (tma -> pointer -> cublas), the result
    is right, the plan keeps every reason, and each distinct failure is said once."""
    from tracetui.kernels import fused as fused_mod
    msg = "out of resource: shared memory, Required: 294912, Hardware limit: 232448 (test chain)"
    monkeypatch.setitem(fused_mod.LAUNCHERS, "tma", failing("tma " + msg))
    monkeypatch.setitem(fused_mod.LAUNCHERS, "pointer", failing("pointer " + msg))
    wg, wu = weights(40, 24, torch.bfloat16)
    x = torch.randn(POINTER_MAX_M + 3, 24).to(torch.bfloat16)
    p = PackedGeGLU(wg, wu)
    p.tma_capable = True
    with pytest.warns(UserWarning) as seen:
        out = p(x)
    assert len(seen) == 2 and "tma " + msg in str(seen[0].message) and "pointer " + msg in str(seen[1].message)
    (plan,) = p.plans.values()
    assert plan.path == "cublas" and "tma " + msg in plan.fallback and "pointer " + msg in plan.fallback
    assert rel(out, forward64(x, wg, wu)) <= 1e-2
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second model hitting the same failures: no more warnings
        q = PackedGeGLU(wg, wu)
        q.tma_capable = True
        assert rel(q(x), forward64(x, wg, wu)) <= 1e-2 and q(x).shape == (x.shape[0], 40)
    with pytest.raises(OutOfResources):  # a forced path raises: the bench records it as a FAIL row
        PackedGeGLU(wg, wu, path="pointer")(x)


def test_training_survives_a_failing_kernel(monkeypatch):
    """fp32 training through the packed parameter when the pointer kernel cannot launch: the
    step runs on cuBLAS + the pointwise kernel, with float64-exact gradients."""
    from tracetui.kernels import fused as fused_mod
    from tracetui.kernels.gate_up import GateUpProj
    monkeypatch.setitem(fused_mod.LAUNCHERS, "pointer", failing("pointer smem (test training)"))
    torch.manual_seed(3)
    mod = GateUpProj(24, 40)
    x = torch.randn(CUBLAS_MAX_M + 9, 24, requires_grad=True)
    with pytest.warns(UserWarning, match="test training"):
        h = mod(x)
    dh = torch.randn_like(h)
    h.backward(dh)
    wg, wu = mod.gate.detach(), mod.up.detach()
    dx, dg, du = grads64(x.detach(), wg, wu, dh)
    assert rel(h.detach(), forward64(x.detach(), wg, wu)) <= 1e-5
    assert rel(x.grad, dx) <= 1e-5 and rel(mod.weight.grad[0::2], dg) <= 1e-5 and rel(mod.weight.grad[1::2], du) <= 1e-5
    (plan,) = mod.plans().plans.values()
    assert plan.path == "cublas" and "test training" in plan.fallback


def test_gen_train_cli_names_and_refusals(tmp_path, monkeypatch, capsys):
    """``tracetui gen mlp --train --impl fused`` (CPU, interpreter) writes mlp_train_fused.json.gz
    by default; --train elsewhere is refused with one error line."""
    import gzip
    import json
    from tracetui.cli.main import main
    monkeypatch.chdir(tmp_path)
    assert main(["gen", "mlp", "--train", "--impl", "fused", "--device", "cpu", "--batch", "2", "--seq", "3",
                 "--dim", "24", "--hidden", "40", "--active", "1", "--no-stack"]) == 0
    doc = json.loads(gzip.decompress((tmp_path / "mlp_train_fused.json.gz").read_bytes()))
    assert doc["tracetui"]["train"] is True and doc["tracetui"]["sizes"]["hidden"] == 40
    assert any(e.get("name") == "mlp_train" for e in doc["traceEvents"])
    for argv in (["gen", "linear", "--train"], ["gen", "--all", "--train"]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tracetui: error: ") and "--train" in err[0]


def test_scratch_allocator_reuses_and_grows_per_stream():
    """Triton's per-launch scratch for device-built descriptors: one buffer per (device, stream)
    reused launch to launch, grown (never shrunk) when a launch needs more, outgrown buffers kept
    alive. Allocation is injected here (the real one allocates on CUDA)."""
    from tracetui.kernels.fused import ScratchAllocator
    made = []
    alloc = ScratchAllocator(alloc=lambda n: made.append(n) or torch.empty(n, dtype=torch.int8),
                             current_device=lambda: 0)
    a = alloc(384, 128, 7)
    assert alloc(384, 128, 7) is a and alloc(100, 128, 7) is a  # reused, no new allocation
    b = alloc(200, 128, 9)  # another stream: its own buffer
    assert b is not a and len(made) == 2
    big = alloc(a.numel() + 1, 128, 7)
    assert big.numel() >= 2 * a.numel() and alloc(10, 128, 7) is big
    assert any(r is a for r in alloc.retired) and alloc.allocations == 3


def test_allocator_is_registered_once_per_context_and_never_replaces_a_users():
    import contextvars
    import threading
    from tracetui.kernels import fused as fused_mod
    from triton.runtime._allocation import _allocator

    def fresh():
        fused_mod.ensure_allocator()
        return _allocator.get()
    assert contextvars.Context().run(fresh) is fused_mod.SCRATCH

    def users():
        import triton
        mine = lambda size, align, stream: None  # noqa: E731
        triton.set_allocator(mine)
        fused_mod.ensure_allocator()
        return _allocator.get() is mine
    assert contextvars.Context().run(users)
    seen = []
    t = threading.Thread(target=lambda: seen.append(fresh()))  # a new thread starts without one
    t.start()
    t.join()
    assert seen == [fused_mod.SCRATCH]


def test_backward_rejects_mismatched_inputs():
    g = torch.randn(4, 6)
    with pytest.raises(ValueError, match="dout"):
        geglu_backward(torch.randn(4, 7), g, g)
    with pytest.raises(ValueError, match="dout"):
        geglu_backward(torch.randn(4, 6, dtype=torch.bfloat16), g, g)
    with pytest.raises(ValueError, match="last dimension doubled"):
        geglu_interleaved_backward(torch.randn(4, 6), torch.randn(4, 11))
