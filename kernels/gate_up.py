"""The fused GeGLU's trainable form: gate and up live packed as ONE parameter, so training copies nothing.

``GateUpProj`` holds one [2N, K] parameter whose rows alternate gate/up (nn.Linear's layout of
the interleaved projection). The fused kernels read it in place (``PackedGeGLU.over``): no
per-step re-pack when the optimizer changes it. Gate and up are views of it (``.gate``,
``.up``), and ``GeGLU``'s state dict shows them as ``gate_proj.weight`` / ``up_proj.weight``
(``split_state`` / ``join_state``), so checkpoints move between the eager and fused forms.

Forward and backward are the custom ops of ``op.py`` (``tracetui::geglu_mlp`` and
``tracetui::geglu_mlp_backward``), so torch.compile and CUDA graphs capture them. Backward: one pointwise kernel turns the output gradient and the saved
interleaved pre-activations into the interleaved [M, 2N] gradient (copy speed on the H100),
then two cuBLAS GEMMs: dx = dpre @ W and dW = dpre.T @ x. dW comes out [2N, K] contiguous, the
parameter's own layout, so autograd's AccumulateGrad takes it as the gradient (no copy).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tracetui.kernels.fused import PackedGeGLU
from tracetui.kernels.op import fused_gate_up, plans_for


class GateUpProj(nn.Module):
    """The gate and up projections of a GeGLU as one interleaved [2*hidden, dim] parameter,
    applied with the GeGLU epilogue: ``forward(x) = gelu_tanh(x @ gate.T) * (x @ up.T)``.
    Initialised like two nn.Linear(dim, hidden) (uniform in +-1/sqrt(dim)). ``path`` forces one of
    ``fused.PATHS`` instead of the rule table (tests, bench)."""

    def __init__(self, dim: int, hidden: int, device=None, dtype=None, path: str | None = None):
        super().__init__()
        self.dim, self.hidden = dim, hidden
        self.weight = nn.Parameter(torch.empty((2 * hidden, dim), device=device, dtype=dtype))
        bound = 1 / math.sqrt(dim) if dim else 0.0
        nn.init.uniform_(self.weight, -bound, bound)
        self.path = path

    @property
    def gate(self) -> torch.Tensor:
        """The gate projection's weight [hidden, dim]: a view (rows 0, 2, 4, ...) of ``weight``."""
        return self.weight[0::2]

    @property
    def up(self) -> torch.Tensor:
        """The up projection's weight [hidden, dim]: a view (rows 1, 3, 5, ...) of ``weight``."""
        return self.weight[1::2]

    def plans(self) -> PackedGeGLU:
        """The launch plans the op uses for this parameter (shared by every weight of its shape,
        dtype and device; read in place)."""
        return plans_for(self.weight, self.path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_gate_up(x, self.weight, self.path)

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
