"""The diff on real models (issue 20): fusion stays inside a layer, nothing is claimed twice, an
Inductor kernel replaces only ops its name lists, and the totals reconcile with references
computed here from the raw JSON (never through the model).

Recordings: a 4-layer decoder forward + loss recorded eager and compiled on the CPU (Inductor's
C++ kernel profiling on) once per session; a 4-layer decoder train step on the H200 (eager,
compile, max-autotune: tests/data/diff/h200_*); the bundled H200 MLP ladder; HTA's before/after
pair.
"""
from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from tracetui.model import load_trace
from tracetui.compare.changes import changes, diff_dict, totals
from tracetui.compare.diff import diff_traces
from tracetui.compare.ladder import ladder
from tracetui.model.names import inductor_ops

from tests.conftest import DATA, TRACES

LAYERS = 4

# What counts as one unit of work on a CPU-only trace, as the README defines it: a leaf ATen op
# (no op of its own below it but views), or an Inductor C++ kernel; views and allocator
# bookkeeping launch nothing.
VIEWS = {"view", "t", "transpose", "as_strided", "reshape", "expand", "_unsafe_view", "permute", "select",
         "slice", "squeeze", "unsqueeze", "empty", "empty_like", "empty_strided", "resolve_conj", "detach",
         "alias", "contiguous", "lift_fresh", "split", "split_with_sizes", "unbind", "flatten", "unflatten",
         "view_as", "chunk", "narrow", "_reshape_alias", "expand_as", "numpy_T"}
BOOKKEEPING = {"resize_", "set_", "record_stream", "_local_scalar_dense"}
WORK_NS = ("aten::", "mkldnn::", "quantized::", "c10d::", "_c10d_functional::", "inductor::", "fbgemm::")


def raw_events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def raw_steps(ev: list[dict]) -> list[dict]:
    return sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and re.fullmatch(r"ProfilerStep#\d+", str(e.get("name")))), key=lambda e: e["ts"])


def _in_step(steps, pid, ts):
    for k, s in enumerate(steps):
        if s["pid"] == pid and s["ts"] <= ts < s["ts"] + s["dur"]:
            return k
    return None


def gpu_reference(path: Path) -> tuple[float, float]:
    """Mean per step of (kernel µs, kernel count): kernels whose launch starts inside the step's
    host interval on any thread of its process (HTA's rule), joined on (pid, correlation)."""
    ev = raw_events(path)
    steps = raw_steps(ev)
    launch = {(e["pid"], e["args"]["correlation"]): e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    pids = {s["pid"] for s in steps}
    us, n = [0.0] * len(steps), [0] * len(steps)
    for e in ev:
        if e.get("cat") != "kernel":
            continue
        corr = e["args"].get("correlation")
        rt = next((launch[(p, corr)] for p in pids if (p, corr) in launch), None)
        if rt is None:
            continue
        k = _in_step(steps, rt["pid"], rt["ts"])
        if k is not None:
            us[k] += e["dur"]
            n[k] += 1
    return sum(us) / len(steps), sum(n) / len(steps)


def cpu_units(path: Path) -> tuple[list[list[dict]], list[dict]]:
    """Per step, the units of work (leaf ops and C++ kernels, by start time), and every cpu_op."""
    ev = raw_events(path)
    steps = raw_steps(ev)
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    by_tid = defaultdict(list)
    for o in ops:
        by_tid[(o["pid"], o["tid"])].append(o)
    work_below, in_kernel = set(), set()
    for lst in by_tid.values():
        lst.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for o in lst:
            while stack and o["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            short = o["name"].split("::")[-1]
            if any("cpp_fused" in s["name"] for s in stack):
                in_kernel.add(id(o))
            if o["name"].startswith(WORK_NS) and short not in VIEWS and short not in BOOKKEEPING:
                for s in stack:
                    work_below.add(id(s))
            stack.append(o)
    per = [[] for _ in steps]
    for o in ops:
        name = o["name"]
        short = name.split("::")[-1]
        kernel = "cpp_fused" in name
        leaf = (name.startswith(WORK_NS) and short not in VIEWS and short not in BOOKKEEPING
                and id(o) not in work_below and id(o) not in in_kernel)
        if kernel or leaf:
            k = _in_step(steps, o["pid"], o["ts"])
            if k is not None:
                per[k].append(o)
    for p in per:
        p.sort(key=lambda e: e["ts"])
    return per, ops


def enclosing(ops_by_tid: dict, e: dict, prefix: str) -> list[str]:
    """Names of the events of ``ops_by_tid`` on ``e``'s thread that contain it and start with ``prefix``."""
    return [o["name"] for o in ops_by_tid[(e["pid"], e["tid"])]
            if o["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= o["ts"] + o["dur"] and o["name"].startswith(prefix)]


@pytest.fixture(scope="session")
def transformer_recorded(tmp_path_factory) -> dict:
    """The `transformer` rung (4 pre-LN blocks, CPU sizes) as a train step, backward on a second
    thread, recorded eager and compiled (Inductor's C++ kernel profiling on) in this session."""
    pytest.importorskip("torch")
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    out = tmp_path_factory.mktemp("transformer")
    w = workloads(device="cpu", layers=LAYERS, dim=64, seq=32, vocab=256, batch=2)["transformer"]
    return {impl: record(w, impl, out / f"transformer_{impl}.json.gz", device="cpu", with_stack=True,
                         warmup_iters=2, active=2, save_key_averages=False, backward_thread=True)
            for impl in ("eager", "compile")}


@pytest.fixture(scope="session", params=["recorded", "bundled"])
def transformer_cpu(request) -> dict:
    """This session's recording, and the one bundled in tests/data (torch 2.13, recorded once)."""
    if request.param == "bundled":
        return {k: DATA / f"cpu_transformer_{k}.json.gz" for k in ("eager", "compile")}
    return request.getfixturevalue("transformer_recorded")


@pytest.fixture(scope="session")
def transformer_diff(transformer_cpu):
    a, b = load_trace(transformer_cpu["eager"]), load_trace(transformer_cpu["compile"])
    return a, b, diff_traces(a, b)


def _claims_once(res) -> None:
    claimed = [x.node for f in res.fusions for x in f.replaces]
    assert len(claimed) == len(set(claimed)), "an eager kernel claimed twice"
    for side in ("a", "b"):  # every unit of each side is in exactly one row
        nodes = [getattr(r, side).node for r in res.rows if getattr(r, side) is not None]
        assert len(nodes) == len(set(nodes))


def test_transformer_fusions_stay_in_their_layer(transformer_cpu, transformer_diff):
    a, b, res = transformer_diff
    assert len(res.fusions) >= 2 * LAYERS, "fewer fused kernels than the layers would give"
    _claims_once(res)
    ev = raw_events(transformer_cpu["eager"])
    by_tid = defaultdict(list)
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("python_function", "cpu_op"):
            by_tid[(e["pid"], e["tid"])].append(e)
    by_key = {(e["name"], round(e["ts"] * 1000)): e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    units, _ = cpu_units(transformer_cpu["eager"])
    first = units[0]
    pos = {(e["name"], round(e["ts"] * 1000)): i for i, e in enumerate(first)}
    anchors = [i for i, e in enumerate(first)
               if e["name"].split("::")[-1] in ("mm", "addmm", "bmm") or "scaled_dot_product" in e["name"]]
    vocab = {n.split("::")[-1] for n in a.tree.names if "::" in n}
    multi_layer = 0
    for f in res.fusions:
        raw = [by_key[(x.name, int(a.tree.start[x.node]))] for x in f.replaces]
        blocks = set()
        for e in raw:
            mods = [m for m in enclosing(by_tid, e, "nn.Module: Block_")]  # the rung's Block class
            blocks.update(int(m.rsplit("_", 1)[1]) for m in mods)
        # one layer; the residual add ending block k and ln_1 opening block k+1 are one kernel
        # in Inductor (no GEMM between them), so two adjacent blocks are the one exception
        assert len(blocks) <= 1 or (len(blocks) == 2 and max(blocks) - min(blocks) == 1), (f.kernel.name, blocks)
        multi_layer += len(blocks) == 2
        # between the same anchors: at most one anchor inside the span of what it replaced
        # (gelu(gate) * up waits for the up GEMM: pointwise work may move past an independent GEMM)
        keys = [(x.name, int(a.tree.start[x.node])) for x in f.replaces]
        ps = [pos[k] for k in keys if k in pos]
        if ps and f.replaces[0].node in {x.node for x in a._diff_items}:
            inside = [i for i in anchors if min(ps) < i < max(ps)]
            assert len(inside) <= 1, (f.kernel.name, inside)
        # replaced ops within the kernel's decoded op list: some op enclosing each replaced unit
        ops = set(inductor_ops(f.kernel.name, vocab)[0])
        for e in raw:
            chain = {n.split("::")[-1].rstrip("_") for n in enclosing(by_tid, e, "aten::")}
            assert chain & ops, (f.kernel.name, e["name"], ops)
    assert multi_layer < len(res.fusions)
    # a kernel Inductor emits once per layer folds into one change: "4× per step, one per block"
    # (a one-for-one kernel is a "replacement" since issue 40; it folds the same way)
    folded = [c for c in changes(res) if c.kind in ("fusion", "replacement") and c.count == LAYERS]
    assert folded and any(c.fold == "one per block" for c in folded)


def test_transformer_totals_reconcile_with_raw_json(transformer_cpu, transformer_diff):
    a, b, res = transformer_diff
    per_a, _ = cpu_units(transformer_cpu["eager"])
    per_b, _ = cpu_units(transformer_cpu["compile"])
    ref = {side: (sum(sum(e["dur"] for e in p) for p in per) / len(per), sum(len(p) for p in per) / len(per))
           for side, per in (("a", per_a), ("b", per_b))}
    t = totals(res)
    ref_delta = ref["b"][0] - ref["a"][0]
    assert abs(t["rows_delta_us"] - ref_delta) <= 0.01 * max(ref["a"][0], ref["b"][0])
    assert t["launches_saved"] == ref["a"][1] - ref["b"][1]
    assert t["kernels_a"] == ref["a"][1] and t["kernels_b"] == ref["b"][1]
    j = diff_dict(res)
    assert sum(k["delta_us"] for k in j["kernels"]) == pytest.approx(t["device_delta_us"], abs=1e-6)
    assert t["unexplained"] == sum(1 for k in j["kernels"] if k["status"] in ("added", "removed")
                                   and not k["reason"] and not k["fused_into"])


def test_mlp_ladder_reconciles_on_every_rung():
    names = ["mlp_eager", "mlp_compile", "mlp_triton", "mlp_fused"]
    paths = [TRACES / f"{n}.json.gz" for n in names]
    ts = [load_trace(p) for p in paths]
    ld = ladder(ts)
    for p, r in zip(paths, ld["rungs"]):
        us, n = gpu_reference(p)
        assert r["device_us_per_step"] == pytest.approx(us, rel=0.01) and r["kernels_per_step"] == n
    for s in ld["steps"]:
        t = s["totals"]
        ref_a, ref_b = gpu_reference(paths[s["from"]]), gpu_reference(paths[s["to"]])
        assert t["rows_delta_us"] == pytest.approx(ref_b[0] - ref_a[0], abs=0.01 * ref_a[0])
        assert t["launches_saved"] == ref_a[1] - ref_b[1]
        assert t["unexplained"] == 0 and t["b_kernels_explained"] == t["b_kernels"]
    # eager → compile: the fusion is the biggest device change; its rows are the gelu + mul
    top = ld["steps"][0]["top"][0]
    assert top["kind"] == "fusion" and top["title"].startswith("gelu + mul → triton_poi_fused")
    # triton → fused: the dual-GEMM kernel took over both GEMMs and the GeGLU kernel
    f = [c for c in ld["steps"][2]["top"] if c["kind"] == "fusion"]
    assert f and f[0]["launches_saved"] == 2 and "geglu_dual_gemm_tma_kernel" in f[0]["title"]


def test_peer_pair_reconciles(peer_dir):
    pa, pb = peer_dir / "trace_diff_control_control.json.gz", peer_dir / "trace_diff_test_test.json.gz"
    a, b = load_trace(pa), load_trace(pb)
    res = diff_traces(a, b)
    _claims_once(res)
    t = totals(res)
    assert t["rows_delta_us"] == pytest.approx(t["device_delta_us"], abs=1e-3)
    assert t["launches_saved"] == t["kernels_a"] - t["kernels_b"]
    # ATen's own kernels each do one op: none of them is reported as a fusion
    assert not [f for f in res.fusions if f.kernel.library.startswith("ATen")]
    assert t["unexplained"] == sum(1 for r in res.rows if r.status in ("added", "removed") and not r.explained)


# ---- GPU train step: a 4-layer decoder on the H200, backward on the autograd thread
# (benchmarks/h200_diff_recordings.py recorded them: eager, torch.compile, max-autotune)

GPU_PAIRS = [
    # the rung's own recordings (traces/README.md): 6 blocks, cuDNN attention, torch 2.11
    *[(TRACES / "transformer_eager.json.gz", TRACES / f"transformer_{b}.json.gz", "nn.Module: Block_", 6)
      for b in ("compile", "max_autotune")],
    # benchmarks/h200_diff_recordings.py: 4 blocks, flash attention
    *[(DATA / "diff" / "h200_decoder_eager.json.gz", DATA / "diff" / f"h200_decoder_{b}.json.gz", "nn.Module: B_", 4)
      for b in ("compile", "max_autotune")],
]
ANCHOR_NAME = re.compile(r"nvjet|gemm|cutlass|flash|fmha|attention|triton_tem")


def gpu_launches(path: Path) -> tuple[list[list[tuple[dict, dict]]], list[dict]]:
    """Per step, (kernel, its launch) in the order the kernels ran, and every event."""
    ev = raw_events(path)
    steps = raw_steps(ev)
    launch = {(e["pid"], e["args"]["correlation"]): e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    pids = {s["pid"] for s in steps}
    per = [[] for _ in steps]
    for e in ev:
        if e.get("cat") != "kernel":
            continue
        rt = next((launch[(p, e["args"].get("correlation"))] for p in pids
                   if (p, e["args"].get("correlation")) in launch), None)
        k = _in_step(steps, rt["pid"], rt["ts"]) if rt else None
        if k is not None:
            per[k].append((e, rt))
    for p in per:
        p.sort(key=lambda x: x[0]["ts"])
    return per, ev


def block_of_launch(rt: dict, by_tid: dict, fwd_by_seq: dict, prefix: str) -> int | None:
    """The decoder block (``nn.Module: B_k``) a launch belongs to: the module scope around it, or
    for backward work, around the forward op with the same Sequence number."""
    mods = enclosing(by_tid, rt, prefix)
    if not mods:
        chain = [o for o in by_tid[(rt["pid"], rt["tid"])] if o.get("cat") == "cpu_op"
                 and o["ts"] <= rt["ts"] <= o["ts"] + o["dur"]]
        for o in sorted(chain, key=lambda o: -o["ts"]):
            a = o.get("args", {})
            if a.get("Fwd thread id", 0) and a.get("Sequence number") in fwd_by_seq:
                mods = enclosing(by_tid, fwd_by_seq[a["Sequence number"]], prefix)
                break
    ks = {int(m.rsplit("_", 1)[1]) for m in mods}
    return ks.pop() if len(ks) == 1 else None


@lru_cache(maxsize=2)
def eager_raw(path: Path):
    per, ev = gpu_launches(path)
    by_tid = defaultdict(list)
    fwd_by_seq = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("python_function", "cpu_op"):
            by_tid[(e["pid"], e["tid"])].append(e)
            a = e.get("args", {})
            if e.get("cat") == "cpu_op" and "Sequence number" in a and not a.get("Fwd thread id"):
                fwd_by_seq.setdefault(a["Sequence number"], e)
    return per, by_tid, fwd_by_seq


def _pair_id(x) -> str:
    return x.name.split(".")[0] if isinstance(x, Path) else ""


@pytest.mark.parametrize("pa,pb,prefix,layers", GPU_PAIRS, ids=_pair_id)
def test_train_step_on_h200(pa, pb, prefix, layers):
    a, b = load_trace(pa), load_trace(pb)
    res = diff_traces(a, b)
    _claims_once(res)
    per, by_tid, fwd_by_seq = eager_raw(pa)
    # totals against the raw JSON: kernel time and count per step, every thread (backward too)
    ref_a, ref_b = gpu_reference(pa), gpu_reference(pb)
    t = totals(res)
    assert t["rows_delta_us"] == pytest.approx(ref_b[0] - ref_a[0], abs=0.01 * ref_a[0])
    assert t["launches_saved"] == ref_a[1] - ref_b[1] and t["kernels_a"] == ref_a[1]
    backward = [r for r in res.rows if r.a is not None and r.a.backward]
    assert len(backward) > t["kernels_a"] / 3, "the backward pass is missing"
    # issue 32: a reason is a claim checked against the kernels it names (test_fusion.py); what no
    # rule's evidence holds for stays unexplained (it used to be "the second part of a fused
    # reduction" of a kernel of another layer or direction): a few Inductor kernels, counted
    assert t["unexplained"] <= 0.05 * t["b_kernels"]
    assert t["b_kernels_explained"] + t["unexplained_added"] == t["b_kernels"]
    key = {(e["name"], round(e["ts"] * 1000)): (i, e, rt) for i, (e, rt) in enumerate(per[0])}
    anchors = [i for i, (e, _) in enumerate(per[0]) if ANCHOR_NAME.search(e["name"])]
    vocab = {n.split("::")[-1] for n in a.tree.names if "::" in n}
    in_blocks = 0
    for f in res.fusions:
        hits = [key[(x.name, int(a.tree.start[x.node]))] for x in f.replaces]
        blocks = {block_of_launch(rt, by_tid, fwd_by_seq, prefix) for _, _, rt in hits} - {None}
        assert len(blocks) <= 1 or (len(blocks) == 2 and max(blocks) - min(blocks) == 1), (f.kernel.name, blocks)
        in_blocks += len(blocks) == 1
        ps = [i for i, _, _ in hits]
        assert len([i for i in anchors if min(ps) < i < max(ps)]) <= 1, f.kernel.name
        if f.how == "name":
            ops = set(inductor_ops(f.kernel.name, vocab)[0])
            for _, _, rt in hits:
                chain = {n.split("::")[-1].rstrip("_") for n in enclosing(by_tid, rt, "aten::")}
                assert chain & ops, (f.kernel.name, ops)
    assert in_blocks >= 4 * layers  # per-layer fusions, forward and backward
    if "max_autotune" in pb.name:
        # every Triton template GEMM pairs with the cuBLAS GEMM it replaced, as 'changed'
        tem = [r for r in res.rows if r.b is not None and r.b.name.startswith("triton_tem_")]
        assert tem and all(r.status == "changed" and r.a is not None and r.a.klass == "gemm"
                           and "→ Triton template" in r.detail for r in tem)


def test_mlp_max_autotune_template_gemm():
    """Inductor kept cuBLAS for gate and up, made the down projection a Triton template whose
    name lists the gelu and mul it reads; a separate pointwise kernel computed those, so that
    kernel, not the template, replaced the eager gelu and mul kernels."""
    path = DATA / "diff" / "h200_mlp_max_autotune.json.gz"
    res = diff_traces(load_trace(TRACES / "mlp_eager.json.gz"), load_trace(path))
    _claims_once(res)
    tem = [r for r in res.rows if r.b is not None and r.b.name.startswith("triton_tem_")]
    assert len(tem) == 1 and tem[0].status == "changed" and tem[0].a.name.startswith("nvjet")
    assert "cuBLAS GEMM → Triton template" in tem[0].detail
    fused = [f for f in res.fusions if f.kernel.name.startswith("triton_poi_fused")]
    assert len(fused) == 1 and sorted(x.op for x in fused[0].replaces) == ["aten::gelu", "aten::mul"]
    assert 49e6 < fused[0].intermediate_bytes < 52e6
    ref_a, ref_b = gpu_reference(TRACES / "mlp_eager.json.gz"), gpu_reference(path)
    t = totals(res)
    assert t["rows_delta_us"] == pytest.approx(ref_b[0] - ref_a[0], abs=0.01 * ref_a[0])
    assert t["launches_saved"] == ref_a[1] - ref_b[1] and t["unexplained"] == 0
    # the bundled recording, once the recordings land: the same rules, whatever autotune chose
    bundled = TRACES / "mlp_max_autotune.json.gz"
    if bundled.exists():
        r2 = diff_traces(load_trace(TRACES / "mlp_eager.json.gz"), load_trace(bundled))
        _claims_once(r2)
        for r in r2.rows:
            if r.b is not None and r.b.name.startswith("triton_tem_"):
                assert r.status == "changed" and r.a is not None and "Triton template" in r.detail
        gm = [x for f in r2.fusions for x in f.replaces if x.op in ("aten::gelu", "aten::mul")]
        assert sorted(x.op for x in gm) == ["aten::gelu", "aten::mul"]
