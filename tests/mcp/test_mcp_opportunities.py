"""MCP: the `opportunities` tool and the diff's verdict (issue 36), against the raw-JSON references
of tests/model/test_opportunities.py and tests/compare/test_verdict.py."""
from __future__ import annotations

import pytest

from tracetui.mcp import tools as mcp_tools

from tests.compare.test_verdict import raw
from tests.conftest import TRACES
from tests.model.test_opportunities import Raw, reference_chains


def test_opportunities_tool_pages_every_chain_of_the_raw_reference():
    path = str(TRACES / "transformer_eager.json.gz")
    ref = reference_chains(Raw("transformer_eager"))
    chains, offset = [], 0
    while offset is not None:
        r = mcp_tools.opportunities(path, offset=offset, limit=7)
        assert r["bandwidth"]["source"] == "measured"
        chains += r["chains"]
        offset = r["next_offset"]
    assert r["total"] == len(chains) == len(ref)
    # the same chains as the model's own report, but an item too large for one answer (the
    # optimizer's 48-kernel foreach chain), which the page shortens
    from tracetui.model import load_trace
    from tracetui.model.opportunities import opportunities
    full = opportunities(load_trace(path))["chains"]
    same = [c == f for c, f in zip(chains, full)]
    assert sum(same) >= len(full) - 1
    assert sorted(len(k) for k in ref) == sorted(len(f["kernels"]) for f in full)
    assert sorted(k[0]["name"] for k in ref) == sorted(f["kernels"][0] for f in full)


def test_diff_tool_head_has_the_verdict_and_comparability():
    a, b = str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_compile.json.gz")
    head = mcp_tools.diff(a, b, section=None)
    ra, rb = raw("mlp_eager")["kernel_us"], raw("mlp_compile")["kernel_us"]
    assert head["verdict"]["device_change_pct"] == pytest.approx(100 * (rb - ra) / ra, rel=1e-6)
    assert head["verdict"]["line"].startswith(f"B's step is {100 * (ra - rb) / ra:.1f}% faster")
    assert head["comparability"]["comparable"] is True


def test_the_tool_is_listed():
    assert "opportunities" in {t.name for t in mcp_tools.TOOLS}
