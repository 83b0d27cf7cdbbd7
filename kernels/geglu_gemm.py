"""Dual GEMM with a GeGLU epilogue: ``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` in one kernel.

One tile of ``x`` feeds two accumulators (gate and up); the epilogue runs in registers and a single
bf16 store writes the product. Neither projection ever reaches HBM, which is what removes the
gate GEMM's and up GEMM's outputs (2 x [M, H]) and the pointwise kernel that reads them back.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .geglu import SUPPORTED_DTYPES, gelu_tanh_f32

# Configs tried by the autotuner on a GPU: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, stages, warps).
# Two fp32 accumulators of BLOCK_M x BLOCK_N must fit in registers next to the operand tiles.
_CONFIGS = [
    (128, 128, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 8),
    (128, 64, 64, 8, 4, 4),
    (64, 128, 64, 8, 4, 4),
    (128, 128, 32, 8, 4, 8),
    (64, 64, 64, 8, 4, 4),
    (128, 256, 64, 8, 3, 8),
]

INTERPRETER_CONFIG = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2)
"""Small tiles for TRITON_INTERPRET=1 on the CPU, where tile size only costs time."""


@triton.jit
def geglu_dual_gemm_kernel(x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K,
                       sxm, sxk, swn, swk, som,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, UPCAST: tl.constexpr = False):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: neighbouring programs share weight tiles in L2.
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * sxm + offs_k[None, :] * sxk
    wg_ptrs = wg_ptr + offs_n[None, :].to(tl.int64) * swn + offs_k[:, None] * swk
    wu_ptrs = wu_ptr + offs_n[None, :].to(tl.int64) * swn + offs_k[:, None] * swk
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        w_mask = (offs_k[:, None] < k_left) & (offs_n[None, :] < N)
        bg = tl.load(wg_ptrs, mask=w_mask, other=0.0)
        bu = tl.load(wu_ptrs, mask=w_mask, other=0.0)
        if UPCAST:  # the CPU interpreter's dot mis-multiplies 16-bit floats; compute in fp32 there
            a, bg, bu = a.to(tl.float32), bg.to(tl.float32), bu.to(tl.float32)
        acc_g = tl.dot(a, bg, acc_g)
        acc_u = tl.dot(a, bu, acc_u)
        x_ptrs += BLOCK_K * sxk
        wg_ptrs += BLOCK_K * swk
        wu_ptrs += BLOCK_K * swk
    h = gelu_tanh_f32(acc_g) * acc_u
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * som + offs_n[None, :]
    tl.store(out_ptrs, h.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


_autotuned = triton.autotune(
    configs=[triton.Config(dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g), num_stages=s, num_warps=w)
             for bm, bn, bk, g, s, w in _CONFIGS],
    key=["M", "N", "K", "swn"],  # the weight layout changes the best tile
)(geglu_dual_gemm_kernel)


def geglu_gemm(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
               config: dict | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu_tanh(x @ w_gate.T) * (x @ w_up.T)`` for x [..., K] and weights [N, K] (nn.Linear layout).

    ``config`` pins the tile sizes (used under the CPU interpreter); None autotunes on the GPU.
    """
    if x.dtype not in SUPPORTED_DTYPES or w_gate.dtype != x.dtype or w_up.dtype != x.dtype:
        raise ValueError(f"geglu_gemm: x {x.dtype}, w_gate {w_gate.dtype}, w_up {w_up.dtype}: "
                         "all must be one of float32, float16, bfloat16")
    if w_gate.shape != w_up.shape or w_gate.dim() != 2 or x.shape[-1] != w_gate.shape[1]:
        raise ValueError(f"geglu_gemm: x {tuple(x.shape)} does not match weights "
                         f"{tuple(w_gate.shape)} / {tuple(w_up.shape)}")
    if w_gate.stride() != w_up.stride():
        w_gate, w_up = w_gate.contiguous(), w_up.contiguous()
    K = x.shape[-1]
    x2 = x.reshape(-1, K)
    M, N = x2.shape[0], w_gate.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    elif out.shape != (M, N) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"geglu_gemm: out must be contiguous [{M}, {N}] {x.dtype}")
    if M and N:
        args = (x2, w_gate, w_up, out, M, N, K, x2.stride(0), x2.stride(1),
                w_gate.stride(0), w_gate.stride(1), out.stride(0))
        if config is None:
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
            _autotuned[grid](*args)
        else:
            grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
            upcast = os.environ.get("TRITON_INTERPRET") == "1" and x.dtype != torch.float32
            geglu_dual_gemm_kernel[grid](*args, **config, UPCAST=upcast)
    return out.reshape(*x.shape[:-1], N)


def geglu_gemm_reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """float64 reference of the same function."""
    xd = x.double()
    return torch.nn.functional.gelu(xd @ w_gate.double().T, approximate="tanh") * (xd @ w_up.double().T)
