"""Fusion by work, training, and reasons that are checked claims (issue 32).

Every pair of the bundled MLP ladder (eager, compile, max-autotune, triton, fused; both
directions) and of the H100 training recordings (tests/data/diff/h100_mlp_train_*): the rows sum
to the step delta and the launches to the difference in kernel counts, both computed here from
the raw JSON; no row is unexplained; and the kernels the fused (or unfused) rows name are exactly
the GeGLU kernels one side launches and the other does not, found here from the raw events
(module scope, or for backward work the forward op's scope through its Sequence number).
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from tracetui.compare.changes import changes, diff_dict, totals
from tracetui.compare.diff import diff_traces
from tracetui.compare.items import Item
from tracetui.compare.pairing import pair_identical
from tracetui.compare.reasons import REASONS, REMOVED_REASONS
from tracetui.compare.rows import Row
from tracetui.model import load_trace

from tests.compare.test_diff_truth import GPU_PAIRS, block_of_launch, eager_raw, enclosing, gpu_reference
from tests.conftest import DATA, TRACES

LADDER = [TRACES / f"mlp_{n}.json.gz" for n in ("eager", "compile", "max_autotune", "triton", "fused")]
TRAIN = [DATA / "diff" / f"h100_mlp_train_{n}.json.gz" for n in ("eager", "compile", "fused")]
# recorded on an H200 after the fused form moved to one packed [2N, K] parameter in a module of its
# own (GateUpProj inside GeGLU): the fused kernels' scope is one the other traces do not have
PACKED = [DATA / "diff" / f"h200_mlp_train_{n}.json.gz" for n in ("eager", "compile", "fused")]
PAIRS = (list(itertools.permutations(LADDER, 2)) + list(itertools.permutations(TRAIN, 2))
         + list(itertools.permutations(PACKED, 2)))


def _id(p) -> str:
    return p.name.replace(".json.gz", "").replace("mlp_", "") if isinstance(p, Path) else ""


@lru_cache(maxsize=16)
def trace(path: Path):
    return load_trace(path)


def _backward(rt: dict, by_tid: dict) -> bool:
    """A launch under autograd's engine or a compiled backward (raw event names)."""
    return any("Backward" in n or n.startswith("autograd::engine") for n in enclosing(by_tid, rt, ""))


@lru_cache(maxsize=16)
def geglu_kernels(path: Path) -> tuple:
    """(name, backward) of each kernel of the first step that ran for the GeGLU module: inside its
    ``nn.Module: GeGLU_k`` scope, or (backward) for a forward op inside it. From the raw JSON."""
    per, by_tid, fwd_by_seq = eager_raw(path)
    out = []
    for k, rt in per[0]:
        if block_of_launch(rt, by_tid, fwd_by_seq, "nn.Module: GeGLU_") is not None:
            out.append((k["name"], _backward(rt, by_tid)))
    return tuple(out)


@pytest.mark.parametrize("pa,pb", PAIRS, ids=_id)
def test_every_rung_pair_is_explained_and_reconciles(pa, pb):
    res = diff_traces(trace(pa), trace(pb))
    t = totals(res)
    ref_a, ref_b = gpu_reference(pa), gpu_reference(pb)
    assert t["rows_delta_us"] == pytest.approx(ref_b[0] - ref_a[0], abs=0.005 * ref_a[0])
    assert t["launches_saved"] == ref_a[1] - ref_b[1]
    assert t["unexplained"] == 0, [(r.status, r.name) for r in res.rows if not r.explained]
    assert t["b_kernels_explained"] == t["b_kernels"]
    # the GeGLU kernels only A launches (by name, per direction) are the ones B's fused kernels
    # name, plus the A side of GEMMs B runs with another kernel, plus kernels with a reason of
    # their own; and the mirror for B
    ga, gb = Counter(geglu_kernels(pa)), Counter(geglu_kernels(pb))
    gone, new = ga - gb, gb - ga
    renamed = [r for r in res.rows if r.status == "changed" and r.a.name != r.b.name]
    named_a = Counter((x.name, x.backward) for r in res.rows if r.status == "fused" for x in r.replaces)
    named_a += Counter((r.a.name, r.a.backward) for r in res.rows if r.status == "unfused")
    named_a += Counter((r.a.name, r.a.backward) for r in renamed)
    named_b = Counter((y.name, y.backward) for r in res.rows if r.status == "unfused" for y in r.parts)
    named_b += Counter((r.b.name, r.b.backward) for r in res.rows if r.status == "fused")
    named_b += Counter((r.b.name, r.b.backward) for r in renamed)
    # and kernels with their own reason (a weight repack)
    named_a += Counter((r.a.name, r.a.backward) for r in res.rows if r.status == "removed" and r.reason) & ga
    named_b += Counter((r.b.name, r.b.backward) for r in res.rows if r.status == "added" and r.reason) & gb
    assert +(named_a - ga) == Counter() and +(named_b - gb) == Counter()  # only GeGLU kernels
    assert +(gone - named_a) == Counter(), "a kernel A lost that no row names"
    assert +(new - named_b) == Counter(), "a kernel B gained that no row names"
    # every change of the report is a known kind, every fusion says which evidence matched
    for f in res.fusions + res.unfusions:
        assert f.evidence, f.kernel.name


def test_compile_to_fused_is_one_fusion():
    """The dual GEMM did the gate GEMM, the up GEMM and the gelu·mul kernel: one fusion row (not
    two GEMMs removed and a renamed pointwise kernel), its saving the step delta less the down
    GEMM's own change, both from the raw JSON."""
    pa, pb = TRACES / "mlp_compile.json.gz", TRACES / "mlp_fused.json.gz"
    res = diff_traces(trace(pa), trace(pb))
    (row,) = [r for r in res.rows if r.status == "fused"]
    assert row.b.name == "geglu_dual_gemm_tma_kernel" and len(row.replaces) == 3
    assert "scope GeGLU_0" in row.evidence  # no shapes on an inference launch: the scope says it
    cs = [c for c in changes(res) if c.kind == "fusion"]
    # two GEMMs went (issue 40): the title counts them, as many as the replaced kernels under aten::mm
    n_mm = sum(1 for x in row.replaces if x.op == "aten::mm")
    assert n_mm == 2 and len(cs) == 1 and cs[0].title.startswith(f"{n_mm}× mm + gelu + mul")
    down = [r for r in res.rows if r.a is not None and r.b is not None]
    ref = gpu_reference(pb)[0] - gpu_reference(pa)[0]
    assert row.delta_ns / 1e3 == pytest.approx(ref - sum(r.delta_ns for r in down) / 1e3, abs=0.5)


def _weights(path: Path) -> tuple[set, float]:
    """From the raw JSON: the 2-D input shapes of the ``_FusedGeGLUFn`` op (the weights), and the
    mean per step of the time of kernels launched by ``aten::copy_`` in GeGLU's forward scope
    whose 2-D shapes are those weights, transposed or not."""
    per, by_tid, fwd_by_seq = eager_raw(path)
    ev = [e for lst in by_tid.values() for e in lst]
    fn = next(e for e in ev if e["name"] == "_FusedGeGLUFn")
    w = {tuple(d) for d in fn["args"]["Input Dims"] if len(d) == 2}
    w |= {d[::-1] for d in w}
    tot = 0.0
    for step in per:
        for k, rt in step:
            ops = [o for o in by_tid[(rt["pid"], rt["tid"])] if o.get("cat") == "cpu_op"
                   and o["ts"] <= rt["ts"] <= o["ts"] + o["dur"]]
            inner = max(ops, key=lambda o: o["ts"]) if ops else None
            if inner is None or inner["name"] != "aten::copy_" or _backward(rt, by_tid):
                continue
            if not enclosing(by_tid, rt, "nn.Module: GeGLU_"):
                continue
            if {tuple(d) for d in inner["args"].get("Input Dims", []) if len(d) == 2} & w:
                tot += k["dur"]
    return w, tot / len(per)


@pytest.mark.parametrize("other", ["eager", "compile"])
def test_weight_repacks_named_with_their_time(other):
    pa, pb = DATA / "diff" / f"h100_mlp_train_{other}.json.gz", DATA / "diff" / "h100_mlp_train_fused.json.gz"
    _, ref_us = _weights(pb)
    assert ref_us > 30  # two copies of ~19 µs a step on the H100
    for a, b, key in ((pa, pb, "weight_repack_us_b"), (pb, pa, "weight_repack_us_a")):
        res = diff_traces(trace(a), trace(b))
        t = totals(res)
        assert t[key] == pytest.approx(ref_us, rel=0.01)
        rep = [r for r in res.rows if r.rule == "weight repack"]
        assert len(rep) == 2 and all(r.refers[0].name == "geglu_dual_gemm_tma_kernel" for r in rep)
        assert all("3072x768" in r.reason for r in rep)


def test_training_backward_pairs_with_what_it_replaced():
    """compile → fused, backward: compile already fused gelu-backward·mul into one kernel, so the
    interleaved backward kernel does the same work and pairs one-to-one with it ("same work, other
    time"); the one wide GEMM absorbs the two weight-gradient GEMMs (FLOPs from the shapes add up)."""
    res = diff_traces(trace(TRAIN[1]), trace(TRAIN[2]))
    (bwd,) = [r for r in res.rows if r.b is not None and r.b.name == "geglu_interleaved_bwd_kernel"]
    assert bwd.status == "changed" and bwd.a is not None and bwd.a.backward
    assert bwd.a.name == "triton_poi_fused__unsafe_view_gelu_gelu_backward_mul_view_0"
    assert bwd.a.name in [n for n, back in geglu_kernels(TRAIN[1]) if back]
    fused = {r.b.name: r for r in res.rows if r.status == "fused" and r.b.backward}
    (wide,) = [r for n, r in fused.items() if n.startswith("nvjet")]
    assert len(wide.replaces) == 2 and all(x.klass == "gemm" and x.backward for x in wide.replaces)
    assert wide.b.flops == pytest.approx(sum(x.flops for x in wide.replaces))
    assert "GFLOP" in wide.evidence


def test_training_backward_kernel_absorbs_eager_pointwise():
    """eager → fused, backward: the interleaved backward kernel replaces exactly the pointwise
    kernels eager ran for GeGLU's backward (from the raw JSON: scope through the Sequence number)."""
    res = diff_traces(trace(TRAIN[0]), trace(TRAIN[2]))
    (bwd,) = [r for r in res.rows if r.b is not None and r.b.name == "geglu_interleaved_bwd_kernel"]
    assert bwd.status == "fused"
    want = Counter(n for n, back in geglu_kernels(TRAIN[0]) if back and not GEMM.search(n))
    assert want and Counter(x.name for x in bwd.replaces) == want


@pytest.mark.parametrize("other", ["eager", "compile"])
def test_packed_parameter_fusions_take_the_enclosing_scope(other):
    """The packed form's kernels run in ``GateUpProj_0``, a module A has not got; what they
    replaced ran in the enclosing ``GeGLU_0``. The dual GEMM takes A's gate and up GEMMs (FLOPs
    from the shapes: the one [2N, K] weight), the evidence says which module is new, and with
    the parameter packed no weight is repacked (no copy kernel in GeGLU's forward, raw JSON)."""
    pa, pb = DATA / "diff" / f"h200_mlp_train_{other}.json.gz", PACKED[2]
    w, repack_us = _weights(pb)
    assert repack_us == 0 and (6144, 768) in w  # one packed weight, no copies of it
    res = diff_traces(trace(pa), trace(pb))
    (dual,) = [r for r in res.rows if r.status == "fused" and r.b.name == "geglu_dual_gemm_tma_kernel"]
    gemms = [x for x in dual.replaces if x.klass == "gemm"]
    assert len(gemms) == 2 and dual.b.flops == pytest.approx(sum(x.flops for x in gemms))
    assert "GateUpProj_0 is new in B" in dual.evidence and "GFLOP" in dual.evidence
    assert totals(res)["weight_repack_us_b"] == 0


# ---- reasons: every claim checked against the kernels it names, from the raw JSON

ATTN = re.compile(r"flash|fmha|attention|sdpa|cudnn")
GEMM = re.compile(r"nvjet|gemm|cutlass|triton_tem")
NOT_OPS = {"triton", "poi", "red", "per", "fused", "view", "unsafe", "t", ""}


def _tokens(name: str) -> set:
    return {t for t in name.split("_") if not t.isdigit()} - NOT_OPS


@pytest.mark.parametrize("reverse", [False, True], ids=["eager-first", "compiled-first"])
@pytest.mark.parametrize("pa,pb,prefix,layers", GPU_PAIRS, ids=_id)
def test_every_reason_that_names_a_kernel_holds(pa, pb, prefix, layers, reverse):
    """Each "part of a split reduction" / "another kernel of an op split in parts" reason names a
    kernel of the same side; checked here on that side's raw launches: same direction, no
    attention kernel and less than a layer's GEMMs between them (same layer), sharing an op in
    their names, and for a split reduction both are reduction kernels. Compiled-first: the
    removed kernels get the mirror of these reasons."""
    if reverse:
        pa, pb = pb, pa
    res = diff_traces(trace(pa), trace(pb))
    checked = 0
    for r in res.rows:
        if r.rule not in ("split", "op split"):
            continue
        it, path = (r.b, pb) if r.status == "added" else (r.a, pa)
        t = trace(path)
        per, by_tid, _ = eager_raw(path)
        seq = per[0]
        at = {(k["name"], round(k["ts"] * 1000)): i for i, (k, _) in enumerate(seq)}
        (ref,) = r.refers
        i = at[(it.name, int(t.tree.start[it.node]))]
        j = at[(ref.name, int(t.tree.start[ref.node]))]
        assert i != j and ref.name in r.reason
        # same direction
        assert _backward(seq[i][1], by_tid) == _backward(seq[j][1], by_tid), (it.name, ref.name)
        # same layer: no attention kernel between them, and less than a layer's GEMMs
        between = [seq[k][0]["name"] for k in range(min(i, j) + 1, max(i, j))]
        assert not any(ATTN.search(n) for n in between), (it.name, ref.name)
        assert sum(bool(GEMM.search(n)) for n in between) <= 4, (it.name, ref.name)
        # the kind of kernel the reason says, sharing an op
        assert _tokens(it.name) & _tokens(ref.name), (it.name, ref.name)
        if r.rule == "split":
            assert it.name.startswith(("triton_red_", "triton_per_"))
            assert ref.name.startswith(("triton_red_", "triton_per_"))
        checked += 1
    assert checked >= layers  # at least one per layer was checked
    # what no rule's evidence holds for stays unexplained, and is counted
    t = totals(res)
    assert t["unexplained"] == sum(1 for r in res.rows if r.status in ("added", "removed") and not r.explained)
    assert t["unexplained"] <= 0.06 * max(t["kernels_a"], t["kernels_b"])  # 13 of 302 here, either way


def test_reason_tables_say_their_evidence():
    for table in (REASONS, REMOVED_REASONS):
        keys = [r.key for r in table]
        assert len(keys) == len(set(keys))
        for rule in table:
            assert rule.reason and rule.evidence and callable(rule.test)


# ---- identical kernels the monotone alignment left apart

def _item(name: str, op: str, pos: int, backward: bool = True, dur: float = 10_000.0) -> Item:
    return Item(node=pos, name=name, klass="gemm", dur_ns=dur, op=op, chain=[op], module=None, op_node=None,
                pos=pos, backward=backward)


def test_identical_kernels_pair_as_same():
    """Compiled code ran two backward GEMMs in the other order: the alignment kept one pair and
    left the other as removed + added. Same name, direction and op family (bmm and mm are one):
    one row."""
    sg = "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4"
    rows = [Row("removed", _item(sg, "aten::bmm", 0), None),
            Row("same", _item("k", "aten::mm", 1), _item("k", "aten::mm", 0)),
            Row("added", None, _item(sg, "aten::mm", 1, dur=10_500.0)),
            Row("added", None, _item(sg, "aten::mm", 2, backward=False))]
    out = pair_identical(rows)
    assert [r.status for r in out] == ["same", "same", "added"]
    assert out[1].a.op == "aten::bmm" and out[1].b.op == "aten::mm"
    assert out[2].b.backward is False  # another direction: not the same work
    assert sum(r.delta_ns for r in out) == sum(r.delta_ns for r in rows)


def test_json_carries_evidence_and_unfusions():
    res = diff_traces(trace(TRACES / "mlp_fused.json.gz"), trace(TRACES / "mlp_eager.json.gz"))
    j = diff_dict(res)
    (u,) = j["unfused"]
    assert u["kernel"] == "geglu_dual_gemm_tma_kernel" and len(u["parts"]) == 4 and u["evidence"]
    assert sum(k["delta_us"] for k in j["kernels"]) == pytest.approx(j["totals"]["device_delta_us"], abs=1e-6)
    assert [c for c in j["changes"] if c["kind"] == "unfusion"]


# ---- Inductor's own provenance record, where a recording carries it

def test_provenance_record_is_used_and_marked_exact(tmp_path):
    """torch 2.13 writes no provenance into profiler traces (checked on a CPU recording with
    ``INDUCTOR_PROVENANCE=1``: the kernels' args are External id, Record function id, Ev Idx).
    A recording that carries it is read: here the compiled kernel is renamed so its name lists no
    op, and a provenance arg lists the FX nodes; the fusion comes from the record, marked exact."""
    import gzip
    import json
    src = TRACES / "mlp_compile.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    old = "triton_poi_fused__unsafe_view_gelu_mul_0"
    for e in doc["traceEvents"]:
        if e.get("name") == old:
            e["name"] = "triton_poi_fused_0"
            if e.get("cat") == "kernel":
                e.setdefault("args", {})["inductor_provenance"] = ["gelu", "mul_1", "view_3"]
    out = tmp_path / "mlp_compile_prov.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    res = diff_traces(trace(TRACES / "mlp_eager.json.gz"), load_trace(out))
    (row,) = [r for r in res.rows if r.status == "fused"]
    assert row.b.name == "triton_poi_fused_0" and row.how == "provenance" and "exact" in row.evidence
    assert sorted(x.op for x in row.replaces) == ["aten::gelu", "aten::mul"]
    assert diff_dict(res)["fused"][0]["matched_by"] == "provenance"


def _gemm(name: str, pos: int, flops: float, mod: tuple, mkn=None) -> Item:
    return Item(node=pos, name=name, klass="gemm", dur_ns=50_000.0, op="aten::mm", chain=["aten::mm"],
                module=mod[-1], op_node=None, module_path=mod, pos=pos, flops=flops, mkn=mkn,
                work=("launching op aten::mm",), library="cuBLAS (nvjet, cuBLASLt)")


def test_work_rule_holds_whatever_the_kernel_name():
    """A dual GEMM that cuBLAS runs on packed gate/up weights with the very kernel it ran each
    GEMM with (same name): its FLOPs (two GEMMs') say it took both, not its name; the down GEMM,
    whose FLOPs one GEMM of A has, stays a counterpart."""
    from tracetui.compare.fusion import work_groups
    g = 8192 * 768 * 3072
    nv = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    ia = [_gemm(nv, 0, g, ("OptimizedModule_0", "GeGLU_0"), ((8192, 768, 3072),)),
          _gemm(nv, 1, g, ("OptimizedModule_0", "GeGLU_0"), ((8192, 768, 3072),)),
          _gemm("nvjet_down", 2, g, ("OptimizedModule_0", "GeGLU_0"), ((8192, 3072, 768),))]
    ib = [_gemm(nv, 0, 2 * g, ("GeGLU_0",), ((8192, 768, 6144),)),
          _gemm("nvjet_down", 1, g, ("GeGLU_0", "Linear_0"), ((8192, 3072, 768),))]
    ((y, xs, ev),) = work_groups(ia, ib)
    assert y is ib[0] and xs == ia[:2] and "GFLOP" in ev
    # FLOPs that add up to no set of lost GEMMs: no claim
    ib[0].flops = 3 * g
    assert work_groups(ia, ib) == []


def test_text_report_names_weight_repacks_and_evidence():
    from tracetui.report.diff import print_diff
    pa, pb = DATA / "diff" / "h100_mlp_train_compile.json.gz", DATA / "diff" / "h100_mlp_train_fused.json.gz"
    lines: list[str] = []
    print_diff(diff_traces(trace(pa), trace(pb)), write=lines.append, top=0)
    _, ref_us = _weights(pb)
    assert any(ln.strip() == f"weight repacks in B: {ref_us:,.1f} µs per step (weights copied into a fused "
               "GEMM's layout every step)" for ln in lines)
    assert any("evidence: autograd Function / custom op _FusedGeGLUFn takes 2 weights" in ln for ln in lines)
    assert not any("unexplained)" in ln for ln in lines)
