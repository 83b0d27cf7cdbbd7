"""Claims a newcomer's QA run found false (issue 32's "an explanation is a claim that can be
checked"), each checked against the raw JSON:

- a library GEMM with no launch record was a "fusion" of layer_norm + sigmoid + mul that B still
  runs (HTA's before/after pair);
- kernels launched by a whole compiled graph (``CompiledFunction``) were "another kernel of the
  same op call (ATen runs it in passes)";
- a removed Inductor constant kernel had no reason where the added one had one (not mirrored).
"""
from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from functools import lru_cache

import pytest

from tracetui.compare.changes import totals
from tracetui.compare.diff import diff_traces
from tracetui.model import load_trace

from tests.conftest import DATA

LIB_GEMM = re.compile(r"sgemm|hgemm|gemm|nvjet|cutlass")


@lru_cache(maxsize=4)
def raw(path):
    with gzip.open(path) if str(path).endswith(".gz") else open(path, "rb") as f:
        return json.load(f)["traceEvents"]


@lru_cache(maxsize=4)
def hta_pair(peer_dir):
    a = peer_dir / "trace_diff_control_control.json.gz"
    b = peer_dir / "trace_diff_test_test.json.gz"
    return a, b, diff_traces(load_trace(a), load_trace(b))


def _launched(events) -> set:
    """Correlation ids that a runtime event (cudaLaunchKernel …) carries: kernels with a launch record."""
    return {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"
            and isinstance(e.get("args"), dict) and "correlation" in e["args"]}


def test_a_library_gemm_without_launch_record_fuses_nothing(peer_dir):
    a, b, res = hta_pair(peer_dir)
    ev_b = raw(b)
    launched = _launched(ev_b)
    unlinked = Counter(e["name"] for e in ev_b if e.get("cat") == "kernel"
                       and e.get("args", {}).get("correlation") not in launched)
    assert unlinked["volta_sgemm_128x32_nn"] > 0  # the case: B's SGEMM has no launch record
    for r in res.rows:
        if r.status != "fused":
            continue
        # a library GEMM without launch record, matched by scope or position, is no fusion
        assert not (LIB_GEMM.search(r.b.name) and unlinked[r.b.name] and r.how in ("scope", "position")), r.b.name


def test_same_call_and_extern_name_an_aten_op(peer_dir):
    """Both reasons speak of one ATen op's call; the op they name in the reason is an ATen op, and
    (raw JSON) it is an op that launched kernels in the trace."""
    a, b, res = hta_pair(peer_dir)
    names = {e["name"] for p in (a, b) for e in raw(p) if e.get("cat") == "cpu_op"}
    for r in res.rows:
        if r.rule in ("same call", "extern"):
            op = r.reason.rsplit("(", 1)[1].rstrip(")")
            assert op.startswith("aten::") and op in names, (r.rule, r.reason)
    assert not any("CompiledFunction" in (r.reason or "") for r in res.rows if r.rule == "same call")


@pytest.mark.parametrize("fwd", [True, False], ids=["eager-first", "compiled-first"])
def test_constant_kernel_reason_is_mirrored(fwd):
    """``triton_poi_fused_arange_2`` gets the constants reason whichever side it is on, so both
    directions count the same unexplained rows (raw JSON: its name lists only arange)."""
    e, c = (DATA / "diff" / f"h200_decoder_{n}.json.gz" for n in ("eager", "compile"))
    pa, pb = (e, c) if fwd else (c, e)
    assert "triton_poi_fused_arange_2" in {x["name"] for x in raw(c) if x.get("cat") == "kernel"}
    res = diff_traces(load_trace(pa), load_trace(pb))
    rows = [r for r in res.rows if (r.b if fwd else r.a) is not None
            and (r.b if fwd else r.a).name == "triton_poi_fused_arange_2"]
    assert rows and all(r.rule == "constants" for r in rows), [(r.status, r.rule) for r in rows]
    back = diff_traces(load_trace(pb), load_trace(pa))
    assert totals(res)["unexplained"] == totals(back)["unexplained"]


def test_no_two_steps_alike_compares_a_typical_step_not_the_warm_up(peer_dir):
    """HTA's test trace: six steps, none alike; its first has 2,101 kernels (546 of them with no
    launch record), the others 1,555. The diff compares a step of the median kernel count
    (per-step counts from the raw JSON: kernels whose launch, else whose own start, lies inside the
    step), not the warm-up."""
    from tests.compare.test_diff_truth import _in_step, raw_steps
    a, b, res = hta_pair(peer_dir)
    ev = raw(b)
    steps = raw_steps(list(ev))
    launch = {(e["pid"], e["args"]["correlation"]): e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    pids = {s["pid"] for s in steps}
    n = [0] * len(steps)
    for e in ev:
        if e.get("cat") != "kernel":
            continue
        corr = e["args"].get("correlation")
        rt = next((launch[(p, corr)] for p in pids if (p, corr) in launch), None)  # as gpu_reference joins
        # a kernel with no launch record counts in the step its own start falls in
        k = _in_step(steps, rt["pid"], rt["ts"]) if rt is not None else _in_step(steps, steps[0]["pid"], e["ts"])
        if k is not None:
            n[k] += 1
    assert n[0] > max(n[1:])  # the warm-up step launches the most
    med = sorted(n)[len(n) // 2]
    assert totals(res)["kernels_b"] == med != n[0], n
