"""The diff's first screen (changes by kind), the aligned list's search / sort / filter, and the
N-way ladder (Pilot tests on the bundled H200 MLP recordings)."""
from __future__ import annotations

import asyncio

from tracetui.ui.app import TraceApp
from tracetui.ui.diff_view import DiffScreen, LadderScreen

from tests.conftest import TRACES
from tests.ui.test_app import wait_for

PAIR = [TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"]
LADDER = [TRACES / f"mlp_{x}.json.gz" for x in ("eager", "compile", "triton", "fused")]


def test_changes_first_then_the_aligned_list_with_search_sort_and_filter():
    async def run():
        app = TraceApp(PAIR, diff=True)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            s = app.screen
            await pilot.pause()
            assert not s.in_list and app.focused is s.query_one("#changes")
            # the first change row (under the "fusion" header) is the fusion, biggest first
            fusion = next(c for c in s._change_rows if c is not None)
            assert fusion.kind == "fusion" and "gelu + mul" in fusion.title
            await pilot.press("down", "enter")
            await pilot.pause()
            assert s.in_list and s.result.rows[s.row].status == "fused"
            await pilot.press("s")  # by |Δ|: the fused row (-31.6 µs) comes first
            await pilot.pause()
            deltas = [abs(s.result.rows[i].delta_ns) for i in s.order]
            assert deltas == sorted(deltas, reverse=True) and s.result.rows[s.order[0]].status == "fused"
            assert s.query_one("#pane-a").cursor_row == 0  # on the biggest change
            await pilot.press("f")  # rows that differ
            await pilot.pause()
            assert s.order and all(s.result.rows[i].status != "same" for i in s.order)
            await pilot.press("f")  # fused only
            await pilot.pause()
            assert [s.result.rows[i].status for i in s.order] == ["fused"]
            for _ in range(len(("fused", "replaced", "changed", "added", "removed", "unexplained"))):
                await pilot.press("f")  # back round to every row
            await pilot.pause()
            assert len(s.order) == len(s.result.rows)
            await pilot.press("slash", *"nvjet")
            await pilot.pause()
            assert len(s.order) == 3 and all("nvjet" in s.result.rows[i].name for i in s.order)
            await pilot.press("escape")  # closes the search and clears it
            await pilot.pause()
            assert len(s.order) == len(s.result.rows)
            await pilot.press("escape")  # back to the changes
            await pilot.pause()
            assert not s.in_list
    asyncio.run(run())


def test_ladder_is_the_first_screen_and_enter_opens_a_neighbours_diff():
    async def run():
        app = TraceApp(LADDER, diff=True)
        async with app.run_test(size=(100, 36)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LadderScreen) and app.screen.ladder is not None)
            s = app.screen
            await pilot.pause()
            table = s.query_one("#ladder")
            assert table.row_count == 4
            from rich.console import Console
            import io
            console = Console(width=200, record=True, color_system=None, file=io.StringIO())
            console.print(s.query_one("#ladder-text").content)
            text = console.export_text()
            assert "mlp_eager → mlp_compile" in text and "gelu + mul" in text
            await pilot.press("down", "down", "down", "enter")  # mlp_fused: its diff with mlp_triton
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            d = app.screen
            assert d.a is s.traces[2] and d.b is s.traces[3]
            await pilot.press("escape")  # the changes screen: Esc goes back to the ladder
            await pilot.pause()
            assert app.screen is s
    asyncio.run(run())


def test_diff_screen_shows_the_memory_diff_at_80x24():
    """Both traces have [memory] events: the diff screen's text carries the memory diff (each
    step's peak A → B and what held it), computed in the diff's worker, not on a key."""
    from tests.conftest import DATA
    pair = [DATA / "diff" / f"cpu_transformer_{k}_memory_v1021.json.gz" for k in ("eager", "compile")]

    async def run():
        app = TraceApp(pair, diff=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            await pilot.pause()
            text = str(app.screen.query_one("#fusion-text").render())
            assert "memory: peak per device and step" in text
            from tracetui.compare.memory import memory_compare
            from tracetui.model.memory import fmt_bytes
            first = memory_compare(app.screen.a, app.screen.b)["steps"][0]
            assert (f"{first['a_step']} CPU: peak {fmt_bytes(first['a_peak_bytes'])} → "
                    f"{fmt_bytes(first['b_peak_bytes'])}") in text
    asyncio.run(run())
