"""A diff's verdict in one line, the comparability check, and the CI gate (``diff --gate``).

Consumes the diff's public output (``changes.diff_dict``: its per-step totals, changes and fused
rows), never its internals, plus a few facts read from each trace (device, step marker, shapes,
step wall time) that the diff does not carry.

The exit codes of ``tracetui diff`` are a contract (``EXIT_CODES``, README, ``tracetui skill``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetui.read.events import K
from tracetui.model.names import INDUCTOR_RE
from tracetui.compare.stepless import lacking

EXIT_OK, EXIT_REGRESSED, EXIT_BAD_INPUT, EXIT_NOT_COMPARABLE = 0, 1, 2, 3
EXIT_CODES = (
    (EXIT_OK, "the gate passed (B is not worse than A by more than PCT), or no gate was asked"),
    (EXIT_REGRESSED, "B is worse than A by more than PCT on the gated metric"),
    (EXIT_BAD_INPUT, "bad input: a file that cannot be read, a bad argument, or output that cannot be written "
                     "(full disk, closed pipe) (one line on stderr)"),
    (EXIT_NOT_COMPARABLE, "the two traces are not comparable (device, shapes, step count or steps "
                          "marker differ), or a cpu/wall gate meets a trace without step markers, so the "
                          "gate cannot judge"),
)
"""(code, meaning): the exit-code contract of ``diff --gate`` (README, ``tracetui skill``)."""

GATE_METRICS = {
    "device": ("device_us_per_step", "device µs per step (kernels, as the diff's rows count them)"),
    "cpu": ("cpu_us_per_step", "CPU µs per step (the step markers' wall time on the host)"),
    "wall": ("wall_us_per_step", "wall µs per step (first host event to last GPU activity of a step)"),
    "kernels": ("kernels_per_step", "kernels launched per step"),
}
"""``--gate-on`` choice -> (per-step figure, what it measures). Higher is worse for every one."""

HOST_STEP_GATES = ("cpu", "wall")
"""Gate figures measured over the step markers' windows: a trace without step markers has none."""

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
"""Ops whose input shapes fingerprint a workload's size when the recording has no provenance:
the linear algebra survives compilation (eager's linear and Inductor's graph both call mm)."""

HOST_STEP_LABEL = "host time per step"
"""What the headline's CPU figure counts: the step markers' wall time on the host (``cpu_us_per_step``);
the CPU section of a diff counts something else, self time summed over every host thread."""

GRAPH_CALL = "## Call CompiledFxGraph"
"""The annotation Inductor's compiled graph runs under: on CPU its generated C++ kernels run inside
it and are ops only with ``torch._inductor.config.cpp.enable_kernel_profile = True``."""

POINT_FLOOR = 0.05
"""Kinds contributing less than this many points of A's step are left out of the verdict line."""


@dataclass(frozen=True)
class Facts:
    """What the comparability check and the wall gate need from one trace."""
    device: str | None
    gpu: bool
    steps: int
    marker: str
    sizes: dict | None       # the recorder's provenance: workload, sizes, dtype (tracetui gen/record)
    gemm_shapes: frozenset   # GEMM dimension sizes, when no provenance says the sizes
    wall_us_per_step: float


def facts(t) -> Facts:
    """The facts of a loaded ``Trace``."""
    prov = t.provenance or {}
    sizes = None
    if prov.get("sizes"):
        sizes = {"workload": prov.get("workload"), "sizes": prov.get("sizes"), "dtype": prov.get("dtype"),
                 "train": bool(prov.get("train"))}
    choice = t.step_choice.short if t.step_choice else "none"
    return Facts(t.device_name, bool(t.has_gpu), t.n_steps, choice, sizes, _gemm_shapes(t), _wall(t))


def _gemm_shapes(t) -> frozenset:
    """The distinct dimension sizes (> 1) of the GEMM ops' inputs: a workload's size survives
    reshapes, transposes, bias folding (addmm) and compilation, where whole shapes do not."""
    tree = t.tree
    want = np.array([n in GEMM_OPS for n in tree.names], dtype=bool)
    ops = np.nonzero((tree.kind == K["op"]) & want[tree.name_id])[0]
    out = set()
    for o in ops[:5000].tolist():
        for d in t.args(o).get("Input Dims") or []:
            if isinstance(d, list):
                out.update(int(x) for x in d if isinstance(x, int) and x > 1)
    return frozenset(out)


def _wall(t) -> float:
    """Mean wall time of a step (µs): from its window's first host event to its last GPU activity."""
    if not t.steps:
        return 0.0
    tot = 0
    for s in t.steps:
        end = int(t.tree.start[s] + t.tree.dur[s])
        g = t.step_window(s).gpu
        if g.size:
            end = max(end, int((t.tree.start[g] + t.tree.dur[g]).max()))
        tot += end - int(t.tree.start[s])
    return tot / len(t.steps) / 1e3


def comparability(fa: Facts, fb: Facts) -> dict:
    """Same device, same shapes, same step count, same steps marker: each check with its values,
    and ``comparable`` false when any definite check fails (an unknown never fails)."""
    checks = []
    padded_pairs: list = []

    def check(name: str, a, b, same: bool | None, note: str = "") -> None:
        checks.append({"check": name, "a": a, "b": b, "same": same, "note": note})
    check("device", fa.device or ("GPU" if fa.gpu else "CPU"), fb.device or ("GPU" if fb.gpu else "CPU"),
          fa.device == fb.device and fa.gpu == fb.gpu)
    if fa.sizes and fb.sizes:
        check("shapes", fa.sizes, fb.sizes, fa.sizes == fb.sizes, "from the recorder's provenance")
    elif fa.gemm_shapes and fb.gemm_shapes:
        only_a, only_b = sorted(fa.gemm_shapes - fb.gemm_shapes), sorted(fb.gemm_shapes - fa.gemm_shapes)
        padded = padding(only_a, only_b)
        check("shapes", only_a[:8], only_b[:8], (not only_a and not only_b) or bool(padded),
              "GEMM dimension sizes (aten::mm/addmm/bmm inputs); a and b list those only one side has"
              + ("; B's are A's padded: " + ", ".join(f"{x} → {y}" for x, y in padded) if padded else ""))
        padded_pairs = padded
    else:
        check("shapes", None, None, None, "unknown: no provenance and no GEMM shapes on one side")
    check("step count", fa.steps, fb.steps, fa.steps == fb.steps)
    check("steps marker", fa.marker, fb.marker, fa.marker == fb.marker)
    differ = [c for c in checks if c["same"] is False]
    return {"comparable": not differ, "checks": checks, "padded": padded_pairs,
            "differs": [f"{c['check']} ({_show(c['a'])} vs {_show(c['b'])})" for c in differ]}


PAD_MULTIPLES = (8, 16, 32, 64)
"""torch.compile pads a GEMM dimension up to a multiple of one of these (Inductor's
``comprehensive_padding`` / ``pad_mm``: GPT-2's vocabulary 50257 becomes 50264), so a dimension
only B has that is one only A has rounded up is the same workload."""


def padding(only_a: list, only_b: list) -> list[tuple[int, int]]:
    """(A's size, B's) for each dimension B pads, when every dimension only one side has pairs up
    that way (B's is A's rounded up to a multiple of 8, 16, 32 or 64); else [] (a real difference)."""
    if not only_a or len(only_a) != len(only_b):
        return []
    pairs = []
    left = list(only_b)
    for x in only_a:
        y = next((y for y in left if y > x and any(y == -(-x // m) * m for m in PAD_MULTIPLES)), None)
        if y is None:
            return []
        left.remove(y)
        pairs.append((x, y))
    return pairs


def _show(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_show(x)}" for k, x in v.items() if x is not None)
    return str(v)


SAME_LABEL = "same kernels (run-to-run)"
"""The rest of the device delta: rows the diff pairs as the same kernel, which no change lists."""


def _kinds(j: dict) -> dict:
    """Per change kind (device kinds only): the summed delta per step (µs); ``same`` holds the
    rest of the device delta, so the kinds sum to it."""
    out: dict = {}
    for c in j["changes"]:
        if c["kind"] != "cpu":
            out[c["kind"]] = out.get(c["kind"], 0.0) + c["delta_us"]
    rest = j["totals"]["device_delta_us"] - sum(out.values())
    if rest:
        out["same"] = rest
    return out


def _labels(j: dict) -> dict:
    out = {c["kind"]: c["label"] for c in j["changes"]}
    out["same"] = SAME_LABEL
    return out


def _fusion_where(j: dict) -> tuple[str, float] | None:
    """The block (else the module) whose fusions saved the most per step, and how much (µs)."""
    by: dict = {}
    for f in j.get("fused", []):
        where = (f.get("blocks_a") or [None])[0] or next(iter(f.get("module_a") or []), None)
        if where:
            by[where] = by.get(where, 0.0) + f["saved_us"]
    if not by:
        return None
    return max(by.items(), key=lambda kv: abs(kv[1]))


def verdict(j: dict) -> dict:
    """The verdict of a diff dict (``changes.diff_dict`` with every change, ``top=0``): B's step
    change in % of A's, each kind's share in points of A's step, the CPU change, and the line."""
    t, A, B = j["totals"], j["a"], j["b"]
    base = t["device_us_a"]
    where = "GPU" if (A.get("gpu") or B.get("gpu")) else "CPU (compute ops)"
    pct = 100.0 * t["device_delta_us"] / base if base else 0.0
    kinds = _kinds(j)
    points = {k: 100.0 * v / base for k, v in kinds.items()} if base else {}
    cpu_pct = (100.0 * t["cpu_delta_us"] / A["cpu_us_per_step"]) \
        if A["cpu_us_per_step"] and t["cpu_delta_us"] is not None else None  # None: a side has no step markers
    fw = _fusion_where(j)
    out = {"device_change_pct": pct, "points": points, "cpu_change_pct": cpu_pct, "where": where,
           "fusion_top": {"where": fw[0], "points": -100.0 * fw[1] / base} if fw and base else None}
    out["unrecorded_inductor"] = _unrecorded_inductor(j)
    if bool(A.get("gpu")) != bool(B.get("gpu")):  # one side's figure is CPU op time, the other's GPU time
        out.update(device_change_pct=None, points={}, fusion_top=None, line=_one_side_gpu(t, A, cpu_pct))
        return out
    out["line"] = _line(pct, points, cpu_pct, where, out["fusion_top"], _labels(j)) + "".join(
        f"; {side.upper()}'s Inductor C++ kernels are not ops: {us:,.1f} µs per step inside '{GRAPH_CALL}' is "
        "not in compute ops (record with torch._inductor.config.cpp.enable_kernel_profile = True)"
        for side, us in out["unrecorded_inductor"].items())
    return out


def _one_side_gpu(t: dict, A: dict, cpu_pct) -> str:
    """The verdict where one trace ran on the GPU and the other on the CPU only: the GPU side's time
    against the other's compute-op time is no change in %, so each is said in its own unit."""
    gpu, cpu, us_g, us_c = ("A", "B", t["device_us_a"], t["device_us_b"]) if A.get("gpu") else \
        ("B", "A", t["device_us_b"], t["device_us_a"])
    line = (f"no step change in %: {gpu} ran on the GPU ({us_g:,.1f} µs of GPU work per step), {cpu} on the "
            f"CPU only ({us_c:,.1f} µs of compute ops per step)")
    return line + (f"; {HOST_STEP_LABEL} {cpu_pct:+.0f}%" if cpu_pct is not None else "")


def _unrecorded_inductor(j: dict) -> dict:
    """CPU-only diffs: per side ("a", "b") whose Inductor graphs ran with no C++ kernel recorded
    as an op, the graph calls' self time per step (µs), which the compute-op figure leaves out.
    Sides whose graph-call self time did not change between A and B are not listed."""
    if j["a"].get("gpu") or j["b"].get("gpu"):
        return {}
    own = {"a": 0.0, "b": 0.0}
    for c in j.get("cpu_changes", []):
        if c["name"].startswith(GRAPH_CALL):
            own["a"] += c["a_self_us"]
            own["b"] += c["b_self_us"]
    out = {}
    for side, us in own.items():
        recorded = any(k.get(f"{side}_us") is not None and INDUCTOR_RE.match(k["name"]) for k in j["kernels"])
        if us > 0 and not recorded:
            out[side] = us
    return out


def _line(pct: float, points: dict, cpu_pct, where: str, ftop, labels: dict) -> str:
    """"B's step is 12.3% faster on the GPU; fusion gives 9.1 points of it (Block_3 4.0), GEMM
    implementation 2.8; host time per step +3%". Points count toward the headline's direction."""
    faster = pct < 0
    sign = -1.0 if faster else 1.0
    if abs(pct) < POINT_FLOOR:
        head = f"B's step takes the same time as A's on the {where} ({pct:+.1f}%)"
    else:
        head = f"B's step is {abs(pct):.1f}% {'faster' if faster else 'slower'} on the {where}"
    parts = []
    shown = sorted(((k, sign * p) for k, p in points.items() if abs(p) >= POINT_FLOOR), key=lambda kv: -kv[1])
    for i, (k, p) in enumerate(shown):
        label = labels.get(k, k)
        if i == 0 and p > 0 and abs(pct) >= POINT_FLOOR:
            part = f"{label} {'gives' if faster else 'accounts for'} {p:.1f} points of it"
        else:
            part = f"{label} {p:.1f}"
        if k == "fusion" and ftop and abs(ftop["points"]) >= POINT_FLOOR:  # one block's share, said as such
            part += f" (largest share: {ftop['where']}, {sign * ftop['points']:.1f} of {p:.1f})"
        parts.append(part)
    line = head + ("; " + ", ".join(parts) if parts else "")
    if cpu_pct is not None:
        line += f"; {HOST_STEP_LABEL} {cpu_pct:+.0f}%"
    return line


def gate(j: dict, fa: Facts, fb: Facts, comp: dict, pct: float, on: str = "device") -> dict:
    """The CI gate: B's per-step ``on`` figure against A's. ``exit_code`` 3 when not comparable,
    1 when B is worse by more than ``pct`` percent, else 0."""
    key, what = GATE_METRICS[on]
    if on == "wall":
        a, b = fa.wall_us_per_step, fb.wall_us_per_step
    else:
        a, b = (float(j[s][key] or 0.0) for s in "ab")  # None: no step markers (judged below)
    change = (100.0 * (b - a) / a) if a else (0.0 if b == a else float("inf"))
    out = {"on": on, "measures": what, "threshold_pct": pct, "a": a, "b": b, "change_pct": change}
    stepless = [side for side, f in (("A", fa), ("B", fb)) if not f.steps]
    if on in HOST_STEP_GATES and stepless:  # 0.0 against 0.0 passed any B, however slow its host
        out.update(passed=False, exit_code=EXIT_NOT_COMPARABLE, a=None, b=None, change_pct=None,
                   reason=f"cannot judge {on}: {lacking(stepless)}")
    elif not comp["comparable"]:
        out.update(passed=False, exit_code=EXIT_NOT_COMPARABLE,
                   reason="not comparable: " + "; ".join(comp["differs"]))
    elif change > pct:
        out.update(passed=False, exit_code=EXIT_REGRESSED,
                   reason=f"B is {change:.1f}% worse than A on {on} (limit {pct:g}%)")
    else:
        out.update(passed=True, exit_code=EXIT_OK,
                   reason=f"B is {change:+.1f}% against A on {on} (limit +{pct:g}%)")
    return out


def header_lines(v: dict, comp: dict, g: dict | None) -> list[str]:
    """The lines a text diff opens with: the verdict, the comparability, the gate's result."""
    out = [v["line"]]
    if comp["comparable"] and comp.get("padded"):
        out.append("comparable; compile padded " + ", ".join(f"{x} → {y}" for x, y in comp["padded"])
                   + " (same device, step count and steps marker)")
    elif comp["comparable"]:
        out.append("comparable: same device, shapes, step count and steps marker"
                   + (" (shapes unknown)" if any(c["same"] is None for c in comp["checks"]) else ""))
    else:
        out.append("NOT comparable: " + "; ".join(comp["differs"]))
    if g is not None:
        out.append(f"gate {'passed' if g['passed'] else 'FAILED'} (exit {g['exit_code']}): {g['reason']}")
    return out
