"""CUDA graphs, honest: a real trace with cudaGraphLaunch (HTA's negative_queue_length) as
recorded (every replay linked), with the graphs' kernels removed (hidden work), and with their
correlation removed (present, can't be placed). Expected values come from the raw JSON."""
from __future__ import annotations

import gzip
import json

import pytest

from tracetui.model import load_trace

from tests.conftest import PEER

GRAPHS = PEER / "negative_queue_length_values_check_rank0.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _doc() -> dict:
    if not GRAPHS.is_file():
        pytest.skip("../shared/peer-traces is not here (fresh clone elsewhere)")
    return json.loads(gzip.decompress(GRAPHS.read_bytes()))


def _graph_corr(doc) -> set:
    return {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch"}


def _steps_with_launch(doc) -> list[str]:
    """ProfilerStep names whose host interval holds a cudaGraphLaunch (from the raw events)."""
    ev = doc["traceEvents"]
    launches = [e for e in ev if e.get("name") == "cudaGraphLaunch"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"]
    return sorted({s["name"] for s in steps for g in launches
                   if s["pid"] == g["pid"] and s["ts"] <= g["ts"] < s["ts"] + s["dur"]})


def test_complete_graphs_are_attributed_exactly():
    doc = _doc()
    corr = _graph_corr(doc)
    replayed = [e for e in doc["traceEvents"] if e.get("cat") in GPU_CATS and e["args"].get("correlation") in corr]
    t = load_trace(GRAPHS)
    g = t.graph_gaps
    assert (g.launches, g.empty, g.linked_items) == (len(corr), 0, len(replayed))
    assert not g.incomplete_steps and "unknown" not in [b["verdict"] for b in t.windows.breakdowns()]


def test_graph_kernels_removed_marks_steps_unknown(tmp_path):
    doc = _doc()
    corr = _graph_corr(doc)
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not (e.get("cat") in GPU_CATS and e["args"].get("correlation") in corr)]
    p = tmp_path / "hidden.json"
    p.write_text(json.dumps(doc))
    t = load_trace(p)
    g = t.graph_gaps
    assert (g.launches, g.empty) == (len(corr), len(corr))
    bad = sorted(t.name(s) for s in g.incomplete_steps)
    assert bad == _steps_with_launch(doc) and bad
    for s, b in zip(t.steps, t.windows.breakdowns()):
        assert (b["verdict"] == "unknown") == (t.name(s) in bad)
    for f in t.phase_figures():
        pytest.fail(f"no engine labels here, no phases: {f}")
    assert "no kernels linked" in g.summary()


def test_graph_kernels_unlinked_cant_be_placed(tmp_path):
    doc = _doc()
    corr = _graph_corr(doc)
    moved = 0
    for e in doc["traceEvents"]:
        if e.get("cat") in GPU_CATS and e["args"].get("correlation") in corr:
            del e["args"]["correlation"]
            e["args"].pop("External id", None)
            moved += 1
    p = tmp_path / "unlinked.json"
    p.write_text(json.dumps(doc))
    t = load_trace(p)
    g = t.graph_gaps
    assert (g.launches, g.empty, g.linked_items) == (len(corr), len(corr), 0)
    assert sum(s.unlinked for s in g.by_step.values()) >= moved
    assert all("can't be placed" in g.by_step[s].note() for s in g.incomplete_steps)
