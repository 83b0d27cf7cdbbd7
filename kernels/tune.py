"""GPU sweep that chose the shipped dual-GEMM variant and pointwise launch sizes.

Run on the GPU machine: ``python -m tracetui.kernels.tune [--json OUT.json]``. It times every
variant of the dual GEMM (pointer kernel vs persistent TMA kernel, exact vs ``tanh.approx``
epilogue, flattened tile loop, warp specialisation, tile configs) at a few MLP shapes, against
cuBLAS for the same FLOPs, after checking each variant's output; then the pointwise kernel's
block/warp choices against Inductor at the small shapes where launch cost dominates. Medians of
``triton.testing.do_bench``; each small-shape timing is the best of several interleaved rounds.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
import triton

from tracetui.kernels.geglu import geglu
from tracetui.kernels.fused import ensure_allocator
from tracetui.kernels.geglu_gemm import (_launch_tma, geglu_dual_gemm_kernel, geglu_dual_gemm_tma_kernel,
                                         geglu_gemm_reference, pack_gate_up)


def bench(fn, rep=200) -> float:
    return triton.testing.do_bench(fn, warmup=50, rep=rep, return_mode="median") * 1e3


def log(*a):
    print(*a, flush=True)


def ptr_launcher(x, wp, out, cfg, fast):
    bm, bn, bk, g, s, w = cfg
    M, K = x.shape
    N = wp.shape[1] // 2
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return lambda: geglu_dual_gemm_kernel[grid](x, wp, out, M, N, K, x.stride(0), x.stride(1), wp.stride(0),
                                                wp.stride(1), out.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                GROUP_M=g, FAST_TANH=fast, num_stages=s, num_warps=w)


def tma_launcher(x, wp, out, cfg, fast, flatten, ws):
    """The shipped launch path (descriptors built per call), with this variant's constexprs."""
    bm, bn, bk, g, s, w = cfg
    M, K = x.shape
    N = wp.shape[1] // 2
    kcfg = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, FLATTEN=flatten, WARP_SPEC=ws,
                num_stages=s, num_warps=w)
    return lambda: _launch_tma(x, wp, out, M, N, K, kcfg, fast=fast, upcast=False)


def tma_dev_launcher(x, wp, out, cfg, fast, flatten, ws):
    """The new launch path's kernel: descriptors built on the device (DEVICE_DESC), nothing
    encoded on the host per call. Timed next to ``tma`` to show whether that costs GPU time."""
    bm, bn, bk, g, s, w = cfg
    M, K = x.shape
    N = wp.shape[1] // 2
    ensure_allocator()
    grid = min(torch.cuda.get_device_properties(x.device).multi_processor_count,
               triton.cdiv(M, bm) * triton.cdiv(N, bn))
    return lambda: geglu_dual_gemm_tma_kernel[(grid,)](x, wp, out, M, N, K, x.stride(0), wp.stride(0), out.stride(0),
                                                       BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, NUM_SMS=grid,
                                                       FAST_TANH=fast, FLATTEN=flatten, WARP_SPEC=ws,
                                                       DEVICE_DESC=True, num_stages=s, num_warps=w)


PTR_CONFIGS = [(128, 128, 64, 8, 3, 8), (128, 128, 64, 8, 4, 8)]
TMA_CONFIGS = [(128, 128, 64, 8, 3, 8), (128, 128, 64, 8, 4, 8), (128, 128, 128, 8, 2, 8), (128, 64, 64, 8, 4, 4),
               (128, 64, 64, 8, 5, 4), (128, 64, 128, 8, 3, 4), (256, 64, 64, 8, 3, 8), (64, 128, 64, 8, 4, 4),
               (128, 128, 64, 16, 3, 8), (128, 128, 64, 4, 3, 8)]


def all_candidates() -> list[tuple]:
    # the shipped config on both TMA launch paths first: a short budget still compares them
    cands = [("tma", TMA_CONFIGS[0], True, True, False), ("tma_dev", TMA_CONFIGS[0], True, True, False)]
    cands += [("ptr", c, fast, False, False) for c in PTR_CONFIGS for fast in (False, True)]
    cands += [("tma", c, True, fl, ws) for c in TMA_CONFIGS for fl in (True, False) for ws in (False, True)]
    return list(dict.fromkeys(cands + [("tma", TMA_CONFIGS[0], False, True, False)]))


def top(res, n=6) -> list[tuple]:
    """The n fastest correct variants of a sweep, plus the shipped-before baseline (pointer, exact)."""
    ok = sorted((v for v in res["variants"] if v.get("ok")), key=lambda v: v["us"])
    picked = [("ptr", PTR_CONFIGS[0], False, False, False), ("tma", TMA_CONFIGS[0], True, True, False),
              ("tma_dev", TMA_CONFIGS[0], True, True, False)]
    for v in ok[:n]:
        c = (v["kind"], tuple(v["cfg"]), v["fast_tanh"], v["flatten"], v["warp_spec"])
        if c not in picked:
            picked.append(c)
    return picked


def gemm_sweep(m, k, n, budget_s, cands) -> dict:
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    wg = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    wu = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    wd = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / n ** 0.5
    wp = pack_gate_up(wg, wu)
    ref = geglu_gemm_reference(x, wg, wu)
    res = {"shape": (m, k, n), "gate_up_cublas_us": bench(lambda: (F.linear(x, wg), F.linear(x, wu))),
           "packed_cublas_us": bench(lambda: x @ wp), "variants": []}
    h = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    res["down_cublas_us"] = bench(lambda: F.linear(h, wd))
    log(f"gemm {(m, k, n)} cublas gate+up {res['gate_up_cublas_us']:.1f} packed {res['packed_cublas_us']:.1f} "
        f"down {res['down_cublas_us']:.1f}")
    t0 = time.time()
    for kind, cfg, fast, fl, ws in cands:
        if time.time() - t0 > budget_s:
            log("  budget spent, stopping sweep")
            break
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        row = {"kind": kind, "cfg": cfg, "fast_tanh": fast, "flatten": fl, "warp_spec": ws}
        try:
            fn = (ptr_launcher(x, wp, out, cfg, fast) if kind == "ptr"
                  else tma_dev_launcher(x, wp, out, cfg, fast, fl, ws) if kind == "tma_dev"
                  else tma_launcher(x, wp, out, cfg, fast, fl, ws))
            fn()
            torch.cuda.synchronize()
            err = ((out.double() - ref).norm() / ref.norm()).item()
            row["rel_err"] = err
            row["ok"] = bool(err <= 1e-2 and not out.isnan().any().item())
            row["us"] = bench(fn)
            row["tflops"] = 4 * m * k * n / row["us"] / 1e6
        except Exception as e:  # a variant this Triton cannot compile is a result, not a crash
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        res["variants"].append(row)
        log(f"  {kind} {cfg} fast={fast} flat={fl} ws={ws}: " +
            (f"{row['us']:.1f} us {row['tflops']:.0f} TFLOP/s err={row['rel_err']:.1e} ok={row['ok']}"
             if "us" in row else row.get("error")))
    return res


def pointwise_sweep(rounds=3) -> list[dict]:
    rows = []
    for shape in [(1000, 3000), (2048, 3072), (333, 12345), (8192, 3072), (4096, 8192)]:
        g = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        u = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        comp = torch.compile(lambda a, b: F.gelu(a, approximate="tanh") * b, dynamic=False)
        comp(g, u)
        fns = {"inductor": lambda: comp(g, u)}
        for blk, w in [(512, 4), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8), (4096, 16)]:
            fns[f"b{blk}_w{w}"] = (lambda blk=blk, w=w: geglu(g, u, block=blk, num_warps=w))
        best = {k: float("inf") for k in fns}
        for _ in range(rounds):
            for k, fn in fns.items():
                best[k] = min(best[k], bench(fn, rep=100))
        rows.append({"shape": shape, **{k + "_us": v for k, v in best.items()}})
        log(f"pointwise {shape}: " + ", ".join(f"{k}={v:.2f}" for k, v in best.items()))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--budget", type=float, default=150, help="seconds per GEMM shape")
    ap.add_argument("--no-pointwise", action="store_true")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
           "sms": sms}
    log(out)
    out["gemm"] = [gemm_sweep(8192, 768, 3072, args.budget, all_candidates())]
    best = top(out["gemm"][0])
    for shp in [(2048, 768, 3072), (16384, 768, 8192), (512, 768, 2048), (4096, 1024, 4096)]:
        out["gemm"].append(gemm_sweep(*shp, args.budget / 3, best))
        if args.json:
            json.dump(out, open(args.json, "w"), indent=1)
    if not args.no_pointwise:
        out["pointwise"] = pointwise_sweep()
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
