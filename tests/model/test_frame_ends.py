"""Python frames that outlast the call they started in (frame_ends.py): cut for torch <= 2.12
recordings, so ops nest and kernels find their launching op and module as ``key_averages()``
has them; left as written for torch >= 2.13, whose own tree nests them so.

The real case: issue 42's custom op recorded on an H200 (tests/data/h200_mlp_train_*_op:
``<built-in method geglu_mlp of pybind11...>`` runs to the profiler's stop). Its key_averages()
sidecars are checked in test_key_averages.py (they failed before the cut); here the hierarchy
and the diff are checked against the raw JSON.
"""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from tracetui.compare.changes import diff_dict
from tracetui.compare.diff import diff_traces
from tracetui.model import load_trace
from tracetui.read.events import K

from tests.conftest import DATA

EAGER, FUSED = DATA / "h200_mlp_train_eager_op.json.gz", DATA / "h200_mlp_train_fused_op.json.gz"


def _x(name, cat, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(tmp_path, torch_version=None):
    """One step: op Fused [100, 400] whose Python frame F starts inside it and runs to the stop
    (2,000), the custom op my::op [120, 390] inside F with a launch and kernel, then aten::mm
    [500, 600] with its own launch and kernel."""
    ev = [
        _x("ProfilerStep#1", "user_annotation", 0, 1000),
        _x("Fused", "cpu_op", 100, 300, **{"External id": 4}),
        _x("<built-in method my_op of PyCapsule>", "python_function", 110, 1890),
        _x("my::op", "cpu_op", 120, 270, **{"External id": 5}),
        _x("cudaLaunchKernel", "cuda_runtime", 200, 10, **{"External id": 5, "correlation": 1}),
        _x("my_fused_kernel", "kernel", 215, 50, tid=7, **{"External id": 5, "correlation": 1, "device": 0, "stream": 7}),
        _x("aten::mm", "cpu_op", 500, 100, **{"External id": 6}),
        _x("cudaLaunchKernel", "cuda_runtime", 520, 10, **{"External id": 6, "correlation": 2}),
        _x("ampere_sgemm_128x64_tn", "kernel", 540, 40, tid=7, **{"External id": 6, "correlation": 2, "device": 0, "stream": 7}),
    ]
    for e in ev:
        if e["cat"] == "kernel":
            e["pid"] = 0
    doc = {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]}
    if torch_version:
        doc["tracetui"] = {"torch": torch_version}
    p = tmp_path / f"frame_{torch_version or 'none'}.json"
    p.write_text(json.dumps(doc))
    return p


def _node(t, name):
    hits = [i for i in range(len(t.tree.kind)) if t.name(i) == name]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def _ancestors(t, i):
    return [t.name(p) for p in t.tree.ancestors(i, t.tree.cparent) if p > 0]


def test_a_frame_run_to_the_stop_is_cut_to_the_call_it_started_in(tmp_path):
    t = load_trace(_trace(tmp_path, "2.11.0+cu130"), cache=False)
    frame = _node(t, "<built-in method my_op of PyCapsule>")
    assert t.tree.diagnostics["python_frames_cut"] == 1
    assert int(t.tree.dur[frame]) == (400 - 110) * 1000  # cut to Fused's end, in ns
    kernel, mm = _node(t, "my_fused_kernel"), _node(t, "aten::mm")
    assert t.name(t.launching_op(kernel)) == "my::op"
    assert _ancestors(t, mm)[0] == "ProfilerStep#1"  # under the step, no longer under the frame
    assert "<built-in method my_op of PyCapsule>" not in _ancestors(t, mm)
    assert "Fused" in _ancestors(t, kernel)


def test_torch_213_keeps_the_frame_as_written(tmp_path):
    """torch >= 2.13 nests frames in its own tree by the stack rule: the numbers must match it."""
    t = load_trace(_trace(tmp_path, "2.13.0+cpu"), cache=False)
    frame = _node(t, "<built-in method my_op of PyCapsule>")
    assert t.tree.diagnostics["python_frames_cut"] == 0
    assert int(t.tree.dur[frame]) == 1890 * 1000
    assert "<built-in method my_op of PyCapsule>" in _ancestors(t, _node(t, "aten::mm"))


def _op_of_ext(path) -> dict:
    """External id -> name of the cpu_op that carries it, straight from the raw JSON."""
    ev = json.load(gzip.open(path))["traceEvents"]
    return {e["args"]["External id"]: e["name"] for e in ev
            if e.get("cat") == "cpu_op" and "External id" in (e.get("args") or {})}


def _launching_ops_from_json(path, kernel_name) -> Counter:
    """The op that launched each ``kernel_name`` of ``path`` (the cpu_op with its External id)."""
    op_of = _op_of_ext(path)
    ev = json.load(gzip.open(path))["traceEvents"]
    return Counter(op_of.get((e.get("args") or {}).get("External id")) for e in ev
                   if e.get("cat") == "kernel" and e.get("name") == kernel_name)


@pytest.mark.skipif(not FUSED.exists(), reason="tests/data recording missing")
def test_the_custom_op_pair_diff_explains_every_kernel():
    a, b = load_trace(EAGER), load_trace(FUSED)
    fused = _node_of_first_step(b, "geglu_dual_gemm_tma_kernel")
    assert b.name(b.launching_op(fused)) == "tracetui::geglu_mlp"  # None before the cut
    assert _launching_ops_from_json(FUSED, "geglu_dual_gemm_tma_kernel") == Counter({"tracetui::geglu_mlp": 3})
    d = diff_traces(a, b)
    by_kernel = {f.kernel.name: f for f in d.fusions}
    dual = by_kernel["geglu_dual_gemm_tma_kernel"]
    # what it replaced, by the ops that launched them in A's raw JSON (External id): the
    # forward's two GEMMs and its gelu and mul, one step's worth
    op_of = _op_of_ext(EAGER)
    ops_of_replaced = Counter(op_of[x.trace.store.ext[x.trace.tree.ev[x.node]]] for x in dual.replaces)
    assert ops_of_replaced == Counter({"aten::mm": 2, "aten::gelu": 1, "aten::mul": 1})
    totals = diff_dict(d)["totals"]
    raw = json.load(gzip.open(FUSED))["traceEvents"]
    steps = sum(1 for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    assert totals["b_kernels"] == sum(1 for e in raw if e.get("cat") == "kernel") / steps  # 66 / 3 steps alike
    assert totals["unexplained"] == 0 and totals["b_kernels_explained"] == totals["b_kernels"]
    assert _op_of_ext(FUSED)[b.store.ext[b.tree.ev[_node_of_first_step(b, "geglu_interleaved_bwd_kernel")]]] \
        == "tracetui::geglu_mlp_backward"
    assert "geglu_interleaved_bwd_kernel" in by_kernel


def _node_of_first_step(t, name):
    return next(i for i in range(len(t.tree.kind)) if t.name(i) == name and t.tree.kind[i] == K["kernel"])



def _many_overhangs(pairs: int):
    """Host events in nesting order on one thread: the script's frame open from first to last
    (so the walk's stack is never empty: no place to cut the work in stretches), a step holding
    6,000 ops (the closers' range-maximum table over all of it needs 14 levels), then ``pairs``
    times an op A [t, t+300] with a frame F [t+10, t+2000] started inside it that outlasts it
    (ns). Returns (ts, end, track, kind, A, F)."""
    import numpy as np
    inner = 6000
    a_ts = 20_000_000 + np.arange(pairs, dtype=np.int64) * 10_000
    ts = np.concatenate([[0, 0], 1000 + np.arange(inner, dtype=np.int64) * 1000,
                         np.stack([a_ts, a_ts + 10], axis=1).ravel()])
    end = np.concatenate([[a_ts[-1] + 10_000, 10_000_000], 1100 + np.arange(inner, dtype=np.int64) * 1000,
                          np.stack([a_ts + 300, a_ts + 2000], axis=1).ravel()])
    kind = np.concatenate([[K["python"], K["step"]], np.full(inner, K["op"]),
                           np.tile([K["op"], K["python"]], pairs)]).astype(np.int8)
    a = 2 + inner + 2 * np.arange(pairs)
    return ts, end, np.zeros(ts.size, dtype=np.int64), kind, a, a + 1


def test_frames_are_cut_on_a_trace_too_big_for_one_table():
    """A GB-sized recording with stacks: one frame is open for the whole thread, so its events
    are one stretch whose closers table is past its cap. The cut then found no frame at all
    (it searched again for the closers); it now takes them from the nesting, which walks
    where numpy steps aside: each overhanging frame ends with the op it started in."""
    import numpy as np
    from tracetui.model import nesting
    from tracetui.model.frame_ends import cut_frame_ends
    ts, end, track, kind, a, f = _many_overhangs(300_000)
    packed = nesting._packed(track, ts, end)
    assert nesting._closers(end, *packed[2:]) is None  # one table for all: over TABLE_MAX_BYTES
    assert nesting._chunks(track, ts, end) == [(0, ts.size)]  # and no stretch to cut it in
    nested = nesting.nest(ts, end, np.arange(ts.size), track, {0: -1}, workers=1)
    new_end, frames = cut_frame_ends(end, kind, nested.closers)
    assert np.array_equal(frames, f)                        # every F, nothing else
    assert np.array_equal(new_end[f], end[a])               # each frame ends with its op
    keep = np.ones(ts.size, dtype=bool)
    keep[f] = False
    assert np.array_equal(new_end[keep], end[keep])        # nothing else moves


def test_nested_frames_run_to_the_stop_are_cut_in_rounds(tmp_path):
    """Frame G started inside frame F started inside op A, both running to the profiler's stop:
    cutting F to A's end leaves G outlasting F, so a second round cuts G to F's new end."""
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 1000),
          _x("A", "cpu_op", 100, 300),
          _x("<built-in method F of PyCapsule>", "python_function", 110, 1890),
          _x("<built-in method G of PyCapsule>", "python_function", 120, 1880),
          _x("aten::mm", "cpu_op", 500, 100)]
    p = tmp_path / "nested.json"
    p.write_text(json.dumps({"traceEvents": ev, "tracetui": {"torch": "2.11.0+cu130"}}))
    t = load_trace(p, cache=False)
    f, g = _node(t, "<built-in method F of PyCapsule>"), _node(t, "<built-in method G of PyCapsule>")
    assert t.tree.diagnostics["python_frames_cut"] == 2
    assert int(t.tree.dur[f]) == (400 - 110) * 1000 and int(t.tree.dur[g]) == (400 - 120) * 1000
    assert _ancestors(t, _node(t, "aten::mm"))[0] == "ProfilerStep#1"
