"""FLOPs, bytes and achieved rates of a kernel from its launching op's shapes, against the device peak.

Estimates, stated as such: GEMM FLOPs are exact for mm/addmm/bmm/linear shapes; bytes are the
minimum traffic (each input read once, the output written once).
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


def estimate(op_name: str, args: dict, seconds: float) -> Roofline | None:
    """Roofline facts for one kernel launched by ``op_name`` whose args are ``args``."""
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    if not isinstance(dims, list) or not dims or seconds <= 0:
        return None
    shapes = [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]
    base = op_name.split("::")[-1]
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
