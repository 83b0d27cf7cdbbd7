"""MCP on a serving trace: step_breakdown rows carry each step's label (read from the annotation
the test wrote), and summary the per-phase figures, as `summary --json` has them."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp")
from tracetui.mcp import tools as mcp_tools  # noqa: E402

from tests.model.test_serving import _serving_doc, _vllm_name  # noqa: E402


def test_step_breakdown_and_summary_carry_serving_labels(tmp_path):
    spec = [(4, 2048, 0, 0), (0, 0, 16, 16), (0, 0, 16, 16)]
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(_serving_doc([_vllm_name(*x) for x in spec])))
    saved = list(mcp_tools.ROOTS)
    mcp_tools.set_roots([tmp_path])
    try:
        rows = mcp_tools.step_breakdown(str(p), limit=10)["steps"]
        s = mcp_tools.summary(str(p))
    finally:
        mcp_tools.ROOTS[:] = saved
    got = [(r["label"]["phase"], r["label"]["batch"], r["label"]["prefill_tokens"], r["label"]["decode_tokens"])
           for r in rows]
    assert got == [("prefill", 4, 2048, 0), ("decode", 16, 0, 16), ("decode", 16, 0, 16)]
    assert [(f["phase"], f["steps"]) for f in s["phases"]] == [("prefill", 1), ("decode", 2)]
    assert s["step_marker"]["rule"] == "engine annotation"
