"""GeGLU pointwise kernel: ``gelu_tanh(gate) * up`` in one pass over memory.

This is the rung of the ladder that does what Inductor's ``triton_poi_fused_..._gelu_mul`` kernel
does, without Dynamo: read ``gate`` and ``up`` once, write the product once.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""dtypes the kernel accepts; anything else is refused with a ValueError."""

_SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def gelu_tanh_f32(x):
    """gelu(x, approximate='tanh') in float32, written as x * sigmoid(2z) == 0.5x(1+tanh z)."""
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return x / (1.0 + tl.exp(-2.0 * z))


@triton.jit
def gelu_tanh_fast_f32(x):
    """Same, with the GPU's one-instruction ``tanh.approx.f32`` (max rel. error ~2^-11, under
    bf16's 2^-8): the exact form's exp + IEEE divide cost ~3x the instructions in a GEMM epilogue.
    Not for the CPU interpreter, which cannot run inline PTX."""
    z = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x)
    t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [z], dtype=tl.float32,
                                  is_pure=True, pack=1)
    return 0.5 * x * (1.0 + t)


@triton.jit
def geglu_kernel(gate_ptr, up_ptr, out_ptr, n, n_full, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if pid < n_full:  # whole blocks: no mask, so loads and stores stay 16-byte vectors at any n
        g = tl.load(gate_ptr + offs).to(tl.float32)
        u = tl.load(up_ptr + offs).to(tl.float32)
        tl.store(out_ptr + offs, (gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n
        g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def geglu_strided_kernel(gate_ptr, up_ptr, out_ptr, rows, cols, sgr, sgc, sur, suc,
              BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (r < rows) & (c < cols)
    g = tl.load(gate_ptr + r * sgr + c * sgc, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + r * sur + c * suc, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + r * cols + c, (gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


def _check(gate: torch.Tensor, up: torch.Tensor) -> None:
    if gate.shape != up.shape:
        raise ValueError(f"geglu: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape")
    if gate.dtype != up.dtype:
        raise ValueError(f"geglu: gate is {gate.dtype} but up is {up.dtype}")
    if gate.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"geglu: dtype {gate.dtype} unsupported (use float32, float16 or bfloat16)")
    if gate.device != up.device:
        raise ValueError(f"geglu: gate on {gate.device} but up on {up.device}")


def geglu(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor | None = None,
          block: int = 1024, num_warps: int = 4) -> torch.Tensor:
    """Return ``gelu(gate, approximate='tanh') * up`` as a contiguous tensor of gate's dtype.

    ``out`` (contiguous, same shape and dtype) is written in place when given.
    """
    _check(gate, up)
    if out is None:
        out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    elif out.shape != gate.shape or out.dtype != gate.dtype or not out.is_contiguous():
        raise ValueError("geglu: out must be contiguous with gate's shape and dtype")
    n = gate.numel()
    if n == 0:
        return out
    if gate.is_contiguous() and up.is_contiguous():
        # One launch: whole blocks run unmasked, only the ragged last block (if any) is masked.
        geglu_kernel[(triton.cdiv(n, block),)](gate, up, out, n, n // block, BLOCK=block, num_warps=num_warps)
        return out
    # Strided inputs (e.g. halves of a fused gate/up projection): a 2-D view, no copy when possible.
    cols = gate.shape[-1] if gate.dim() else 1
    g2, u2 = gate.reshape(-1, cols), up.reshape(-1, cols)
    rows = g2.shape[0]
    br, bc = 16, 128
    grid = (triton.cdiv(rows, br), triton.cdiv(cols, bc))
    geglu_strided_kernel[grid](g2, u2, out, rows, cols, g2.stride(0), g2.stride(1), u2.stride(0), u2.stride(1),
                    BLOCK_R=br, BLOCK_C=bc, num_warps=4)
    return out


def geglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """float64 reference of the same function."""
    return torch.nn.functional.gelu(gate.double(), approximate="tanh") * up.double()
