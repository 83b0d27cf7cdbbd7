"""The explorer's step rows and detail pane on serving traces: the phase label read from the
annotation, and a step whose CUDA-graph work is hidden shown without an idle figure."""
from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from tracetui.model import load_trace
from tracetui.ui.app import TraceApp
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.details import describe

from tests.conftest import PEER
from tests.ui.test_app import explorer

SGLANG = PEER.parent / "tracelens" / "inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz"
GRAPHS = PEER / "negative_queue_length_values_check_rank0.json.gz"


def _need(p):
    if not p.is_file():
        pytest.skip("../shared/peer-traces is not here (fresh clone elsewhere)")


def test_step_row_and_pane_say_decode_bs32_at_80x24():
    _need(SGLANG)
    raw = json.loads(gzip.decompress(SGLANG.read_bytes()))
    name = next(e["name"] for e in raw["traceEvents"] if str(e.get("name", "")).startswith("step["))
    mode, bs = name[len("step["):-1].split()  # "DECODE", "bs=32": the trace's own text

    async def run():
        app = TraceApp([SGLANG])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            step = s.trace.steps[0]
            row = s.tree.label_for(step).plain
            assert f"{mode.lower()} {bs}" in row
            assert s.current == step and f"phase {mode.lower()} {bs}" in s.query_one(DetailPane).plain
    asyncio.run(run())


def test_pane_has_no_idle_for_a_step_whose_graph_work_is_hidden(tmp_path):
    _need(GRAPHS)
    doc = json.loads(gzip.decompress(GRAPHS.read_bytes()))
    corr = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch"}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (
        e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in corr)]
    p = tmp_path / "hidden.json"
    p.write_text(json.dumps(doc))
    t = load_trace(p)
    bad = t.graph_gaps.incomplete_steps
    assert bad
    for s in t.steps:
        text = str(describe(t, s))
        assert ("GPU idle" in text) == (s not in bad)
        assert ("no kernels linked" in text) == (s in bad)
    assert "graph work hidden" in _row(t, bad[0])


def _row(t, node) -> str:
    async def run():
        app = TraceApp([t.path])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            return s.tree.label_for(node).plain
    return asyncio.run(run())
