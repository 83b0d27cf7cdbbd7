"""GPU benchmark of the GeGLU kernels: correctness first, then timings against the floors.

Run on the GPU machine in one call: ``python -m tracetui.kernels.bench [--json OUT.json] [--quick]``
(the whole device session: ``bash kernels/h200_kernels_session.sh``). Every GPU timing is the
median of ``triton.testing.do_bench`` (CUDA events, no CUDA graphs unless a column says so); the
copy bandwidth and the bf16 matmul rate are measured in the same run and used as the floors.

Next to each GPU time: the CPU launch cost, ``cpu_us`` = wall µs per call of a tight loop of
calls with no synchronisation (what the host spends issuing one call), and ``wall_us`` = the same
loop's time including one final synchronisation, divided by the count (max of host and GPU rate).

Peers at every shape: eager, ``torch.compile`` in modes default, max-autotune-no-cudagraphs and
max-autotune, cuBLAS + our pointwise kernel (``triton``), the fused path as shipped before issue
26 (``fused_v5``: host descriptors per call) and the fused path through ``PackedGeGLU``
(``fused``). Training (forward + backward, no optimizer) is compared the same way at the train
shapes. Each impl also runs in its other host modes (issue 42): graphed (``*_graph`` forward,
``*_graphed`` training, CUDA graphs) and, for fused, compiled (``fused_compile_*``: the
``tracetui::geglu_mlp`` op inside a compiled module); the report compares best modes. ``--cpu-check`` runs the CPU-checkable parts (argument parsing, the sweep table, the
dispatch choices, every table's code at a tiny shape, correctness) under TRITON_INTERPRET=1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tracetui.kernels.bench_report import exit_code, summary
from tracetui.kernels.fused import CUBLAS_MAX_M, PATHS, POINTER_MAX_M, Case, PackedGeGLU, choose
from tracetui.kernels.gate_up import GateUpProj
from tracetui.kernels.geglu import geglu, geglu_interleaved_backward, geglu_reference
from tracetui.kernels.geglu_gemm import (INTERPRETER_CONFIG, TMA_CONFIG, _autotuned, _tma_ok, geglu_gemm, geglu_gemm_packed,
                                         geglu_gemm_reference, pack_gate_up)
from tracetui.workloads.models import GeGLU

torch._dynamo.config.cache_size_limit = 256

SWEEP = [(8192, 768, 3072), (512, 768, 2048), (2048, 768, 3072), (16384, 768, 8192), (4096, 1024, 4096),
         (8192, 768, 8192), (16384, 768, 3072), (16384, 1024, 2048), (1000, 768, 3000), (64, 768, 3072)]
"""(batch·seq, dim, hidden). The first four are issue 26's table; m=64 calibrates the cuBLAS rule."""
QUICK = SWEEP[:3]
"""--quick: the default shape and the two small shapes issue 26 says the fused path lost."""
TRAIN_SWEEP = [(8192, 768, 3072), (2048, 768, 3072), (512, 768, 2048)]
"""Shapes of the fwd+bwd comparison (weights' gradients; x is data, as in the mlp --train step)."""
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "max-autotune")
"""torch.compile modes timed as peers; max-autotune is the only one with CUDA graphs."""
FUSED_COMPILE_MODES = ("default", "reduce-overhead")
"""Modes of the "fused + compile" rung (our custom op inside a compiled module): Inductor around the
op, and the same with CUDA graphs (cudagraph trees). max-autotune would only tune the down
projection's GEMM, at ~10x the compile time."""
GRAPHED = ("eager", "triton", "fused")
"""Impls also timed as one CUDA graph per step (``torch.cuda.make_graphed_callables``: the
"graphed" host mode; the "fused + CUDA graphs" rung)."""
CPU_SHAPE = (37, 24, 40)
"""--cpu-check runs every table once at this (awkward, tiny) shape under the interpreter."""

DEV = "cuda"
V5 = True
"""Time the pre-issue-26 path (``fused_v5``, autotuned per shape: ~10 s of compiles each); --no-v5 skips it."""


def packed(wg, wu, path=None):
    """PackedGeGLU as the bench uses it (the pointer path runs geglu_gemm.POINTER_CONFIG, fitted)."""
    return PackedGeGLU(wg, wu, path=path)


def log(*a):
    print(*a, flush=True)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def bench(fn) -> float:
    """Median µs of fn over ~200 ms of repeats (on the CPU check: the median of 3 calls)."""
    if DEV != "cuda":
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e6)
        return sorted(ts)[1]
    return triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median") * 1e3


def launch_cost(fn, calls: int = 200) -> dict:
    """CPU µs per call of ``calls`` calls with no sync in between; wall µs including one sync."""
    calls = calls if DEV == "cuda" else 2
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return {"cpu_us": (t1 - t0) / calls * 1e6, "wall_us": (t2 - t0) / calls * 1e6}


def _gpu_times(res: dict) -> str:
    """A shape's GPU µs per peer for the log line (host-side ``_cpu_us``/``_wall_us`` left out)."""
    return ", ".join(f"{k[:-3]}={v:.1f}" for k, v in res.items()
                     if k.endswith("_us") and not k.endswith(("_cpu_us", "_wall_us")))


def rel_err(out, ref) -> float:
    return ((out.double() - ref).norm() / ref.norm()).item()


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def floors() -> dict:
    n = 1 << 30  # 1 GiB each way: far past the 60 MB L2
    src = torch.randn(n // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    us = bench(lambda: dst.copy_(src))
    copy_tbs = 2 * n / (us * 1e-6) / 1e12
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    us_mm = bench(lambda: a @ b)
    mm_tflops = 2 * 8192 ** 3 / (us_mm * 1e-6) / 1e12
    del src, dst, a, b
    return {"copy_TBps": copy_tbs, "matmul_bf16_TFLOPs": mm_tflops}


@triton.jit
def _noop_kernel(a, b, c, M, N, K, s0, s1, s2, p, sp, BLOCK: tl.constexpr, FLAG: tl.constexpr):
    pass


def launch_floors() -> dict:
    """Host µs per call of the launch machinery alone (tight loop, no sync): an empty Triton
    kernel with the fused kernel's argument count (Triton's own binder + launcher: what the
    fused path cannot go below without bypassing JITFunction.run), one small cuBLAS GEMM through
    F.linear, and torch.empty. Read the fused path's cpu_us against these."""
    x = randn(64, 64)
    w = randn(64, 64)
    grid = (1,)
    return {
        "triton_empty_kernel_cpu_us": launch_cost(
            lambda: _noop_kernel[grid](x, w, x, 64, 64, 64, 64, 64, 64, x, 0, BLOCK=128, FLAG=True))["cpu_us"],
        "linear_small_cpu_us": launch_cost(lambda: F.linear(x, w))["cpu_us"],
        "torch_empty_cpu_us": launch_cost(lambda: torch.empty((64, 64), device=DEV))["cpu_us"],
    }


def gelu64(g):
    return 0.5 * g * (1 + torch.tanh(0.7978845608028654 * (g + 0.044715 * g ** 3)))


def dgelu64(g):
    t = torch.tanh(0.7978845608028654 * (g + 0.044715 * g ** 3))
    return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * g * g)


def _case(rows: list, kernel: str, dt, shape, fn) -> None:
    """One correctness case: ``fn()`` -> (rel_err, ok). One that raises is a FAIL row with the
    error (the H100's fp32 OutOfResources was a crash before any table printed)."""
    try:
        e, ok = fn()
        rows.append({"kernel": kernel, "dtype": str(dt), "shape": shape, "rel_err": e, "ok": bool(ok)})
    except Exception as exc:  # noqa: BLE001 - any failure is a result
        msg = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        rows.append({"kernel": kernel, "dtype": str(dt), "shape": shape, "rel_err": float("nan"), "ok": False,
                     "error": msg})
        log(f"check {kernel} {dt} {shape}: FAIL {msg}")


def _pointwise_cases(rows, dt, shape, tol) -> None:
    g, u = randn(*shape, dtype=dt), randn(*shape, dtype=dt)

    def fwd():
        out = torch.full(shape, float("nan"), device=DEV, dtype=dt)
        geglu(g, u, out=out)
        e = rel_err(out, geglu_reference(g, u))
        return e, not out.isnan().any().item() and e <= tol

    def bwd():
        dh = randn(*shape, dtype=dt)
        pre = torch.stack([g, u], dim=-1).reshape(*shape[:-1], 2 * shape[-1])
        dpre = geglu_interleaved_backward(dh, pre)
        g64, u64, dh64 = g.double(), u.double(), dh.double()
        e = max(rel_err(dpre[..., 0::2], dh64 * u64 * dgelu64(g64)), rel_err(dpre[..., 1::2], dh64 * gelu64(g64)))
        return e, e <= tol
    _case(rows, "geglu", dt, shape, fwd)
    _case(rows, "geglu backward (dgate, dup)", dt, shape, bwd)


def _gemm_cases(rows, dt, m, k, n, tol, v5: bool) -> None:
    x = randn(m, k, dtype=dt)
    wg, wu = randn(n, k, dtype=dt) / k ** 0.5, randn(n, k, dtype=dt) / k ** 0.5
    ref = geglu_gemm_reference(x, wg, wu)
    x64 = x.double()

    def v5_path():
        out = torch.full((m, n), float("nan"), device=DEV, dtype=dt)
        geglu_gemm(x, wg, wu, out=out)
        e = rel_err(out, ref)
        return e, not out.isnan().any().item() and e <= tol

    def packed_path(path):
        p = packed(wg, wu, path)
        out = torch.full((m, n), float("nan"), device=DEV, dtype=dt)
        pre = torch.full((m, 2 * n), float("nan"), device=DEV, dtype=dt)
        p(x, out=out, pre=pre)
        e = max(rel_err(out, ref), rel_err(pre[:, 0::2], x64 @ wg.double().T), rel_err(pre[:, 1::2], x64 @ wu.double().T))
        return e, not out.isnan().any().item() and e <= tol

    def training(compile_backend=None):  # the packed parameter's forward and gradients against float64
        mod = GateUpProj(k, n).to(DEV, dt)
        with torch.no_grad():
            mod.weight[0::2], mod.weight[1::2] = wg, wu
        xr = x.clone().requires_grad_()
        call = mod if compile_backend is None else torch.compile(mod, backend=compile_backend, fullgraph=True,
                                                                  dynamic=False)
        h = call(xr)
        dh = randn(m, n, dtype=dt)
        h.backward(dh)
        g64, u64, dh64 = x64 @ wg.double().T, x64 @ wu.double().T, dh.double()
        dg, du = dh64 * u64 * dgelu64(g64), dh64 * gelu64(g64)
        gw = mod.weight.grad
        errs = [rel_err(h, gelu64(g64) * u64), rel_err(xr.grad, dg @ wg.double() + du @ wu.double()),
                rel_err(gw[0::2], dg.T @ x64), rel_err(gw[1::2], du.T @ x64)]
        return max(errs), max(errs) <= 2 * tol
    if v5 and DEV == "cuda":
        _case(rows, "geglu_gemm (v5 path)", dt, (m, k, n), v5_path)
    for path in (None,) + PATHS:
        if path == "tma" and DEV == "cuda" and (dt == torch.float32 or (k * 2) % 16 or (n * 2) % 16
                                                or torch.cuda.get_device_capability()[0] < 9):
            continue  # a layout TMA cannot take: the forced path refuses it
        _case(rows, f"PackedGeGLU {path or 'dispatch'}", dt, (m, k, n), lambda path=path: packed_path(path))
    _case(rows, "GateUpProj train: h, dx, dW", dt, (m, k, n), training)
    # the custom op (tracetui::geglu_mlp) inside a compiled module: one graph (fullgraph), same numbers
    _case(rows, "GateUpProj train, torch.compile (aot_eager)", dt, (m, k, n), lambda: training("aot_eager"))


def check_correctness(small: bool = False) -> list[dict]:
    """Every kernel and launch path against float64, inputs fresh, outputs poisoned with NaN, in
    every dtype, at m = 1, 37 and 64 among others. Only the v5 path (autotuned pointer kernel)
    is checked in bf16 alone. A case that raises is a FAIL row; the check always finishes."""
    rows = []
    tol = {torch.bfloat16: 1e-2, torch.float16: 1e-2, torch.float32: 1e-5 if DEV != "cuda" else 1e-2}
    # fp32 operands go through tf32 tensor cores in tl.dot on the GPU: ~1e-3 is its floor, not 1e-5
    dtypes = (torch.bfloat16, torch.float32) if small else (torch.bfloat16, torch.float16, torch.float32)
    pw_shapes = [(7, 13), (37, 40)] if small else [(8192, 3072), (1000, 3001), (7, 13), (3, 129, 771)]
    mm_shapes = [(37, 24, 40), (1, 24, 40), (64, 24, 40)] if small else [
        (8192, 768, 3072), (1000, 768, 3000), (129, 200, 77), (4096, 1024, 8192), (64, 768, 3072),
        (37, 768, 3072), (1, 768, 3072)]
    for dt in dtypes:
        for shape in pw_shapes:
            _pointwise_cases(rows, dt, shape, tol[dt])
        for (m, k, n) in mm_shapes:
            _gemm_cases(rows, dt, m, k, n, tol[dt], v5=V5 and dt == torch.bfloat16)
    return rows


def pointwise_table(fl: dict, blocks: bool) -> list[dict]:
    rows = []
    shapes = [(8192, 3072), (4096, 8192), (16384, 2048), (1000, 3000), (8191, 3071), (333, 12345), (2048, 3072)]
    for shape in shapes:
        g = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        u = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        nbytes = 3 * g.numel() * 2
        eager = lambda: F.gelu(g, approximate="tanh") * u
        comp = torch.compile(lambda a, b: F.gelu(a, approximate="tanh") * b, dynamic=False)
        comp(g, u)
        src = torch.randn(3 * g.numel() // 2, device="cuda", dtype=torch.bfloat16)  # same bytes as a copy
        dst = torch.empty_like(src)
        res = {"shape": shape, "bytes": nbytes, "floor_us": nbytes / (fl["copy_TBps"] * 1e12) * 1e6,
               "copy_same_bytes_us": bench(lambda: dst.copy_(src)),
               "eager_us": bench(eager), "inductor_us": bench(lambda: comp(g, u)),
               "triton_us": bench(lambda: geglu(g, u))}
        if blocks:
            for blk, w in [(1024, 4), (4096, 8), (8192, 16)]:
                res[f"triton_b{blk}_w{w}_us"] = bench(lambda: geglu(g, u, block=blk, num_warps=w))
        rows.append(res)
        log(f"pointwise {shape}: " + ", ".join(f"{k}={v:.1f}" for k, v in res.items() if k.endswith("_us")))
    return rows


def backward_pointwise(m: int, h: int) -> dict:
    """The fused backward's pointwise kernel alone (reads dout + interleaved pre, writes dpre)
    against eager's and Inductor's kernels for the same dgate/dup, and a copy of the same bytes."""
    dt = torch.bfloat16
    g, u, dh = randn(m, h, dtype=dt), randn(m, h, dtype=dt), randn(m, h, dtype=dt)
    pre = torch.stack([g, u], dim=-1).reshape(m, 2 * h)

    def formula(g, u, dh):
        gf = g.float()
        t = torch.tanh(0.7978845608028654 * (gf + 0.044715 * gf ** 3))
        dgelu = 0.5 * (1 + t) + 0.5 * gf * (1 - t * t) * 0.7978845608028654 * (1 + 0.134145 * gf * gf)
        return (dh * u * dgelu).to(dt), (dh * 0.5 * gf * (1 + t)).to(dt)
    res = {"shape": (m, h), "bytes": 5 * m * h * 2,
           "fused_bwd_us": bench(lambda: geglu_interleaved_backward(dh, pre)),
           "eager_bwd_us": bench(lambda: formula(g, u, dh))}
    if DEV == "cuda":
        comp = torch.compile(formula, dynamic=False)
        comp(g, u, dh)
        res["inductor_bwd_us"] = bench(lambda: comp(g, u, dh))
        src = torch.randn(5 * m * h // 2, device="cuda", dtype=dt)
        dst = torch.empty_like(src)
        res["copy_same_bytes_us"] = bench(lambda: dst.copy_(src))
    return res


def _timed(res: dict, name: str, fn, errors: dict) -> None:
    """GPU µs and launch cost of fn into res; a variant that fails is a result, not a crash."""
    try:
        res[f"{name}_us"] = bench(fn)
        lc = launch_cost(fn)
        res[f"{name}_cpu_us"], res[f"{name}_wall_us"] = lc["cpu_us"], lc["wall_us"]
    except Exception as e:  # noqa: BLE001
        errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        log(f"  {name}: FAILED {errors[name]}")


def modules(d: int, h: int, dtype: torch.dtype, train: bool) -> dict:
    """eager / triton / fused GeGLU sharing one set of weights."""
    torch.manual_seed(0)
    base = GeGLU(d, h).to(DEV, dtype)
    out = {"eager": base}
    for act in ("triton", "fused"):
        mod = GeGLU(d, h, act=act).to(DEV, dtype)
        mod.load_state_dict(base.state_dict())
        out[act] = mod
    for mod in out.values():
        mod.train(train)
        mod.requires_grad_(train)
    return out


def compiled(base, mode: str, backend: str | None = None):
    """``torch.compile`` of ``base`` in ``mode``; ``backend`` (e.g. aot_eager on the CPU check) instead of Inductor."""
    if backend is not None:
        return torch.compile(base, dynamic=False, backend=backend)
    return torch.compile(base, dynamic=False, **({} if mode == "default" else {"mode": mode}))


def mlp_table(shapes, modes, graphs: bool) -> list[dict]:
    rows = []
    for (m, d, h) in shapes:
        t_shape = time.time()
        dt = torch.bfloat16
        mods = modules(d, h, dt, train=False)
        base = mods["eager"]
        x = randn(m, d, dtype=dt)
        wg, wu, wd = base.gate_proj.weight, base.up_proj.weight, base.down_proj.weight
        wp = pack_gate_up(wg, wu)
        v5_cfg = None if DEV == "cuda" else INTERPRETER_CONFIG  # v5's autotuner needs a GPU
        h_in = randn(m, h, dtype=dt)
        res = {"shape": (m, d, h), "flop": 6 * m * d * h, "errors": {}}
        ref_mod = GeGLU(d, h).to(DEV, torch.float64)
        ref_mod.load_state_dict({k: v.double() for k, v in base.state_dict().items()})
        with torch.no_grad():
            ref = ref_mod(x.double())
            fns = {"eager": lambda: base(x),
                   "triton": lambda: mods["triton"](x),
                   "fused": lambda: mods["fused"](x)}
            if V5:
                fns["fused_v5"] = lambda: F.linear(geglu_gemm_packed(x, wp, config=v5_cfg), wd)
            todo = [(f"compile_{md}", base, md) for md in modes] + [("fused_compile_default", mods["fused"], "default")]
            for name, mod, mode in todo:
                t0 = time.time()
                try:
                    comp = compiled(mod, mode, None if DEV == "cuda" or mod is base else "aot_eager")
                    for _ in range(3):
                        comp(x)
                    fns[name] = (lambda comp=comp: comp(x))
                    res[f"{name}_compile_s"] = time.time() - t0
                except Exception as e:  # noqa: BLE001
                    res["errors"][name] = f"{type(e).__name__}: {str(e)[:200]}"
            res["rel_err"] = {}
            for k, fn in fns.items():
                try:
                    res["rel_err"][k] = rel_err(fn().float(), ref)
                except Exception as e:  # noqa: BLE001
                    res["errors"][k] = f"{type(e).__name__}: {str(e)[:200]}"
            for k, fn in fns.items():
                if k not in res["errors"]:
                    _timed(res, k, fn, res["errors"])
            # the dual GEMM alone by each path (dispatch check) and its cuBLAS pieces
            for path in PATHS:
                p = packed(wg, wu, path)
                _timed(res, f"dual_{path}", lambda p=p: p(x), res["errors"])
            auto = PackedGeGLU(wg, wu)
            auto(x)
            plan = next(iter(auto.plans.values()))
            res["dispatch"] = plan.path
            res["dispatch_rule"] = plan.rule.when if plan.rule else None
            res["dispatch_fallback"] = plan.fallback
            if V5:
                _timed(res, "dual_v5", lambda: geglu_gemm_packed(x, wp, config=v5_cfg), res["errors"])
            _timed(res, "gate_up_cublas", lambda: (F.linear(x, wg), F.linear(x, wu)), res["errors"])
            _timed(res, "down_only", lambda: F.linear(h_in, wd), res["errors"])
            if graphs and DEV == "cuda":  # launch overhead removed for everyone
                for k in ("eager", "triton", "fused"):
                    try:
                        fns[k]()
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g):
                            fns[k]()
                        res[f"{k}_graph_us"] = bench(g.replay)
                    except Exception as e:  # noqa: BLE001
                        res["errors"][f"{k}_graph"] = f"{type(e).__name__}: {str(e)[:200]}"
            res["tma_config"] = str(TMA_CONFIG)
            res["pointer_best_config"] = str(getattr(_autotuned, "best_config", None))
        res["seconds"] = time.time() - t_shape
        rows.append(res)
        log(f"mlp {(m, d, h)} ({res['seconds']:.0f}s): " + _gpu_times(res)
            + f" dispatch={res['dispatch']} errors={res['errors'] or 'none'}")
    return rows


def named_grads(mod) -> dict:
    """Parameter gradients by the eager module's names (the packed parameter split into its views)."""
    out = {}
    for name, p in mod.named_parameters():
        name = name.replace("_orig_mod.", "")
        if name == "gate_up_proj.weight":
            out["gate_proj.weight"], out["up_proj.weight"] = p.grad[0::2], p.grad[1::2]
        else:
            out[name] = p.grad
    return out


def train_step(call, x, dy, params):
    """One fwd+bwd as a training loop runs it: ``.backward()`` into ``.grad`` (so AccumulateGrad
    runs, as it does under an optimizer), then the gradients dropped (``zero_grad(set_to_none)``)."""
    def step():
        for p in params:
            p.grad = None
        call(x).backward(dy)
    return step


def launch_counts() -> dict:
    """Launches of the fused kernels so far that skipped Triton's JIT (``direct``) or went through it,
    and why the direct path stopped if it did (kernels/launch.py)."""
    from tracetui.kernels import fused, op
    return {name: {"direct": lx.direct, "jit": lx.jit, "broken": lx.broken}
            for name, lx in (("tma", fused._TMA), ("pointer", fused._POINTER), ("bwd", op._BWD))}


LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch",
                "cudaMemsetAsync", "cudaMemcpyAsync")
"""Runtime calls that put work on the GPU (one per kernel, graph, memset or copy issued)."""


def census(fn) -> dict:
    """What one call of ``fn`` (after a warm-up call) issues, read from a torch.profiler trace of it:
    CPU ops (ATen and custom ops, autograd nodes included), GPU work issued (``LAUNCH_CALLS``, by
    name) and allocations (profile_memory's [memory] events with positive bytes)."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    fn()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with profile(activities=acts, profile_memory=True) as prof:
        fn()
        sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            ev = json.load(f)["traceEvents"]
    launches: dict = {}
    for e in ev:
        if e.get("cat") == "cuda_runtime" and e.get("name") in LAUNCH_CALLS:
            launches[e["name"]] = launches.get(e["name"], 0) + 1
    return {"cpu_ops": sum(e.get("cat") == "cpu_op" for e in ev),
            "gpu_work_issued": sum(launches.values()), "by_call": launches,
            "allocations": sum(e.get("name") == "[memory]" and e.get("args", {}).get("Bytes", 0) > 0 for e in ev)}


def cpu_profile(fn, calls: int = 20, top: int = 14) -> list[str]:
    """Where the host time of ``fn`` goes: cProfile over ``calls`` calls, the top functions by own time."""
    import cProfile
    import io
    import pstats
    fn()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    sync()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    rows = [ln.rstrip() for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(rows) if ln.lstrip().startswith("ncalls")), 0)
    return [ln[:160] for ln in rows[start:start + top + 1]]


def graphed_train_step(mod, x, dy):
    """A training fwd+bwd as CUDA graphs (``torch.cuda.make_graphed_callables``: one graph for the
    forward, one for the backward) over a copy of ``mod`` (the graphing replaces its forward);
    returns (step, the copy). The copy's ``.grad`` is filled outside the graphs, by AccumulateGrad."""
    import copy
    mod = copy.deepcopy(mod)
    graphed = torch.cuda.make_graphed_callables(mod, (x,))
    return train_step(graphed, x, dy, list(mod.parameters())), mod


def _train_fns(mods, x, dy, modes, res, graphs: bool) -> tuple[dict, dict]:
    """Every (impl, host mode) of the train table as a step callable and the module owning its .grad."""
    fns, owners = {}, {}
    for k in ("eager", "triton", "fused"):
        fns[k], owners[k] = train_step(mods[k], x, dy, list(mods[k].parameters())), mods[k]
    todo = [(f"compile_{m}", "eager", m) for m in modes]
    todo += [(f"fused_compile_{m}", "fused", m) for m in FUSED_COMPILE_MODES if DEV == "cuda" or m == "default"]
    for name, impl, mode in todo:
        t0 = time.time()
        try:
            comp = compiled(mods[impl], mode, None if DEV == "cuda" or impl == "eager" else "aot_eager")
            fn = train_step(comp, x, dy, list(mods[impl].parameters()))
            for _ in range(3):
                fn()
            fns[name], owners[name] = fn, mods[impl]
            res[f"{name}_compile_s"] = time.time() - t0
        except Exception as e:  # noqa: BLE001
            res["errors"][name] = f"{type(e).__name__}: {str(e)[:200]}"
    for k in GRAPHED if graphs and DEV == "cuda" else ():
        try:
            fns[f"{k}_graphed"], owners[f"{k}_graphed"] = graphed_train_step(mods[k], x, dy)
        except Exception as e:  # noqa: BLE001
            res["errors"][f"{k}_graphed"] = f"{type(e).__name__}: {str(e)[:200]}"
    return fns, owners


def train_table(shapes, modes, graphs: bool = True) -> list[dict]:
    """Forward + backward (weights' gradients; x is data), no optimizer: eager, compile modes,
    cuBLAS + our pointwise fwd/bwd (``triton``) and the fused path (packed parameter, the
    ``tracetui::geglu_mlp`` ops), each impl in every host mode it has: plain, compiled
    (``fused_compile_*``: our op inside a compiled module), graphed (``*_graphed``). Each step is
    ``.backward()`` with the grads set to None first, as under an optimizer."""
    rows = []
    for (m, d, h) in shapes:
        t_shape = time.time()
        dt = torch.bfloat16
        mods = modules(d, h, dt, train=True)
        x = randn(m, d, dtype=dt)
        dy = randn(m, d, dtype=dt) / (m * d) ** 0.5
        res = {"shape": (m, d, h), "flop": 18 * m * d * h, "errors": {}}
        # gradients against float64 (eager module in float64, same weights)
        ref_mod = GeGLU(d, h).to(DEV, torch.float64)
        ref_mod.load_state_dict({k: v.double() for k, v in mods["eager"].state_dict().items()})
        ref_mod(x.double()).backward(dy.double())
        ref = named_grads(ref_mod)
        fns, owners = _train_fns(mods, x, dy, modes, res, graphs)
        res["grad_rel_err"] = {}
        for k, fn in fns.items():
            try:
                fn()
                fn()  # the second step's gradients: launched the way every later step is (kernels/launch.py)
                got = named_grads(owners[k])
                res["grad_rel_err"][k] = max(rel_err(got[n].float(), r) for n, r in ref.items())
            except Exception as e:  # noqa: BLE001
                res["errors"][k] = f"{type(e).__name__}: {str(e)[:200]}"
        for k, fn in fns.items():
            if k not in res["errors"]:
                _timed(res, k, fn, res["errors"])
        res["fused_launches"] = launch_counts()
        res["census"] = {}
        for k in ("eager", "fused", "fused_graphed", "eager_graphed", "compile_max-autotune", "fused_compile_default"):
            if k in fns and k not in res["errors"]:
                try:
                    res["census"][k] = census(fns[k])
                except Exception as e:  # noqa: BLE001
                    res["errors"][f"{k}_census"] = f"{type(e).__name__}: {str(e)[:200]}"
        if "fused" not in res["errors"]:
            res["cpu_profile_fused"] = cpu_profile(fns["fused"])
        res["bwd_pointwise"] = backward_pointwise(m, h)
        res["seconds"] = time.time() - t_shape
        rows.append(res)
        log(f"train {(m, d, h)} ({res['seconds']:.0f}s): " + _gpu_times(res)
            + f" grad_errs={ {k: round(v, 5) for k, v in res['grad_rel_err'].items()} } errors={res['errors'] or 'none'}"
            + f" launches={res['fused_launches']}")
    return rows


def sweep_plan(args) -> list[str]:
    """What this invocation will run, and the path the rule table picks per shape on an H200."""
    lines = [f"forward shapes: {args.shapes}", f"train shapes: {args.train_shapes}", f"compile modes: {args.modes}"]
    for (m, d, h) in args.shapes:
        path, rule = choose(Case(m, h, d, torch.bfloat16, True))
        lines.append(f"  {(m, d, h)} bf16 on Hopper -> {path} (rule: {rule.when})")
    return lines


def parse_shapes(text: str) -> list[tuple]:
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shapes are MxDxH,MxDxH...: {text!r}") from None
    if not shapes or any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise argparse.ArgumentTypeError(f"shapes are MxDxH,MxDxH... with positive sizes: {text!r}")
    return shapes


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tracetui.kernels.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None, help="write every number here (rewritten after each table)")
    ap.add_argument("--quick", action="store_true", help=f"forward shapes {QUICK}, train at the default shape, "
                    "no pointwise block sweep")
    ap.add_argument("--shapes", type=parse_shapes, default=None, help="forward shapes MxDxH,... (default: SWEEP)")
    ap.add_argument("--train-shapes", type=parse_shapes, default=None, help="train shapes MxDxH,...")
    ap.add_argument("--modes", default=",".join(COMPILE_MODES), help="torch.compile modes, comma-separated")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--no-pointwise", action="store_true")
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--no-v5", action="store_true", help="skip the pre-issue-26 fused_v5 peer (its autotuning)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the correctness check (a calibration-only run; its verdicts then say FAIL)")
    ap.add_argument("--cpu-check", action="store_true",
                    help="no GPU: the CPU-checkable parts under TRITON_INTERPRET=1 at a tiny shape")
    ap.add_argument("--cpu-compile", action="store_true", help="with --cpu-check: also the compile peers (slow)")
    ap.add_argument("--summary-from", default=None, metavar="JSON",
                    help="print the tables and done-when checks of an earlier run's --json (e.g. one cut by a timeout)")
    args = ap.parse_args(argv)
    args.modes = tuple(m for m in args.modes.split(",") if m)
    bad = [m for m in args.modes if m not in COMPILE_MODES + ("reduce-overhead",)]
    if bad:
        ap.error(f"unknown compile mode(s) {bad}; choose from {', '.join(COMPILE_MODES)}")
    if args.shapes is None:
        args.shapes = QUICK if args.quick else SWEEP
    if args.train_shapes is None:
        args.train_shapes = TRAIN_SWEEP[:1] if args.quick else TRAIN_SWEEP
    if args.no_train:
        args.train_shapes = []
    return args


def cpu_check(args) -> int:
    """Runs on the CPU: the sweep plan, correctness against float64, and every table's code at
    CPU_SHAPE (timings there are meaningless, the point is that a GPU session finds no bug)."""
    global DEV
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("bench: --cpu-check needs TRITON_INTERPRET=1 set before Python starts", file=sys.stderr)
        return 2
    DEV = "cpu"
    log("CPU check under the interpreter: the timings below only show the code runs, they measure nothing")
    for line in sweep_plan(args):
        log(line)
    log("launch floors (CPU, interpreter):", launch_floors())
    corr = check_correctness(small=True)
    modes = args.modes if args.cpu_compile else ()
    out = {"device": "cpu (interpreter)", "modes": modes, "correctness": corr, "mlp": mlp_table([CPU_SHAPE], modes, graphs=False),
           "train": train_table([CPU_SHAPE], modes)}
    for line in summary(out, modes):
        log(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    errors = [e for t in ("mlp", "train") for r in out[t] for e in r["errors"].values()]
    bad = [r for r in corr if not r["ok"]]
    log(f"cpu check: {len(corr)} correctness cases, {len(bad)} failed; {len(errors)} table errors")
    return exit_code(out, modes)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.summary_from:
        with open(args.summary_from) as f:
            doc = json.load(f)
        doc.setdefault("mlp", []), doc.setdefault("train", [])
        modes = tuple(doc.get("modes", args.modes))
        for line in summary(doc, modes):
            log(line)
        return exit_code(doc, modes)
    global V5
    V5 = not args.no_v5
    if args.cpu_check:
        return cpu_check(args)
    if not torch.cuda.is_available():
        print("bench: needs a CUDA GPU (or --cpu-check with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    t0 = time.time()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "cuda": torch.version.cuda, "argv": sys.argv[1:], "cublas_max_m": CUBLAS_MAX_M, "pointer_max_m": POINTER_MAX_M, "modes": args.modes}

    def save():
        out["seconds"] = time.time() - t0
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1, default=str)
    log(out)
    for line in sweep_plan(args):
        log(line)
    out["floors"] = fl = floors()
    fl.update(launch_floors())
    log("floors", fl)
    out["correctness"] = corr = [] if args.no_check else check_correctness()
    bad = [r for r in corr if not r["ok"]]
    if bad:
        log(f"CORRECTNESS FAILED: {len(bad)} cases")
    save()
    out["mlp"] = []
    for shape in args.shapes:  # one shape at a time, saved after each: a timeout keeps what ran
        out["mlp"] += mlp_table([shape], args.modes, graphs=not args.no_graphs)
        save()
    out["train"] = []
    for shape in args.train_shapes:
        out["train"] += train_table([shape], args.modes, graphs=not args.no_graphs)
        save()
    if not args.no_pointwise:
        out["pointwise"] = pointwise_table(fl, blocks=not args.quick)
        save()
    for line in summary(out, args.modes):
        log(line)
    if out.get("pointwise"):
        log("\n== GeGLU pointwise bf16 (µs, median) ==")
        log(f"{'shape':>14s} {'eager':>7s} {'inductor':>8s} {'triton':>7s} {'copy=B':>7s} {'% floor':>7s} {'TB/s':>6s}")
        for r in out["pointwise"]:
            log(f"{str(tuple(r['shape'])):>14s} {r['eager_us']:7.1f} {r['inductor_us']:8.1f} {r['triton_us']:7.1f} "
                f"{r['copy_same_bytes_us']:7.1f} {100 * r['copy_same_bytes_us'] / r['triton_us']:7.1f} "
                f"{r['bytes'] / r['triton_us'] / 1e6:6.2f}")
    save()
    code = exit_code(out, args.modes)
    log(f"done in {out['seconds']:.0f}s; correctness {'FAILED' if bad else 'ok'}; exit code {code}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
