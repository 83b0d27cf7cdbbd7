"""The fused GeGLU's trainable form: gate and up live packed as ONE parameter, so training copies nothing.

``GateUpProj`` holds one [2N, K] parameter whose rows alternate gate/up (nn.Linear's layout of
the interleaved projection). The fused kernels read it in place (``PackedGeGLU.over``): no
per-step re-pack when the optimizer changes it. Gate and up are views of it (``.gate``,
``.up``), and ``GeGLU``'s state dict shows them as ``gate_proj.weight`` / ``up_proj.weight``
(``split_state`` / ``join_state``), so checkpoints move between the eager and fused forms.

Backward (``_FusedGeGLUFn``): one pointwise kernel turns the output gradient and the saved
interleaved pre-activations into the interleaved [M, 2N] gradient (copy speed on the H100),
then two cuBLAS GEMMs: dx = dpre @ W and dW = dpre.T @ x. dW comes out [2N, K] contiguous, the
parameter's own layout, so autograd's AccumulateGrad takes it as the gradient (no copy).
"""
from __future__ import annotations

import math

import torch
import triton
from torch import nn

from tracetui.kernels.fused import PackedGeGLU
from tracetui.kernels.geglu import geglu_interleaved_bwd_kernel
from tracetui.kernels.launch import Launcher

_BLOCK = 1024
_BWD = Launcher(geglu_interleaved_bwd_kernel)
"""The backward kernel behind a ``Launcher``: each step after the first skips the JIT's binding."""


class _FusedGeGLUFn(torch.autograd.Function):
    """h = gelu_tanh(x @ Wg.T) * (x @ Wu.T) for the packed parameter W [2N, K]."""

    @staticmethod
    def forward(ctx, x, w, packed: PackedGeGLU):
        x2 = x if x.dim() == 2 else x.reshape(-1, packed.k)
        pre = torch.empty((x2.shape[0], w.shape[0]), dtype=x.dtype, device=x.device)
        h = packed(x2, pre=pre)
        # w is saved: an optimizer step between forward and backward trips autograd's version check
        ctx.save_for_backward(x2, pre, w)
        ctx.x_shape = x.shape
        return h if x.dim() == 2 else h.view(*x.shape[:-1], packed.n)

    @staticmethod
    def backward(ctx, dh):
        x2, pre, w = ctx.saved_tensors
        dh = dh if dh.is_contiguous() else dh.contiguous()
        dpre = torch.empty_like(pre)  # [M, 2N]: dgate, dup interleaved, one pass (shapes checked in forward)
        n = dh.numel()
        if n:  # geglu_interleaved_backward's kernel, launched without its Python argument checks
            _BWD[(triton.cdiv(n, _BLOCK),)](dh, pre, dpre, n, n // _BLOCK, BLOCK=_BLOCK, num_warps=4)
        dx = torch.mm(dpre, w).view(ctx.x_shape) if ctx.needs_input_grad[0] else None
        dw = torch.mm(dpre.t(), x2) if ctx.needs_input_grad[1] else None  # [2N, K] like w
        return dx, dw, None


def packed_geglu(x: torch.Tensor, w: torch.Tensor, packed: PackedGeGLU) -> torch.Tensor:
    """``gelu_tanh(x @ w[0::2].T) * (x @ w[1::2].T)`` through ``packed`` (plans over ``w``),
    differentiable in x and w when autograd wants it."""
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        return _FusedGeGLUFn.apply(x, w, packed)
    return packed(x)


class GateUpProj(nn.Module):
    """The gate and up projections of a GeGLU as one interleaved [2*hidden, dim] parameter,
    applied with the GeGLU epilogue: ``forward(x) = gelu_tanh(x @ gate.T) * (x @ up.T)``.
    Initialised like two nn.Linear(dim, hidden) (uniform in +-1/sqrt(dim))."""

    def __init__(self, dim: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.dim, self.hidden = dim, hidden
        self.weight = nn.Parameter(torch.empty((2 * hidden, dim), device=device, dtype=dtype))
        bound = 1 / math.sqrt(dim) if dim else 0.0
        nn.init.uniform_(self.weight, -bound, bound)
        self._packed: PackedGeGLU | None = None  # launch plans over self.weight, made on first call

    @property
    def gate(self) -> torch.Tensor:
        """The gate projection's weight [hidden, dim]: a view (rows 0, 2, 4, ...) of ``weight``."""
        return self.weight[0::2]

    @property
    def up(self) -> torch.Tensor:
        """The up projection's weight [hidden, dim]: a view (rows 1, 3, 5, ...) of ``weight``."""
        return self.weight[1::2]

    def plans(self) -> PackedGeGLU:
        """The launch plans over the parameter, remade only if its dtype or device changed."""
        w, p = self.weight, self._packed
        if p is None or p.w_packed is not w or p.dtype != w.dtype or p.device != w.device:
            p = self._packed = PackedGeGLU.over(w)
        return p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_geglu(x, self.weight, self.plans())

    def extra_repr(self) -> str:
        return f"dim={self.dim}, hidden={self.hidden} (gate/up interleaved)"


def split_state(state: dict, prefix: str, packed: str, gate: str, up: str) -> None:
    """In a state dict: ``<packed>.weight`` -> ``<gate>.weight`` and ``<up>.weight`` (views)."""
    key = prefix + packed + ".weight"
    if key not in state:
        return
    items = list(state.items())
    state.clear()
    for k, v in items:  # in place, keeping the order: the pair where the packed weight was
        if k == key:
            state[prefix + gate + ".weight"], state[prefix + up + ".weight"] = v[0::2], v[1::2]
        else:
            state[k] = v


def join_state(state: dict, prefix: str, packed: str, gate: str, up: str) -> None:
    """The inverse of ``split_state`` (a loaded eager checkpoint becomes the packed parameter)."""
    g, u = prefix + gate + ".weight", prefix + up + ".weight"
    if g in state and u in state and state[g].shape == state[u].shape and state[g].dim() == 2:
        wg, wu = state.pop(g), state.pop(u)
        state[prefix + packed + ".weight"] = torch.stack([wg, wu], dim=1).reshape(2 * wg.shape[0], wg.shape[1])
