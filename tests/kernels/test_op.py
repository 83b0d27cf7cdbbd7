"""The fused GeGLU as custom ops (kernels/op.py), on the CPU under TRITON_INTERPRET=1 (conftest):
forward and backward against float64 formulas written here from the raw weights, torch's own
op checks (schema, fake kernel, autograd registration), and torch.compile tracing the module
that uses the op as ONE graph (no break at our kernels)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tracetui.kernels import op as op_mod  # noqa: E402
from tracetui.kernels.fused import PATHS  # noqa: E402
from tracetui.kernels.gate_up import GateUpProj  # noqa: E402
from tracetui.workloads.models import GeGLU  # noqa: E402

C = 0.7978845608028654


def gelu64(g):
    return 0.5 * g * (1 + torch.tanh(C * (g + 0.044715 * g ** 3)))


def dgelu64(g):
    t = torch.tanh(C * (g + 0.044715 * g ** 3))
    return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * C * (1 + 3 * 0.044715 * g * g)


def reference(x, w, dh):
    """h, dx, dW of h = gelu_tanh(x @ w[0::2].T) * (x @ w[1::2].T) in float64, from the formulas."""
    x, w, dh = x.double(), w.double(), dh.double()
    g, u = x @ w[0::2].T, x @ w[1::2].T
    dg, du = dh * u * dgelu64(g), dh * gelu64(g)
    dw = torch.empty_like(w)
    dw[0::2], dw[1::2] = dg.T @ x, du.T @ x
    return gelu64(g) * u, dg @ w[0::2] + du @ w[1::2], dw


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 1e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 37, 64])
def test_op_forward_and_backward_match_float64(m, dtype):
    torch.manual_seed(m)
    w = (torch.randn(80, 24) / 24 ** 0.5).to(dtype).requires_grad_()
    x = torch.randn(m, 24).to(dtype).requires_grad_()
    h, pre = torch.ops.tracetui.geglu_mlp(x, w, True)
    assert pre.shape == (m, 80)  # the interleaved pre-activations the backward reads
    dh = torch.randn_like(h)
    h.backward(dh)
    want_h, want_dx, want_dw = reference(x.detach(), w.detach(), dh)
    tol = TOL[dtype]
    assert rel(h.detach(), want_h) <= tol
    assert rel(x.grad, want_dx) <= tol and rel(w.grad, want_dw) <= tol
    assert rel(pre.detach()[:, 0::2], x.detach().double() @ w.detach().double()[0::2].T) <= tol


@pytest.mark.parametrize("path", PATHS)
def test_op_every_path_and_a_3d_input(path):
    """Each forced path through the op, x [2, 9, K] (the MLP's [batch, seq, dim]), x as data:
    no dx is computed (the op returns none) and dW still matches."""
    torch.manual_seed(1)
    w = (torch.randn(80, 24) / 24 ** 0.5).requires_grad_()
    x = torch.randn(2, 9, 24)
    h, _ = torch.ops.tracetui.geglu_mlp(x, w, True, path)
    assert h.shape == (2, 9, 40)
    dh = torch.randn_like(h)
    h.backward(dh)
    want_h, _, want_dw = reference(x.reshape(-1, 24), w.detach(), dh.reshape(-1, 40))
    assert rel(h.detach().reshape(-1, 40), want_h) <= 1e-5 and rel(w.grad, want_dw) <= 1e-5
    assert x.grad is None and op_mod.plans_for(w, path).plans[(18, torch.float32, False, True)].path == path


def test_inference_writes_no_pre_activations():
    w, x = torch.randn(80, 24), torch.randn(37, 24)
    with torch.no_grad():
        h, pre = torch.ops.tracetui.geglu_mlp(x, w, False)
    assert pre.numel() == 0 and h.shape == (37, 40)
    assert rel(h, reference(x, w, torch.zeros(37, 40))[0]) <= 1e-5
    with pytest.raises(RuntimeError, match="save_pre=False"):  # a gradient without the saved pre: one clear error
        torch.ops.tracetui.geglu_mlp(x, w.requires_grad_(), False)


def test_backward_skips_the_gradients_not_wanted():
    torch.manual_seed(2)
    x, w, dh = torch.randn(37, 24), torch.randn(80, 24), torch.randn(37, 40)
    _, pre = torch.ops.tracetui.geglu_mlp(x, w, True)
    dx, dw = torch.ops.tracetui.geglu_mlp_backward(dh, x, pre, w, False, True)
    assert dx.numel() == 0 and rel(dw, reference(x, w, dh)[2]) <= 1e-5
    dx, dw = torch.ops.tracetui.geglu_mlp_backward(dh, x, pre, w, True, False)
    assert dw.numel() == 0 and rel(dx, reference(x, w, dh)[1]) <= 1e-5


def test_torch_opcheck_passes():
    """torch.library.opcheck: schema, fake (meta) kernel vs the real one, the autograd registration
    and AOT dispatch, for the forward and the backward op."""
    x, w = torch.randn(37, 24), (torch.randn(80, 24) / 5).requires_grad_()
    torch.library.opcheck(torch.ops.tracetui.geglu_mlp.default, (x, w, True, ""))
    torch.library.opcheck(torch.ops.tracetui.geglu_mlp.default, (x, w.detach(), False, "pointer"))
    _, pre = torch.ops.tracetui.geglu_mlp(x, w.detach(), True)
    torch.library.opcheck(torch.ops.tracetui.geglu_mlp_backward.default,
                          (torch.randn(37, 40), x, pre, w.detach(), True, True))


def test_dynamo_traces_the_fused_module_as_one_graph():
    """torch._dynamo.explain over a training forward of the fused GeGLU: one graph, no break (an
    autograd.Function that launches Triton through our plans broke the graph here)."""
    torch.manual_seed(3)
    mod = GeGLU(24, 40, act="fused")
    x = torch.randn(2, 9, 24)
    torch._dynamo.reset()
    ex = torch._dynamo.explain(lambda t: mod(t).float().square().mean())(x)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons
    ops = [str(n.target) for g in ex.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert any("tracetui.geglu_mlp" in o for o in ops), ops  # the op is a node of the graph


def test_compiled_fused_training_matches_float64():
    """torch.compile(backend="aot_eager", fullgraph=True) of a module using the op: forward and the
    gradients of x and of the packed weight, against float64 (AOT traced our autograd formula)."""
    torch.manual_seed(4)
    mod = GateUpProj(24, 40)
    comp = torch.compile(mod, backend="aot_eager", fullgraph=True, dynamic=False)
    x = torch.randn(37, 24, requires_grad=True)
    h = comp(x)
    dh = torch.randn_like(h)
    h.backward(dh)
    want_h, want_dx, want_dw = reference(x.detach(), mod.weight.detach(), dh)
    assert rel(h.detach(), want_h) <= 1e-5
    assert rel(x.grad, want_dx) <= 1e-5 and rel(mod.weight.grad, want_dw) <= 1e-5


def _inside(inner, outer):
    return (inner.get("tid") == outer.get("tid") and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])


def test_recorded_fused_train_step_chains_module_op(tmp_path):
    """``gen mlp --train --impl fused``: each step's ``tracetui::geglu_mlp`` lies inside the
    GateUpProj module scope, with the input and weight shapes the diff reads as GEMM work; its
    backward op lies inside autograd's node for it. Read from the raw JSON."""
    import gzip
    import json
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    ws = workloads(train_mlp=True, batch=2, seq=4, dim=24, hidden=40)
    out = record(ws["mlp"], "fused", tmp_path / "t.json.gz", device="cpu", warmup_iters=1, active=2,
                 save_key_averages=False, with_stack=True)
    ev = [e for e in json.loads(gzip.decompress(out.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    mods = [e for e in ev if e["name"].startswith("nn.Module: GateUpProj")]
    fwd = [e for e in ev if e["name"] == "tracetui::geglu_mlp"]
    bwd = [e for e in ev if e["name"] == "tracetui::geglu_mlp_backward"]
    nodes = [e for e in ev if e["name"] == "autograd::engine::evaluate_function: FusedGeGLUBackward"]
    assert len(fwd) == len(bwd) == len(nodes) == 2 and len(mods) >= 2
    assert all(any(_inside(f, m) for m in mods) for f in fwd)
    assert all(any(_inside(b, n) for n in nodes) for b in bwd)
    assert all(f["args"]["Input Dims"][:2] == [[2, 4, 24], [80, 24]] for f in fwd)


def test_graph_rung_refuses_the_cpu_with_one_line():
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    with pytest.raises(ValueError, match="needs a CUDA device"):
        record(workloads(train_mlp=True)["mlp"], "fused-graphs", "x.json.gz", device="cpu")
    with pytest.raises(ValueError, match="compile mode needs --impl compile or fused-compile"):
        record(workloads()["mlp"], "fused", "x.json.gz", device="cpu", mode="max-autotune")


def test_plain_eager_path_and_the_op_agree_exactly():
    """Plain eager runs the op's bodies directly (no dispatcher trip); under a profiler the op runs.
    Same kernels, so the same bits: h, dx and dW equal, and only the profiled call shows the op."""
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(5)
    mod = GateUpProj(24, 40)
    x = torch.randn(37, 24)
    got = []
    for watched in (False, True):
        xr = x.clone().requires_grad_()
        mod.weight.grad = None
        with profile(activities=[ProfilerActivity.CPU]) if watched else torch.autograd.graph.saved_tensors_hooks(
                lambda t: t, lambda t: t) as prof:
            h = mod(xr)
            h.square().sum().backward()
        got.append((h.detach(), xr.grad, mod.weight.grad))
    assert all(torch.equal(a, b) for a, b in zip(*got))
    names = {e.name for e in prof.events()}
    assert {"tracetui::geglu_mlp", "tracetui::geglu_mlp_backward"} <= names
