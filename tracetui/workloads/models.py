"""The ladder's modules: nn.Linear, and the GeGLU MLP in eager / compile / triton / fused forms."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

IMPLS = ("eager", "compile", "triton", "fused")
"""Implementations a workload can run as; not every workload has every one (see WORKLOADS)."""


class GeGLU(nn.Module):
    """GeGLU feed-forward block: ``down(gelu_tanh(gate(x)) * up(x))``, no biases."""

    def __init__(self, dim: int, hidden: int, act: str = "eager"):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.act = act
        self._packed = None
        self._packed_key = None

    def packed_gate_up(self) -> torch.Tensor:
        """Gate/up weights packed for the fused kernel, re-packed only when a weight changes."""
        from tracetui.kernels.geglu_gemm import pack_gate_up
        wg, wu = self.gate_proj.weight, self.up_proj.weight
        key = (wg.data_ptr(), wg._version, wu.data_ptr(), wu._version, wg.dtype)
        if self._packed_key != key:
            with torch.no_grad():
                self._packed = pack_gate_up(wg, wu)
            self._packed_key = key
        return self._packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act == "triton":
            from tracetui.kernels.geglu import geglu
            return self.down_proj(geglu(self.gate_proj(x), self.up_proj(x)))
        if self.act == "fused":
            from tracetui.kernels.geglu_gemm import geglu_gemm_packed
            return self.down_proj(geglu_gemm_packed(x, self.packed_gate_up()))
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


@dataclass
class Workload:
    """A runnable rung: its module factory, input shape and the impls it supports."""
    name: str
    sizes: dict
    impls: tuple
    label: str = field(default="")

    def build(self, impl: str, device: str, dtype: torch.dtype) -> tuple[nn.Module, torch.Tensor]:
        s = self.sizes
        if self.name == "linear":
            model: nn.Module = nn.Linear(s["in_features"], s["out_features"], bias=True)
            x = torch.randn(s["batch"], s["in_features"])
        else:
            model = GeGLU(s["dim"], s["hidden"], act=impl if impl in ("triton", "fused") else "eager")
            x = torch.randn(s["batch"], s["seq"], s["dim"])
        model = model.to(device=device, dtype=dtype).eval()
        x = x.to(device=device, dtype=dtype)
        if impl == "compile":
            model = torch.compile(model)
        return model, x


def workloads(**overrides) -> dict[str, Workload]:
    """The ladder with default sizes; ``overrides`` replace sizes of the workloads that have them."""
    lin = {"batch": 1024, "in_features": 32, "out_features": 64}
    mlp = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072}
    for d in (lin, mlp):
        d.update({k: v for k, v in overrides.items() if k in d and v is not None})
    return {
        "linear": Workload("linear", lin, ("eager", "compile"), "linear_fwd"),
        "mlp": Workload("mlp", mlp, IMPLS, "mlp_fwd"),
    }
