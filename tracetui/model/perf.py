"""FLOPs, bytes and achieved rates of a kernel from its launching op's shapes, against the device peak.

Estimates, stated as such: GEMM FLOPs are exact for mm/addmm/bmm/linear shapes; fused attention
(SDPA, flash, efficient, cuDNN) is compute-bound, its FLOPs from the query/key/value shapes; bytes
are the minimum traffic (each input read once, the output written once).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

DTYPE_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "c10::Float8_e4m3fn": 1,
               "c10::Float8_e5m2": 1, "long int": 8, "int": 4, "bool": 1, "signed char": 1, "unsigned char": 1}

# name fragment -> (dense bf16 TFLOP/s, HBM TB/s), vendor datasheet numbers (leads, not measurements)
KNOWN_GPUS = {
    "H200": (989.0, 4.8), "H100 PCIe": (756.0, 2.0), "H100": (989.0, 3.35), "GH200": (989.0, 4.0),
    "A100-SXM4-80GB": (312.0, 2.04), "A100 80GB PCIe": (312.0, 1.94), "A100": (312.0, 1.56),
    "L40S": (362.0, 0.864), "L4": (121.0, 0.3), "A10G": (70.0, 0.6), "V100": (125.0, 0.9),
    "B200": (2250.0, 8.0), "MI300X": (1307.0, 5.3), "MI250": (362.0, 3.2),
}
"""Peak dense bf16 (fp16 for V100) TFLOP/s and memory TB/s, matched by substring of the device name."""


def peak_for(device_name: str | None) -> tuple[float, float] | None:
    if not device_name:
        return None
    for key in sorted(KNOWN_GPUS, key=len, reverse=True):
        if key in device_name:
            return KNOWN_GPUS[key]
    return None


@dataclass
class Roofline:
    flops: float | None
    bytes: float | None
    seconds: float
    what: str

    @property
    def tflops(self) -> float | None:
        return self.flops / self.seconds / 1e12 if self.flops and self.seconds else None

    @property
    def tbps(self) -> float | None:
        return self.bytes / self.seconds / 1e12 if self.bytes and self.seconds else None


def _elem(types: list, i: int) -> int:
    return DTYPE_BYTES.get(types[i], 2) if i < len(types) and isinstance(types[i], str) else 2


ATTENTION_OPS = {
    # op (without aten::): (index of query, layout, index of is_causal (or custom_mask_type), backward)
    "scaled_dot_product_attention": (0, "BHLD", 5, False),
    "_scaled_dot_product_attention_math": (0, "BHLD", 5, False),
    "_scaled_dot_product_flash_attention": (0, "BHLD", 4, False),
    "_scaled_dot_product_efficient_attention": (0, "BHLD", 6, False),
    "_scaled_dot_product_cudnn_attention": (0, "BHLD", 6, False),
    "_flash_attention_forward": (0, "BLHD", 8, False),
    "_efficient_attention_forward": (0, "BLHD", 9, False),
    "_cudnn_attention_forward": (0, "BHLD", 10, False),
    "_scaled_dot_product_flash_attention_backward": (1, "BHLD", 11, True),
    "_scaled_dot_product_efficient_attention_backward": (1, "BHLD", 11, True),
    "_scaled_dot_product_cudnn_attention_backward": (1, "BHLD", 14, True),
    "_flash_attention_backward": (1, "BLHD", 11, True),
    "_efficient_attention_backward": (1, "BLHD", 14, True),
    "_cudnn_attention_backward": (1, "BHLD", 14, True),
}
"""Fused-attention ops (their signatures in native_functions.yaml, torch 2.11): where the query
sits in the inputs, its layout ([B, H, L, D] for the SDPA ops, [B, L, H, D] for the flash and
efficient kernels' ops), and where is_causal (or the efficient kernel's custom_mask_type) sits."""

ATTN_BACKWARD_FACTOR = 2.5
"""Backward FLOPs over forward: five matmuls (dV, dP, dS·K, dS^T·Q, and S recomputed) against
two, as FlashAttention-2 counts them."""


def attention_flops(op_name: str, args: dict) -> tuple[float, float, str] | None:
    """(FLOPs, minimum bytes, description) of one fused-attention op from its input shapes:
    2·B·H·Lq·Lk·(D + Dv) forward (QKᵀ and PV; 4·B·H·Lq·Lk·D when Dv = D), halved when causal,
    times 2.5 for backward. None when ``op_name`` is not one or its shapes were not recorded."""
    spec = ATTENTION_OPS.get(op_name.split("::")[-1])
    dims = args.get("Input Dims") or []
    if spec is None or not isinstance(dims, list):
        return None
    qi, layout, ci, backward = spec
    try:
        q, k, v = (dims[qi + j] for j in range(3))
        if not all(isinstance(x, list) and len(x) >= 3 and all(isinstance(n, int) for n in x) for x in (q, k, v)):
            return None
        lk = k[1] if layout == "BLHD" else k[-2]
        d, dv = q[-1], v[-1]
        rows = prod(q[:-1])  # B·H·Lq (B·Lq·H in the BLHD layout: the same product)
    except (IndexError, TypeError):
        return None
    concrete = args.get("Concrete Inputs") or []
    causal = ci < len(concrete) and str(concrete[ci]) in ("True", "1", "2")
    flops = 2.0 * rows * lk * (d + dv) * (0.5 if causal else 1.0) * (ATTN_BACKWARD_FACTOR if backward else 1.0)
    e = _elem(args.get("Input type") or [], qi)
    io = prod(q) + prod(k) + prod(v) + rows * dv  # q, k, v read; out written
    what = ("attention backward" if backward else "attention") + (", causal" if causal else "") + \
        " (FLOPs 4·B·H·Lq·Lk·D" + (" × 2.5" if backward else "") + (" ÷ 2" if causal else "") + ")"
    return flops, float(io * e * (2 if backward else 1)), what


def estimate(op_name: str, args: dict, seconds: float) -> Roofline | None:
    """Roofline facts for one kernel launched by ``op_name`` whose args are ``args``."""
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    if not isinstance(dims, list) or not dims or seconds <= 0:
        return None
    shapes = [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]
    base = op_name.split("::")[-1]
    attn = attention_flops(op_name, args)
    if attn is not None:
        return Roofline(attn[0], attn[1], seconds, attn[2])
    try:
        if base in ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm"):
            if base in ("addmm", "baddbmm"):
                a, b = shapes[1], shapes[2]
            elif base == "linear":
                a, w = shapes[0], shapes[1]
                m, k, n = prod(a[:-1]), a[-1], w[0]
                e = _elem(types, 0)
                return Roofline(2.0 * m * k * n, float((m * k + k * n + m * n) * e), seconds, "GEMM")
            else:
                a, b = shapes[0], shapes[1]
            batch = prod(a[:-2]) if len(a) > 2 else 1
            m, k, n = a[-2], a[-1], b[-1]
            e = _elem(types, 0)
            return Roofline(2.0 * batch * m * k * n, float(batch * (m * k + k * n + m * n) * e), seconds, "GEMM")
        tensors = [(prod(s), _elem(types, i)) for i, s in enumerate(shapes) if s]
        if not tensors:
            return None
        out_n = max(n for n, _ in tensors)
        out_e = tensors[0][1]
        # Inputs read once, output written once (Inductor's in_out buffer is both, so this holds).
        moved = sum(n * e for n, e in tensors) + out_n * out_e
        return Roofline(None, float(moved), seconds, "elementwise (min. bytes)")
    except (IndexError, TypeError, ValueError, OverflowError):  # shapes no kernel ran on
        return None
