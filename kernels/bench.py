"""GPU benchmark of the GeGLU kernels: correctness first, then timings against the floors.

Run on the GPU machine in one call: ``python -m tracetui.kernels.bench [--json OUT.json] [--quick]``.
Every timing is the median of ``triton.testing.do_bench`` (CUDA events); the copy bandwidth and
the bf16 matmul rate are measured in the same run and used as the floors.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import triton

from tracetui.kernels.geglu import geglu, geglu_reference
from tracetui.kernels.geglu_gemm import TMA_CONFIG, _autotuned, _tma_ok, geglu_gemm, geglu_gemm_packed, geglu_gemm_reference, pack_gate_up
from tracetui.workloads.models import GeGLU

torch._dynamo.config.cache_size_limit = 256


def log(*a):
    print(*a, flush=True)


def bench(fn) -> float:
    """Median µs of fn over ~200 ms of repeats."""
    return triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median") * 1e3


def rel_err(out, ref) -> float:
    return ((out.double() - ref).norm() / ref.norm()).item()


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


def check_correctness() -> list[dict]:
    rows = []
    tol = {torch.bfloat16: 1e-2, torch.float16: 1e-2, torch.float32: 1e-5}
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        for shape in [(8192, 3072), (1000, 3001), (7, 13), (3, 129, 771)]:
            g = torch.randn(shape, device="cuda", dtype=dt)
            u = torch.randn(shape, device="cuda", dtype=dt)
            out = torch.full(shape, float("nan"), device="cuda", dtype=dt)
            geglu(g, u, out=out)
            e = rel_err(out, geglu_reference(g, u))
            ok = not out.isnan().any().item() and e <= tol[dt]
            rows.append({"kernel": "geglu", "dtype": str(dt), "shape": shape, "rel_err": e, "ok": ok})
            big = torch.randn(shape[:-1] + (2 * shape[-1],), device="cuda", dtype=dt)  # strided halves
            gs, us_ = big[..., : shape[-1]], big[..., shape[-1]:]
            e2 = rel_err(geglu(gs, us_), geglu_reference(gs, us_))
            rows.append({"kernel": "geglu(strided)", "dtype": str(dt), "shape": shape, "rel_err": e2, "ok": e2 <= tol[dt]})
        for (m, k, n) in [(8192, 768, 3072), (1000, 768, 3000), (129, 200, 77), (4096, 1024, 8192)]:
            x = torch.randn(m, k, device="cuda", dtype=dt)
            wg = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
            wu = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
            out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
            geglu_gemm(x, wg, wu, out=out)
            e = rel_err(out, geglu_gemm_reference(x, wg, wu))
            # fp32 operands go through tf32 tensor cores in tl.dot: ~1e-3 is its floor, not 1e-5
            t = 1e-2 if dt != torch.float32 else 5e-3
            ok = not out.isnan().any().item() and e <= t
            rows.append({"kernel": "geglu_gemm", "dtype": str(dt), "shape": (m, k, n), "rel_err": e, "ok": ok})
            x3 = torch.randn(m, 2 * k, device="cuda", dtype=dt)[:, ::2]  # strided activations
            e3 = rel_err(geglu_gemm(x3, wg, wu), geglu_gemm_reference(x3, wg, wu))
            rows.append({"kernel": "geglu_gemm(strided x)", "dtype": str(dt), "shape": (m, k, n), "rel_err": e3, "ok": e3 <= t})
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


def mlp_table(shapes) -> list[dict]:
    rows = []
    for (m, d, h) in shapes:
        torch.manual_seed(0)
        base = GeGLU(d, h).cuda().to(torch.bfloat16).eval()
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        wg, wu = base.gate_proj.weight, base.up_proj.weight
        wp = pack_gate_up(wg, wu)
        wd = base.down_proj.weight
        h_in = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
        comp = torch.compile(base, dynamic=False)
        with torch.no_grad():
            ref = base(x)
            comp(x)
            fns = {
                "eager": lambda: base(x),
                "compile": lambda: comp(x),
                "triton": lambda: F.linear(geglu(F.linear(x, wg), F.linear(x, wu)), wd),
                "fused": lambda: F.linear(geglu_gemm_packed(x, wp), wd),
                "dual_gemm_only": lambda: geglu_gemm_packed(x, wp),
                "dual_gemm_ptr_kernel": lambda: geglu_gemm_packed(x, wp, tma=False),
                "gate_up_cublas": lambda: (F.linear(x, wg), F.linear(x, wu)),
                "down_only": lambda: F.linear(h_in, wd),
            }
            errs = {k: rel_err(fns[k](), ref.double()) for k in ("compile", "triton", "fused")}
            # launch overhead removed for everyone: CUDA graphs (compile: its own reduce-overhead mode)
            graphs = {}
            for k in ("eager", "triton", "fused"):
                fns[k]()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    fns[k]()
                graphs[k] = g
            comp_ro = torch.compile(base, mode="reduce-overhead", dynamic=False)
            for _ in range(3):
                comp_ro(x)
            res = {"shape": (m, d, h), "flop": 6 * m * d * h}
            for k, fn in fns.items():
                res[f"{k}_us"] = bench(fn)
            for k, g in graphs.items():
                res[f"{k}_graph_us"] = bench(g.replay)
            res["compile_graph_us"] = bench(lambda: comp_ro(x))
            res["errs"] = errs
            res["best_config"] = ("TMA " + str(TMA_CONFIG) if _tma_ok(x, wp, h_in)
                                  else str(getattr(_autotuned, "best_config", None)))
        rows.append(res)
        log(f"mlp {(m, d, h)}: " + ", ".join(f"{k}={v:.1f}" for k, v in res.items() if k.endswith("_us"))
            + f" errs={ {k: round(v, 5) for k, v in errs.items()} } cfg={res['best_config']}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="default shape only")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    t0 = time.time()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "cuda": torch.version.cuda}
    log(out)
    out["floors"] = fl = floors()
    log("floors", fl)
    out["correctness"] = corr = check_correctness()
    bad = [r for r in corr if not r["ok"]]
    for r in corr:
        log(f"check {r['kernel']:18s} {r['dtype']:15s} {str(r['shape']):18s} rel_err={r['rel_err']:.2e} {'ok' if r['ok'] else 'FAIL'}")
    if bad:
        log(f"CORRECTNESS FAILED: {len(bad)} cases")
    out["pointwise"] = pointwise_table(fl, blocks=not args.quick)
    shapes = [(8192, 768, 3072)]
    if not args.quick:
        shapes += [(512, 768, 2048), (2048, 768, 3072), (4096, 1024, 4096), (8192, 768, 8192),
                   (16384, 768, 3072), (16384, 1024, 2048), (16384, 768, 8192), (1000, 768, 3000)]
    out["mlp"] = mlp_table(shapes)
    out["seconds"] = time.time() - t0
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    log("\n== MLP forward (µs, median) ==")
    log(f"{'shape':>20s} {'eager':>8s} {'compile':>8s} {'triton':>8s} {'fused':>8s} {'TFLOP/s':>8s} {'x vs comp':>9s}")
    for r in out["mlp"]:
        log(f"{str(r['shape']):>20s} {r['eager_us']:8.1f} {r['compile_us']:8.1f} {r['triton_us']:8.1f} "
            f"{r['fused_us']:8.1f} {r['flop'] / r['fused_us'] / 1e6:8.1f} {r['compile_us'] / r['fused_us']:9.3f}")
    log("\n== MLP forward under CUDA graphs (µs, median; compile = mode='reduce-overhead') ==")
    for r in out["mlp"]:
        log(f"{str(r['shape']):>20s} eager {r['eager_graph_us']:8.1f} compile {r['compile_graph_us']:8.1f} "
            f"triton {r['triton_graph_us']:8.1f} fused {r['fused_graph_us']:8.1f} "
            f"x vs comp {r['compile_graph_us'] / r['fused_graph_us']:6.3f}")
    log(f"\n== GeGLU pointwise bf16 (µs, median) ==")
    log(f"{'shape':>14s} {'eager':>7s} {'inductor':>8s} {'triton':>7s} {'copy=B':>7s} {'% floor':>7s} {'TB/s':>6s}")
    for r in out["pointwise"]:
        log(f"{str(r['shape']):>14s} {r['eager_us']:7.1f} {r['inductor_us']:8.1f} {r['triton_us']:7.1f} "
            f"{r['copy_same_bytes_us']:7.1f} {100 * r['copy_same_bytes_us'] / r['triton_us']:7.1f} "
            f"{r['bytes'] / r['triton_us'] / 1e6:6.2f}")
    log(f"done in {out['seconds']:.0f}s; correctness {'FAILED' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
