"""The fused GeGLU as torch custom ops, so torch.compile traces through it and CUDA graphs capture it.

``tracetui::geglu_mlp(x, w, save_pre) -> (h, pre)``: the gate/up dual GEMM with its GeGLU
epilogue over the interleaved [2N, K] parameter (``gate_up.GateUpProj``), ``h = gelu_tanh(x @
w[0::2].T) * (x @ w[1::2].T)``. With ``save_pre`` it also writes the interleaved [M, 2N]
pre-activations the backward reads (else ``pre`` is an empty placeholder: inference writes none).

``tracetui::geglu_mlp_backward(dh, x, pre, w, need_dx, need_dw) -> (dx, dw)``: one pointwise
kernel (dh, pre -> the interleaved dgate/dup), then ``dx = dpre @ w`` and ``dw = dpre.T @ x``
(cuBLAS); a gradient not needed is an empty placeholder and its GEMM is not run.

Why ops and not an ``autograd.Function``: dynamo breaks the graph at a Python Function that
launches Triton through our plans; a registered op is one opaque node with a fake (meta) kernel
and an autograd formula, so ``torch.compile`` keeps one graph and its cudagraph modes can record
the whole step; ``torch.cuda.make_graphed_callables`` captures it in eager. The profiler shows
each call as an op by name (module -> ``tracetui::geglu_mlp`` -> our kernel), as ATen ops are.

The ops are opaque (``custom_op``, not ``triton_op``): their CUDA/CPU kernel is the plan path
of ``fused.PackedGeGLU`` (rule-table dispatch, fallbacks, the direct launcher), looked up per
(N, K, dtype, device) in ``_PLANS``; the weight is passed in each call and read in place.
"""
from __future__ import annotations

import torch
import triton

from tracetui.kernels.fused import PackedGeGLU
from tracetui.kernels.geglu import geglu_interleaved_bwd_kernel
from tracetui.kernels.launch import Launcher

FORWARD = "tracetui::geglu_mlp"
BACKWARD = "tracetui::geglu_mlp_backward"

_BLOCK = 1024
_BWD = Launcher(geglu_interleaved_bwd_kernel)
"""The backward's pointwise kernel behind a ``Launcher``: each step after the first skips the JIT's binding."""

_PLANS: dict = {}
"""(N, K, dtype, device, forced path) -> PackedGeGLU: launch plans shared by every weight of that shape."""


def plans_for(w: torch.Tensor, path: str | None = None) -> PackedGeGLU:
    """The launch plans for a [2N, K] weight, pointed at ``w`` (read in place, never copied)."""
    key = (w.shape[0], w.shape[1], w.dtype, w.device, path)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = PackedGeGLU.over(w, path=path)
    p.w_packed = w
    return p


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty((0,))


def _forward_impl(x: torch.Tensor, w: torch.Tensor, save_pre: bool, path: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    k = w.shape[1]
    x2 = x if x.dim() == 2 else x.reshape(-1, k)
    pre = x.new_empty((x2.shape[0], w.shape[0])) if save_pre else None
    h = plans_for(w, path or None)(x2, pre=pre)
    h = h if x.dim() == 2 else h.view(*x.shape[:-1], w.shape[0] // 2)
    return h, (pre if save_pre else _empty(x))


geglu_mlp = torch.library.custom_op(FORWARD, _forward_impl, mutates_args=(), device_types=("cuda", "cpu"))


@geglu_mlp.register_fake
def _geglu_mlp_fake(x, w, save_pre, path=""):
    m = x.numel() // x.shape[-1] if x.shape[-1] else 0
    h = x.new_empty((*x.shape[:-1], w.shape[0] // 2))
    return h, (x.new_empty((m, w.shape[0])) if save_pre else x.new_empty((0,)))


def _backward_impl(dh: torch.Tensor, x: torch.Tensor, pre: torch.Tensor, w: torch.Tensor,
                   need_dx: bool, need_dw: bool) -> tuple[torch.Tensor, torch.Tensor]:
    dh = dh if dh.is_contiguous() else dh.contiguous()
    x2 = x if x.dim() == 2 else x.reshape(-1, w.shape[1])
    dpre = torch.empty_like(pre)  # [M, 2N]: dgate, dup interleaved, one pass
    n = dh.numel()
    if n:  # geglu_interleaved_backward's kernel, launched without its Python argument checks
        _BWD[(triton.cdiv(n, _BLOCK),)](dh, pre, dpre, n, n // _BLOCK, BLOCK=_BLOCK, num_warps=4)
    dx = torch.mm(dpre, w).view(x.shape) if need_dx else _empty(x)
    dw = torch.mm(dpre.t(), x2) if need_dw else _empty(w)  # [2N, K] like w: AccumulateGrad copies nothing
    return dx, dw


geglu_mlp_backward = torch.library.custom_op(BACKWARD, _backward_impl, mutates_args=(), device_types=("cuda", "cpu"))


@geglu_mlp_backward.register_fake
def _geglu_mlp_backward_fake(dh, x, pre, w, need_dx, need_dw):
    return (torch.empty_like(x) if need_dx else x.new_empty((0,)),
            torch.empty_like(w, memory_format=torch.contiguous_format) if need_dw else w.new_empty((0,)))


def _setup_context(ctx, inputs, output):
    x, w, save_pre, _path = inputs
    _, pre = output
    if not save_pre:
        raise RuntimeError("tracetui::geglu_mlp: called with save_pre=False while a gradient is wanted")
    # w is saved: an optimizer step between forward and backward trips autograd's version check
    ctx.save_for_backward(x, pre, w)
    ctx.mark_non_differentiable(pre)
    ctx.set_materialize_grads(False)  # pre's gradient stays None: no [M, 2N] zeros per step


def _backward(ctx, dh, _dpre):
    x, pre, w = ctx.saved_tensors
    need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    if dh is None:
        return None, None, None, None
    dx, dw = geglu_mlp_backward(dh, x, pre, w, need_dx, need_dw)
    return (dx if need_dx else None), (dw if need_dw else None), None, None


geglu_mlp.register_autograd(_backward, setup_context=_setup_context)


class FusedGeGLU(torch.autograd.Function):
    """Eager autograd for the fused GeGLU: the ops' bodies called directly (``via_op`` False: no
    dispatcher trip into Python, no custom_op wrapper, host µs a host-bound eager step saves), or
    the registered ops themselves (``via_op`` True, while a profiler records: the trace then shows
    module -> FusedGeGLU -> ``tracetui::geglu_mlp`` -> kernel, the op innermost around its kernel
    with the input and weight shapes, and ``tracetui::geglu_mlp_backward`` in the backward)."""

    @staticmethod
    def forward(ctx, x, w, path, via_op):
        h, pre = (torch.ops.tracetui.geglu_mlp if via_op else _forward_impl)(x, w, True, path)
        ctx.save_for_backward(x, pre, w)
        ctx.via_op = via_op
        ctx.mark_non_differentiable(pre)
        ctx.set_materialize_grads(False)
        return h

    @staticmethod
    def backward(ctx, dh):
        if dh is None:
            return None, None, None, None
        x, pre, w = ctx.saved_tensors
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dx, dw = (torch.ops.tracetui.geglu_mlp_backward if ctx.via_op else _backward_impl)(
            dh, x, pre, w, need_dx, need_dw)
        return (dx if need_dx else None), (dw if need_dw else None), None, None


def fused_gate_up(x: torch.Tensor, w: torch.Tensor, path: str | None = None) -> torch.Tensor:
    """``gelu_tanh(x @ w[0::2].T) * (x @ w[1::2].T)``; saves the pre-activations only when autograd
    wants a gradient. ``path`` forces one of ``fused.PATHS`` instead of the rule table.

    Under torch.compile: the op ``tracetui::geglu_mlp`` with its registered autograd (one graph
    node, no break). In eager: ``FusedGeGLU``, calling the registered ops while a profiler records
    (named in the trace) and their bodies directly otherwise: plain eager is host-bound, and the
    op's dispatch costs host time the GPU waits for (``benchmarks/bench_train_launch.py``)."""
    save = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
    path = path or ""
    if torch.compiler.is_compiling():
        return torch.ops.tracetui.geglu_mlp(x, w, save, path)[0]
    via_op = torch._C._autograd._profiler_enabled()
    if save:
        return FusedGeGLU.apply(x, w, path, via_op)
    return (torch.ops.tracetui.geglu_mlp if via_op else _forward_impl)(x, w, False, path)[0]
