"""The GeGLU bench's tables and verdicts, computed from its JSON alone (no GPU, no torch).

``python -m tracetui.kernels.bench --summary-from RUN.json`` prints these for any run, one cut
by a timeout included, so what a device session measured can be read again on any machine.

Exit code of a bench run (and of ``--summary-from``), bits: 1 a correctness case failed (a FAIL
row), 4 a table variant raised (its error is in the JSON), 8 a done-when target was missed.
0: everything ran, was correct and met the targets.
"""
from __future__ import annotations

import math

EXIT_CORRECTNESS, EXIT_ERRORS, EXIT_TARGETS = 1, 4, 8

TRAIN_TARGET = 1.15
"""Issues 33/42: fused fwd+bwd >= 1.15x the best of eager, every compile mode and triton (issue 42:
each impl, fused included, in its best host mode: plain, graphed or compiled)."""
TRAIN_TARGET_SHAPES = ((8192, 768, 3072), (2048, 768, 3072))
DEFAULT_SHAPE = (8192, 768, 3072)
SHORT = {"compile_default": "comp", "compile_max-autotune-no-cudagraphs": "mat-nocg", "compile_max-autotune": "mat"}


def peers(modes) -> list[str]:
    return ["eager"] + [f"compile_{m}" for m in modes]


FUSED_COMPILE_MODES = ("default", "reduce-overhead")


def host_modes(impl: str, modes, graph_suffix: str) -> dict[str, str]:
    """An impl's host modes as {mode label: result name}: plain, graphed (a CUDA graph per call;
    ``_graph`` in the forward table, ``_graphed`` in the train table), compiled (each torch.compile
    mode; for fused, our op inside a compiled module)."""
    if impl == "compile":
        return {m: f"compile_{m}" for m in modes}
    out = {"plain": impl, "graphed": impl + graph_suffix}
    if impl == "fused":
        out.update({f"compile {m}": f"fused_compile_{m}" for m in FUSED_COMPILE_MODES})
    return out


def best_mode(r: dict, impl: str, modes, graph_suffix: str) -> tuple[float | None, str | None]:
    """(µs, mode label) of an impl's fastest host mode in row ``r``; (None, None) if none ran."""
    got = [(r[f"{n}_us"], label) for label, n in host_modes(impl, modes, graph_suffix).items() if f"{n}_us" in r]
    return min(got) if got else (None, None)


def best_mode_lines(rows: list[dict], modes, graph_suffix: str, title: str) -> list[str]:
    """Each impl in its best host mode, per shape: µs and which mode won; fused vs the best peer."""
    if not rows:
        return []
    impls = ("eager", "compile", "triton", "fused")
    lines = [f"\n== {title}: each impl in its best host mode (GPU µs, mode that won) ==",
             f"{'shape':>20s} " + " ".join(f"{i:>26s}" for i in impls) + "  fused vs best peer"]
    for r in rows:
        cells, best = [], {}
        for i in impls:
            us, label = best_mode(r, i, modes, graph_suffix)
            best[i] = us
            cells.append(f"{us:8.1f} ({label})" if us is not None else "n/a")
        peer = min((v for k, v in best.items() if k != "fused" and v is not None), default=None)
        ratio = peer / best["fused"] if peer and best["fused"] else float("nan")
        lines.append(f"{str(tuple(r['shape'])):>20s} " + " ".join(f"{c:>26s}" for c in cells) + f"  {ratio:6.3f}x")
    return lines


def _cell(r: dict, n: str) -> str:
    us, cpu = r.get(f"{n}_us"), r.get(f"{n}_cpu_us")
    return f"{us:7.1f}/{cpu:6.1f}" if us is not None and cpu is not None else "n/a"


def _best(r: dict, names) -> float | None:
    return min((r[f"{n}_us"] for n in names if f"{n}_us" in r), default=None)


def correctness_lines(rows: list[dict]) -> list[str]:
    """Every correctness case as a row; failures say FAIL (and the error, when one was raised)."""
    lines = ["\n== Correctness against float64 (bf16/fp16 tol 1e-2; fp32 1e-2 on GPU: tf32) =="]
    for r in rows:
        err = r.get("rel_err")
        e = f"{err:.2e}" if isinstance(err, (int, float)) and not math.isnan(err) else "-"
        lines.append(f"  {'ok  ' if r['ok'] else 'FAIL'} {r['kernel']:40s} {r['dtype']:15s} "
                     f"{str(tuple(r['shape'])):20s} rel_err={e}" + (f"  {r['error']}" if r.get("error") else ""))
    bad = [r for r in rows if not r["ok"]]
    lines.append(f"  {len(rows)} cases, {len(bad)} FAIL")
    return lines


def thresholds_from(doc: dict) -> dict:
    """The dispatch thresholds a run's dispatch check measured (bf16, Hopper): walking its shapes
    by M, ``cublas_max_m`` is the largest M of the leading run where cuBLAS was fastest and
    ``pointer_max_m`` the largest M of the run after it where the pointer kernel was; None where
    the run has no such row (the rule table then keeps its earlier, documented value)."""
    got = []
    for r in doc.get("mlp", []):
        times = {p: r.get(f"dual_{p}_us") for p in ("cublas", "pointer", "tma")}
        times = {p: t for p, t in times.items() if t is not None}
        if times:
            got.append((r["shape"][0], min(times, key=times.get), times))
    got.sort()
    out = {"cublas_max_m": None, "pointer_max_m": None, "evidence": []}
    i = 0
    for name in ("cublas", "pointer"):
        while i < len(got) and got[i][1] == name:
            out[f"{name}_max_m"] = got[i][0]
            out["evidence"].append(f"M={got[i][0]}: {name} fastest " +
                                   ", ".join(f"{p} {t:.1f}" for p, t in sorted(got[i][2].items())))
            i += 1
    if i < len(got):
        out["evidence"].append(f"M={got[i][0]}: {got[i][1]} fastest (the table's last rule)")
    return out


def forward_lines(doc: dict, modes) -> tuple[list[str], list]:
    lines, checks = [], []
    names = peers(modes) + ["triton", "fused_v5", "fused"]
    lines.append("\n== MLP forward: GPU µs (median, no CUDA graphs) / CPU issue µs per call ==")
    lines.append(f"{'shape':>20s} " + " ".join(f"{SHORT.get(n, n):>15s}" for n in names) + "  fused vs best peer")
    for r in doc.get("mlp", []):
        best = _best(r, peers(modes))
        ratio = best / r["fused_us"] if best and r.get("fused_us") else float("nan")
        lines.append(f"{str(tuple(r['shape'])):>20s} " + " ".join(f"{_cell(r, n):>15s}" for n in names)
                     + f"  {ratio:6.3f}x")
        fb, fl = best_mode(r, "fused", modes, "_graph")
        pb = [best_mode(r, i, modes, "_graph")[0] for i in ("eager", "compile", "triton")]
        every = fb is not None and all(f"{n}_us" in r for n in peers(modes))  # triton counts where it ran
        x = min(p for p in pb if p is not None) / fb if every else float("nan")
        checks.append((f"forward {tuple(r['shape'])}: fused faster than eager, every compile mode and triton, "
                       f"each in its best host mode ({x:.3f}x; fused: {fl})"
                       + ("" if every else " (a peer or fused failed)"), bool(every) and x > 1.0))
    default = next((r for r in doc.get("mlp", []) if tuple(r["shape"]) == DEFAULT_SHAPE), None)
    mm = doc.get("floors", {}).get("matmul_bf16_TFLOPs")
    if default and default.get("fused_us"):
        fb = best_mode(default, "fused", modes, "_graph")[0]
        comps = [default[f"compile_{m}_us"] for m in modes if f"compile_{m}_us" in default]
        if comps:
            x = min(comps) / fb
            checks.append((f"forward default shape, fused in its best host mode: fused >= 1.3x best compile ({x:.3f}x)",
                           x >= 1.3))
        if mm:
            tflops = default["flop"] / fb / 1e6
            checks.append((f"forward default shape: fused >= 85% of matmul rate ({tflops:.0f} of {mm:.0f} "
                           f"TFLOP/s = {100 * tflops / mm:.1f}%)", tflops >= 0.85 * mm))
    return lines, checks


def dispatch_lines(doc: dict) -> list[str]:
    lines = ["\n== Dispatch check: dual GEMM alone by path (GPU µs / CPU issue µs); table's pick vs fastest =="]
    for r in doc.get("mlp", []):
        got = {p: r[f"dual_{p}_us"] for p in ("tma", "pointer", "cublas") if f"dual_{p}_us" in r}
        fastest = min(got, key=got.get) if got else None
        lines.append(f"{str(tuple(r['shape'])):>20s} " + " ".join(
            f"{p}={r.get(f'dual_{p}_us', float('nan')):7.1f}/{r.get(f'dual_{p}_cpu_us', float('nan')):5.1f}"
            for p in ("tma", "pointer", "cublas")) + f"  table: {r.get('dispatch')}  fastest: {fastest}  "
            + ("agree" if fastest == r.get("dispatch") else "RE-CALIBRATE"))
    th = thresholds_from(doc)
    lines.append(f"  thresholds this run measures: cublas_max_m={th['cublas_max_m']} pointer_max_m={th['pointer_max_m']}"
                 f" (table: {doc.get('cublas_max_m')}, {doc.get('pointer_max_m')})")
    lines += [f"    {e}" for e in th["evidence"]]
    return lines


def train_lines(doc: dict, modes) -> tuple[list[str], list]:
    lines, checks = [], []
    if not doc.get("train"):
        return lines, checks
    names = peers(modes) + ["triton", "fused"]
    lines.append("\n== Train step fwd+bwd (.backward(), grads set to None; no optimizer): GPU µs / CPU issue µs ==")
    lines.append(f"{'shape':>20s} " + " ".join(f"{SHORT.get(n, n):>15s}" for n in names) + "  fused vs best")
    for r in doc["train"]:
        best = _best(r, peers(modes) + ["triton"])
        ratio = best / r["fused_us"] if best and r.get("fused_us") else float("nan")
        lines.append(f"{str(tuple(r['shape'])):>20s} " + " ".join(f"{_cell(r, n):>15s}" for n in names)
                     + f"  {ratio:6.3f}x")
        bp = r.get("bwd_pointwise") or {}
        if bp:
            lines.append(f"{'':>20s} backward pointwise {tuple(bp['shape'])}: fused {bp['fused_bwd_us']:.1f} "
                         f"inductor {bp.get('inductor_bwd_us', float('nan')):.1f} copy-of-same-bytes "
                         f"{bp.get('copy_same_bytes_us', float('nan')):.1f} µs")
        if tuple(r["shape"]) in TRAIN_TARGET_SHAPES:
            fb, fl = best_mode(r, "fused", modes, "_graphed")
            pb = [(us, f"{i} {label}") for i in ("eager", "compile", "triton")
                  for us, label in [best_mode(r, i, modes, "_graphed")]]
            every = fb is not None and all(p[0] is not None for p in pb) and all(f"{n}_us" in r for n in peers(modes))
            x = min(p[0] for p in pb) / fb if every else float("nan")
            won = min(pb)[1] if every else None
            checks.append((f"train {tuple(r['shape'])}: fused >= {TRAIN_TARGET}x best of eager, compile modes, triton "
                           f"({x:.3f}x), each in its best host mode (fused: {fl}; best peer: {won})"
                           + ("" if every else " (a peer or fused failed)"), bool(every) and x >= TRAIN_TARGET))
            if "fused_cpu_us" in r and "eager_cpu_us" in r:
                checks.append((f"train {tuple(r['shape'])}: fused CPU issue <= eager's ({r['fused_cpu_us']:.1f} vs "
                               f"{r['eager_cpu_us']:.1f} µs)", r["fused_cpu_us"] <= r["eager_cpu_us"]))
        for k, c in (r.get("census") or {}).items():
            lines.append(f"{'':>20s} one step of {k}: {c['cpu_ops']} CPU ops, {c['gpu_work_issued']} GPU launches "
                         f"{c['by_call']}, {c['allocations']} allocations")
        prof = r.get("cpu_profile_fused")
        if prof:
            lines.append(f"{'':>20s} fused train step, host profile (cProfile, top by own time):")
            lines += [f"{'':>22s}{p}" for p in prof]
    return lines, checks


def verdicts(doc: dict, modes) -> list[tuple[str, bool]]:
    """Issue 33's done-when, as (text, passed), from the JSON."""
    corr = doc.get("correctness", [])
    checks = [(f"correctness: every case passes ({len(corr)} cases, "
               f"{sum(not r['ok'] for r in corr)} FAIL; dtypes {sorted({r['dtype'] for r in corr})})",
               bool(corr) and all(r["ok"] for r in corr))]
    ms = {r["shape"][0] for r in corr if r["kernel"].startswith("PackedGeGLU") and r["ok"]}
    checks.append((f"correctness covers m = 1, 37, 64 (passing PackedGeGLU rows at m in {sorted(ms & {1, 37, 64})})",
                   {1, 37, 64} <= ms))
    checks += forward_lines(doc, modes)[1] + train_lines(doc, modes)[1]
    return checks


def exit_code(doc: dict, modes) -> int:
    code = 0
    if not doc.get("correctness") or not all(r["ok"] for r in doc["correctness"]):
        code |= EXIT_CORRECTNESS
    if any(r.get("errors") for t in ("mlp", "train") for r in doc.get(t, [])):
        code |= EXIT_ERRORS
    timed = not str(doc.get("device", "")).startswith("cpu")  # --cpu-check timings measure nothing
    if timed and not all(ok for _, ok in verdicts(doc, modes)[2:]):
        code |= EXIT_TARGETS
    return code


def summary(doc: dict, modes) -> list[str]:
    """Every table and the done-when verdicts, as text lines."""
    lines = []
    fl = doc.get("floors", {})
    if "triton_empty_kernel_cpu_us" in fl:
        lines.append(f"\nlaunch floors, host µs per call: empty Triton kernel {fl['triton_empty_kernel_cpu_us']:.1f}, "
                     f"small F.linear {fl['linear_small_cpu_us']:.1f}, torch.empty {fl['torch_empty_cpu_us']:.1f}")
    lines += correctness_lines(doc.get("correctness", []))
    lines += forward_lines(doc, modes)[0]
    lines += dispatch_lines(doc)
    if any("eager_graph_us" in r for r in doc.get("mlp", [])):
        lines.append("\n== MLP forward under CUDA graphs (GPU work only, µs) ==")
        for r in doc["mlp"]:
            lines.append(f"{str(tuple(r['shape'])):>20s} " + " ".join(
                f"{k}={r.get(f'{k}_graph_us', float('nan')):7.1f}" for k in ("eager", "triton", "fused")))
    lines += train_lines(doc, modes)[0]
    lines += best_mode_lines(doc.get("mlp", []), modes, "_graph", "MLP forward")
    lines += best_mode_lines(doc.get("train", []), modes, "_graphed", "Train step fwd+bwd")
    errors = [(tuple(r["shape"]), k, v) for t in ("mlp", "train") for r in doc.get(t, []) for k, v in r["errors"].items()]
    if errors:
        lines.append("\n== Errors (a variant that raised; its cells read n/a) ==")
        lines += [f"  {s} {k}: {v}" for s, k, v in errors]
    lines.append("\n== Issue 33 done-when (with issue 42: each impl in its best host mode) ==")
    lines += [f"  {'PASS' if ok else 'FAIL'}  {text}" for text, ok in verdicts(doc, modes)]
    code = exit_code(doc, modes)
    lines.append(f"  exit code {code}: " + (", ".join(w for b, w in ((EXIT_CORRECTNESS, "correctness FAIL rows"),
                 (EXIT_ERRORS, "table errors"), (EXIT_TARGETS, "targets missed")) if code & b) or "all passed"))
    return lines
