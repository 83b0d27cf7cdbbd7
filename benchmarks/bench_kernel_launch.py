"""Host-side cost of the fused GeGLU's launch path, old vs new, on the CPU with the kernel stubbed.

    python benchmarks/bench_kernel_launch.py [--calls 20000] [--repeats 7] [--json OUT]

What a call costs the CPU *besides* Triton's own launch: argument checks, weight packing or its
cache check, the output allocation, descriptors, dispatch. The Triton kernels are replaced by a
stub whose ``kernel[grid](*args, **kwargs)`` returns at once, so both paths are timed with the
same zero-cost "launch" (on a GPU, Triton's launcher then adds its own binder + driver time, and
host TMA descriptors are also encoded there per launch: bench.py measures that whole cost).

Paths, on tiny bf16 CPU tensors so allocations and copies cost little next to Python:
- ``old: geglu_gemm (packs per call)``: the unpacked-weight API as shipped before this branch.
- ``old: module path, TMA``: the bundled module's old fused forward: its packed-weight cache key,
  then ``geglu_gemm_packed(..., tma=True)``, which builds three host TensorDescriptors per call.
- ``new: fused_geglu``: ``PackedGeGLU.sync`` + call (the module's new path), TMA plan,
  descriptors built on the device; ``new: ... out=`` the same into a preallocated output.
- ``floor``: the stub launch with the same arguments plus ``torch.empty`` of the output.
Baselines are measured in the same run; the ratio is old / new.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.pop("TRITON_INTERPRET", None)  # the kernels never run here; time the GPU code path

import torch  # noqa: E402

from tracetui.kernels import fused, geglu, geglu_gemm  # noqa: E402


class StubKernel:
    """Stands in for a Triton kernel: ``stub[grid](*args, **kwargs)`` does nothing."""

    def __init__(self):
        self.calls = 0

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, *args, **kwargs):
        self.calls += 1


def stub_kernels() -> StubKernel:
    stub = StubKernel()
    for mod, names in [(geglu_gemm, ("geglu_dual_gemm_tma_kernel", "geglu_dual_gemm_kernel", "_autotuned")),
                       (fused, ("geglu_dual_gemm_tma_kernel", "geglu_dual_gemm_kernel", "_autotuned",
                                "geglu_interleaved_kernel")),
                       (geglu, ("geglu_interleaved_kernel",))]:
        for name in names:
            setattr(mod, name, stub)
    return stub


def per_call_us(fn, calls: int, repeats: int) -> tuple[float, float]:
    """(median, min) over ``repeats`` of the µs per call of ``calls`` back-to-back calls."""
    for _ in range(min(calls, 500)):
        fn()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(runs), min(runs)


def old_module_path(wg, wu, x):
    """The bundled GeGLU's fused forward before this branch (its dual-GEMM part), verbatim."""
    state = {"key": None, "packed": None}

    def call():
        key = (wg.data_ptr(), wg._version, wu.data_ptr(), wu._version, wg.dtype)
        if state["key"] != key:
            with torch.no_grad():
                state["packed"] = geglu_gemm.pack_gate_up(wg, wu)
            state["key"] = key
        return geglu_gemm.geglu_gemm_packed(x, state["packed"], tma=True)
    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    stub = stub_kernels()
    torch.manual_seed(0)
    dt = torch.bfloat16
    m, k, n = args.m, args.k, args.n
    x = torch.randn(m, k, dtype=dt)
    wg, wu = torch.randn(n, k, dtype=dt), torch.randn(n, k, dtype=dt)
    packed = fused.PackedGeGLU(wg, wu, path="tma")
    out = torch.empty(m, n, dtype=dt)
    pre_out = torch.empty(m, n, dtype=dt)

    def floor():
        o = torch.empty((m, n), dtype=dt)
        stub[(4,)](x, packed.w_packed, o, m, n, k, k, 2 * n, n, o, 0, BLOCK_M=128, BLOCK_N=128,
                   BLOCK_K=64, GROUP_M=8, NUM_SMS=4, FAST_TANH=True, UPCAST=False, DEVICE_DESC=True,
                   SAVE_PRE=False, FLATTEN=True, WARP_SPEC=False, num_stages=3, num_warps=8)

    paths = {
        "old: geglu_gemm (packs per call)": lambda: geglu_gemm.geglu_gemm(x, wg, wu),
        "old: module path, TMA (host descriptors per call)": old_module_path(wg, wu, x),
        "new: fused_geglu (sync + plan, device descriptors)": lambda: fused.fused_geglu(x, wg, wu, packed),
        "new: fused_geglu, out= preallocated": lambda: fused.fused_geglu(x, wg, wu, packed, out=pre_out),
        "new: PackedGeGLU call alone (no weight check)": lambda: packed(x, out=out),
        "floor: torch.empty + stub launch": floor,
    }
    with torch.no_grad():
        res = {}
        for name, fn in paths.items():
            res[name] = per_call_us(fn, args.calls, args.repeats)
            print(f"{name:55s} {res[name][0]:7.2f} µs/call (min {res[name][1]:.2f})", flush=True)
    assert packed.packs == 1 and len(packed.plans) == 1 and stub.calls > 0
    new = res["new: fused_geglu (sync + plan, device descriptors)"][0]
    ratios = {name: res[name][0] / new for name in paths if name.startswith("old")}
    for name, r in ratios.items():
        print(f"ratio {name} / new fused_geglu: {r:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": platform.processor() or platform.machine(), "python": platform.python_version(),
            "torch": torch.__version__, "shape": [m, k, n], "calls": args.calls, "repeats": args.repeats,
            "us_per_call_median_min": res, "ratios_old_over_new": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
