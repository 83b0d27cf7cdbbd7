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


# --- Backward and the interleaved (packed) layout -------------------------------------------
# The fused MLP keeps gate and up pre-activations as one [M, 2N] tensor whose columns alternate
# gate/up (the dual GEMM's raw accumulator, see geglu_gemm.pack_gate_up): flat element i of the
# [M, N] result reads gate at 2i and up at 2i+1, so one contiguous 2*BLOCK load feeds BLOCK outputs.

@triton.jit
def gelu_tanh_and_grad_f32(x):
    """(gelu_tanh(x), d gelu_tanh / dx) in float32, sharing one exp:
    gelu = 0.5x(1+t), gelu' = 0.5(1+t) + 0.5x(1-t^2) * c(1 + 3a x^2), t = tanh(c(x + a x^3))."""
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0
    gelu = 0.5 * x * (1.0 + t)
    dgelu = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (0.7978845608028654 * (1.0 + 0.134145 * x * x))
    return gelu, dgelu


@triton.jit
def _geglu_bwd_block(dh, g, u):
    gelu, dgelu = gelu_tanh_and_grad_f32(g)
    return dh * u * dgelu, dh * gelu


@triton.jit
def geglu_bwd_kernel(dout_ptr, gate_ptr, up_ptr, dgate_ptr, dup_ptr, n, n_full, BLOCK: tl.constexpr):
    """dgate = dout * up * gelu'(gate), dup = dout * gelu(gate): 3 reads + 2 writes, one pass."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if pid < n_full:
        dh = tl.load(dout_ptr + offs).to(tl.float32)
        g = tl.load(gate_ptr + offs).to(tl.float32)
        u = tl.load(up_ptr + offs).to(tl.float32)
        dg, du = _geglu_bwd_block(dh, g, u)
        tl.store(dgate_ptr + offs, dg.to(dgate_ptr.dtype.element_ty))
        tl.store(dup_ptr + offs, du.to(dup_ptr.dtype.element_ty))
    else:
        mask = offs < n
        dh = tl.load(dout_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dg, du = _geglu_bwd_block(dh, g, u)
        tl.store(dgate_ptr + offs, dg.to(dgate_ptr.dtype.element_ty), mask=mask)
        tl.store(dup_ptr + offs, du.to(dup_ptr.dtype.element_ty), mask=mask)


@triton.jit
def geglu_interleaved_kernel(pre_ptr, out_ptr, n, n_full, BLOCK: tl.constexpr):
    """out[i] = gelu_tanh(pre[2i]) * pre[2i+1]: the pointwise half of the cuBLAS path."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    offs2 = pid.to(tl.int64) * (2 * BLOCK) + tl.arange(0, 2 * BLOCK)
    if pid < n_full:
        p = tl.load(pre_ptr + offs2).to(tl.float32)
        g, u = tl.split(tl.reshape(p, (BLOCK, 2)))
        tl.store(out_ptr + offs, (gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty))
    else:
        p = tl.load(pre_ptr + offs2, mask=offs2 < 2 * n, other=0.0).to(tl.float32)
        g, u = tl.split(tl.reshape(p, (BLOCK, 2)))
        tl.store(out_ptr + offs, (gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def geglu_interleaved_bwd_kernel(dout_ptr, pre_ptr, dpre_ptr, n, n_full, BLOCK: tl.constexpr):
    """dpre[2i], dpre[2i+1] = dgate, dup of element i: reads dout and the saved pre-activations
    once, writes the [M, 2N] gradient the backward GEMMs take whole (dx = dpre @ Wp.T, one GEMM)."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    offs2 = pid.to(tl.int64) * (2 * BLOCK) + tl.arange(0, 2 * BLOCK)
    if pid < n_full:
        dh = tl.load(dout_ptr + offs).to(tl.float32)
        g, u = tl.split(tl.reshape(tl.load(pre_ptr + offs2).to(tl.float32), (BLOCK, 2)))
        dg, du = _geglu_bwd_block(dh, g, u)
        tl.store(dpre_ptr + offs2, tl.reshape(tl.join(dg, du), (2 * BLOCK,)).to(dpre_ptr.dtype.element_ty))
    else:
        mask2 = offs2 < 2 * n
        dh = tl.load(dout_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        g, u = tl.split(tl.reshape(tl.load(pre_ptr + offs2, mask=mask2, other=0.0).to(tl.float32), (BLOCK, 2)))
        dg, du = _geglu_bwd_block(dh, g, u)
        tl.store(dpre_ptr + offs2, tl.reshape(tl.join(dg, du), (2 * BLOCK,)).to(dpre_ptr.dtype.element_ty),
                 mask=mask2)


def _contig(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def geglu_backward(dout: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
                   block: int = 1024, num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """(dgate, dup) of ``gelu_tanh(gate) * up`` given its output gradient, in one kernel."""
    _check(gate, up)
    if dout.shape != gate.shape or dout.dtype != gate.dtype or dout.device != gate.device:
        raise ValueError(f"geglu: dout {tuple(dout.shape)} {dout.dtype} must match gate {tuple(gate.shape)} "
                         f"{gate.dtype} on {gate.device}")
    dout, gate, up = _contig(dout), _contig(gate), _contig(up)
    dgate, dup = torch.empty_like(gate), torch.empty_like(up)
    n = gate.numel()
    if n:
        geglu_bwd_kernel[(triton.cdiv(n, block),)](dout, gate, up, dgate, dup, n, n // block,
                                                   BLOCK=block, num_warps=num_warps)
    return dgate, dup


def _check_interleaved(pre: torch.Tensor, other: torch.Tensor, what: str) -> None:
    if pre.dtype not in SUPPORTED_DTYPES or other.dtype != pre.dtype:
        raise ValueError(f"geglu: pre-activations {pre.dtype} and {what} {other.dtype} must share a "
                         "float32/float16/bfloat16 dtype")
    if pre.dim() == 0 or pre.shape[-1] != 2 * other.shape[-1] or pre.shape[:-1] != other.shape[:-1]:
        raise ValueError(f"geglu: pre-activations {tuple(pre.shape)} must be {what} {tuple(other.shape)} "
                         "with the last dimension doubled")
    if not (pre.is_contiguous() and other.is_contiguous()):
        raise ValueError("geglu: interleaved tensors must be contiguous")


def geglu_interleaved(pre: torch.Tensor, out: torch.Tensor, block: int = 1024, num_warps: int = 4) -> torch.Tensor:
    """``out = gelu_tanh(pre[..., 0::2]) * pre[..., 1::2]`` for contiguous ``pre`` [..., 2N] -> ``out`` [..., N]."""
    _check_interleaved(pre, out, "out")
    n = out.numel()
    if n:
        geglu_interleaved_kernel[(triton.cdiv(n, block),)](pre, out, n, n // block, BLOCK=block, num_warps=num_warps)
    return out


def geglu_interleaved_backward(dout: torch.Tensor, pre: torch.Tensor, block: int = 1024,
                               num_warps: int = 4) -> torch.Tensor:
    """The gradient of ``geglu_interleaved`` w.r.t. ``pre``: [..., 2N], columns alternating dgate/dup."""
    dout = _contig(dout)
    _check_interleaved(pre, dout, "dout")
    dpre = torch.empty_like(pre)
    n = dout.numel()
    if n:
        geglu_interleaved_bwd_kernel[(triton.cdiv(n, block),)](dout, pre, dpre, n, n // block,
                                                               BLOCK=block, num_warps=num_warps)
    return dpre
