"""Host-side cost of one fused GeGLU training step, separate weights (old) vs the packed parameter (new).

    python benchmarks/bench_train_launch.py [--steps 3000] [--repeats 5] [--json OUT]

A step is what a training loop does to the gate/up projection: forward, ``.backward()`` into
``.grad``, an in-place weight update (``add_``, as an optimizer step: it bumps the version, so
the old path re-packs), then the gradients dropped. The Triton kernels are replaced by a stub
that returns at once (as in bench_kernel_launch.py), so what is timed is everything the host
does besides Triton's own launch: the old path's re-pack copies and strided-gradient
AccumulateGrad copies, autograd, allocations, the two backward GEMMs (tiny, fp32 on the CPU).
Both paths run in the same process; the ratio is old / new. On a GPU each stubbed launch adds
Triton's launcher (~25 µs host on the H200: bench.json's ``triton_empty_kernel_cpu_us``) to both.
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
os.environ.pop("TRITON_INTERPRET", None)  # the kernels never run here

import torch  # noqa: E402

from tracetui.kernels import fused, gate_up, geglu, op  # noqa: E402


class Stub:
    def __init__(self):
        self.calls = 0

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, *a, **k):
        self.calls += 1


def stub_kernels() -> Stub:
    s = Stub()
    for mod, names in [(fused, ("geglu_dual_gemm_tma_kernel", "geglu_dual_gemm_kernel", "geglu_interleaved_kernel")),
                       (geglu, ("geglu_interleaved_bwd_kernel",)),
                       (fused, ("_TMA", "_POINTER", "_INTERLEAVE")), (op, ("_BWD",))]:  # the Launchers
        for name in names:
            setattr(mod, name, s)
    return s


def per_step_us(fns: dict, steps: int, repeats: int) -> dict:
    """(median, min) µs per step of each fn, the repeats interleaved (old, new, old, new, ...) so a
    busy spell on the shared machine hits both paths alike."""
    for fn in fns.values():
        for _ in range(200):
            fn()
    runs: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            runs[name].append((time.perf_counter() - t) / steps * 1e6)
    return {name: (statistics.median(r), min(r)) for name, r in runs.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--m", type=int, default=8)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    stub = stub_kernels()
    torch.manual_seed(0)
    m, k, n = args.m, args.k, args.n
    x = torch.randn(m, k)
    dh = torch.randn(m, n)

    wg = torch.randn(n, k, requires_grad=True)
    wu = torch.randn(n, k, requires_grad=True)
    old_packed = fused.PackedGeGLU(wg, wu, path="tma")

    def old():
        fused.fused_geglu(x, wg, wu, old_packed).backward(dh)
        with torch.no_grad():
            wg.add_(0.0), wu.add_(0.0)
        wg.grad = wu.grad = None

    mod = gate_up.GateUpProj(k, n, path="tma")  # through the custom ops tracetui::geglu_mlp(_backward)
    w = mod.weight

    def new():
        mod(x).backward(dh)
        with torch.no_grad():
            w.add_(0.0)
        w.grad = None

    def via_op():  # the same step through the registered op, as under torch.compile or a profiler
        torch.ops.tracetui.geglu_mlp(x, w, True, "tma")[0].backward(dh)
        with torch.no_grad():
            w.add_(0.0)
        w.grad = None

    res = per_step_us({"old: fused_geglu, separate weights (re-pack + strided grads)": old,
                       "new: GateUpProj, packed parameter (plain eager: direct)": new,
                       "new, through the op tracetui::geglu_mlp (compile/profiler)": via_op},
                      args.steps, args.repeats)
    for name, (med, lo) in res.items():
        print(f"{name:64s} {med:7.2f} µs/step (min {lo:.2f})", flush=True)
    packs = old_packed.packs
    assert packs > args.steps and mod.plans().packs == 0 and stub.calls > 0  # the old path re-packed each step
    (o, _), (nw, _), (vo, _) = res.values()
    print(f"ratio old / new: {o / nw:.2f}x  (old re-packed {packs} times, new 0); "
          f"op dispatch / direct: {vo / nw:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": platform.processor() or platform.machine(), "python": platform.python_version(),
            "torch": torch.__version__, "shape": [m, k, n], "steps": args.steps, "repeats": args.repeats,
            "us_per_step_median_min": res, "ratio_old_over_new": o / nw,
            "ratio_op_over_direct": vo / nw}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
