"""Every third-party trace opens in the explorer, and each view and jump key works on it.

The model tests prove these traces load; this drives what a user does next (tables, timeline,
search, kernel <-> op jumps) on CPU-only, ROCm, CUDA-graph, NCCL and old-format files."""
from __future__ import annotations

import asyncio

import pytest

from tracetui.read.events import GPU_KINDS
from tracetui.ui.app import TraceApp
from tracetui.ui.tables import AggTable

from tracetui.model.stats import agg_key

from tests.conftest import PEER
from tests.ui.test_app import explorer

FILES = sorted(p.name for p in PEER.glob("*.json*")) if PEER.is_dir() else ["(absent)"]


@pytest.mark.parametrize("name", FILES)
def test_peer_trace_in_every_view(peer_dir, name):
    async def run():
        app = TraceApp([peer_dir / name])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            tr = s.trace
            for view, table in (("2", "#kernel-table"), ("3", "#op-table")):
                await pilot.press(view)
                await pilot.pause()
                t = s.query_one(table, AggTable)
                assert len(t.rows_data) == t.row_count
                if t.rows_data:
                    await pilot.press("s", "enter")  # another sort, then jump to the first row's node
                    await pilot.pause()
                    # a row's name is key_averages()'s key: every ProfilerStep#N is "ProfilerStep*"
                    assert agg_key(tr.name(s.current)) == t.selected().name
            await pilot.press("4", "1")  # the timeline of the first step is drawn on the way
            await pilot.pause()
            gpu = [i for i in range(len(tr.tree.kind)) if tr.tree.kind[i] in GPU_KINDS]
            if gpu:
                await pilot.press("slash", *tr.name(gpu[0])[:12], "enter")
                await pilot.pause()
                assert tr.name(gpu[0])[:12].lower() in tr.name(s.current).lower()
                await pilot.press("o", "x")  # to the launching op (if any) and back to its kernels
                await pilot.pause()
            assert app.is_running and s.query_one("#details")
    asyncio.run(run())
