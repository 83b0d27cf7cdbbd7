"""The real app driven by Pilot on the bundled H200 traces."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tracetui.read import split
from tracetui.model.trace import start_load
from tracetui.ui import loading as loading_module
from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.loading import LoadingScreen
from tracetui.ui.diff_view import DiffScreen
from tracetui.ui.tables import AggTable
from tracetui.ui.detail_pane import DetailPane

from tests.conftest import TRACES, reaped


async def wait_for(pilot, cond, timeout=10.0):
    """Wait for the loading worker instead of sleeping a fixed time."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)


async def explorer(pilot) -> ExplorerScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ExplorerScreen))
    await pilot.pause()
    return pilot.app.screen


async def search(pilot, text: str) -> None:
    """Type ``/text`` and Enter: the cursor lands on the first match."""
    await pilot.press("slash", *text, "enter")
    await pilot.pause()


async def diff_screen(pilot) -> DiffScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DiffScreen) and pilot.app.screen.result is not None)
    await pilot.pause()
    return pilot.app.screen


async def down_proj_gemm(pilot, s: ExplorerScreen) -> int:
    """The third Linear's (down_proj's) GEMM, by search and x: the step's last kernel."""
    await search(pilot, "Linear_2")
    assert s.trace.name(s.current) == "nn.Module: Linear_2"
    await pilot.press("x")  # the kernels it launched
    await pilot.pause()
    assert s.trace.kind(s.current) == "kernel" and s.trace.name(s.current).startswith("nvjet")
    return s.current


def detail_text(s: ExplorerScreen) -> str:
    return s.query_one(DetailPane).plain


def test_drill_to_down_proj_gemm_and_read_launch_config():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            tr = s.trace
            await down_proj_gemm(pilot, s)
            text = detail_text(s)
            args = tr.args(s.current)
            assert f"{args['grid']}" in text and f"{args['registers per thread']}" in text
            assert f"registers {args['registers per thread']} per thread" in text and "grid" in text and "TFLOP/s" in text
            await pilot.press("o")  # back to the launching op
            await pilot.pause()
            assert tr.name(s.current) == "aten::mm"
            assert "nn.Module: Linear_2" in str(s.query_one("#breadcrumb").render())
    asyncio.run(run())


def test_search_gelu_lands_on_gelu_kernel_and_keys_navigate():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(100, 30)) as pilot:
            s = await explorer(pilot)
            tr = s.trace
            await pilot.press("F", "F", "F")  # kind filter: module -> op -> kernel
            assert s.kind_filter == "kernel"
            await search(pilot, "gelu")
            assert tr.kind(s.current) == "kernel" and "Gelu" in tr.name(s.current)
            first = s.current
            await pilot.press("n")
            await pilot.pause()
            assert s.current != first and "Gelu" in tr.name(s.current)
            await pilot.press("N")
            assert s.current == first
            await pilot.press("o")
            await pilot.pause()
            assert tr.name(s.current) == "aten::gelu"
            await pilot.press("question_mark")
            await pilot.pause()
            assert type(app.screen).__name__ == "HelpScreen"
            await pilot.press("escape")
    asyncio.run(run())


def test_vim_and_arrow_keys_move_expand_and_collapse():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            t = s.tree

            async def press(*keys):
                await pilot.press(*keys)
                await pilot.pause()

            await press("g")
            assert t.cursor_line == 0
            await press("G")
            assert t.cursor_line == t.last_line > 0
            await press("k")
            assert t.cursor_line == t.last_line - 1
            await press("j")
            assert t.cursor_line == t.last_line
            for expand, collapse in (("l", "h"), ("right", "left")):
                await press("g")
                node = t.cursor_node
                rows = t.last_line
                if node.is_expanded:
                    await press(collapse)
                    assert not node.is_expanded and t.last_line < rows
                await press(expand)
                assert node.is_expanded and t.cursor_node is node
                await press(expand)  # on an expanded row: to its first child
                assert t.cursor_node is node.children[0]
                await press(collapse)  # a collapsed child: back to its parent
                assert t.cursor_node is node
                await press(collapse)
                assert not node.is_expanded
            assert s.current == node.data.node  # the details follow the keys
    asyncio.run(run())


def test_scrollbars_follow_rows_without_a_screen_relayout():
    """The tree and detail pane update their scrollbars themselves (no full-screen layout)."""
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            t, d = s.tree, s.query_one(DetailPane)
            await pilot.press("g", "h")  # collapse the root: one row, no scrollbar
            await pilot.pause()
            assert t.last_line == 0 and not t.show_vertical_scrollbar
            await search(pilot, "aten::mm")  # each match revealed adds rows: more than fit
            height = t.scrollable_content_region.height
            for _ in range(s.matches.size):
                if t.last_line + 1 > height:
                    break
                await pilot.press("n")
                await pilot.pause()
            assert t.last_line + 1 > height
            assert t.show_vertical_scrollbar and t.vertical_scrollbar.display
            assert t.vertical_scrollbar.window_virtual_size == t.last_line + 1
            assert t.scroll_y <= t.cursor_line < t.scroll_y + height  # the match is on screen
            await pilot.press("G")
            await pilot.pause()
            assert t.scroll_y == t.max_scroll_y > 0
            assert t.scroll_y <= t.cursor_line < t.scroll_y + t.scrollable_content_region.height
            await pilot.press("g", "h")
            await pilot.pause()
            assert t.last_line == 0 and not t.show_vertical_scrollbar and t.scroll_y == 0
            assert d.show_vertical_scrollbar == (d.virtual_size.height > d.scrollable_content_region.height)
            if d.show_vertical_scrollbar:
                assert d.vertical_scrollbar.window_virtual_size == d.virtual_size.height
    asyncio.run(run())


def test_view_keys_change_what_is_shown():
    """c, f, a, d, 3, 4 with + - [ ], ctrl+o: each key's visible effect."""
    async def run():
        from textual.widgets import ContentSwitcher
        from tracetui.ui.tab_bar import TabBar
        from tracetui.ui.timeline import Timeline

        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            tr, t = s.trace, s.tree

            async def press(*keys):
                await pilot.press(*keys)
                await pilot.pause()

            await search(pilot, "GeluCUDAKernelImpl")  # an ATen kernel with a long C++ template name
            kernel = s.current
            assert tr.kind(kernel) == "kernel"
            short = detail_text(s)
            await press("f")
            assert tr.name(kernel) in detail_text(s) and tr.name(kernel) not in short
            await press("f")
            rows = t.last_line
            await press("c")  # aten::gelu -> cudaLaunchKernel -> kernel become one row
            assert t.collapse and t.last_line < rows and s.current == kernel
            await press("c")
            assert t.last_line == rows
            await press("d")
            assert s.query_one("#details").has_class("hidden")
            await press("d")
            await press("3")
            assert s.query_one(ContentSwitcher).current == "ops" == s.query_one(TabBar).active
            table = s.query_one("#op-table", AggTable)

            def gelu_cpu_total_cell() -> tuple[float, float]:
                i = next(i for i, a in enumerate(table.rows_data) if a.name == "aten::gelu")
                return float(table.cell_text(i, "CPU total µs").replace(",", "")), table.rows_data[i].cpu_total_us

            shown, total = gelu_cpu_total_cell()
            assert shown == pytest.approx(total, abs=0.05)
            await press("t")
            shown, total = gelu_cpu_total_cell()
            assert table.per_step and tr.n_steps == 3
            assert shown == pytest.approx(total / 3, abs=0.05)
            await press("4")
            tl = s.query_one(Timeline)
            assert s.query_one(ContentSwitcher).current == "timeline"
            lo, hi = tl.lo, tl.hi
            await press("plus")
            await press("right_square_bracket")
            assert tl.hi - tl.lo == pytest.approx((hi - lo) / 2) and tl.lo > lo
            await press("left_square_bracket", "minus")
            assert (tl.lo, tl.hi) == (pytest.approx(lo), pytest.approx(hi))
            await press("1", "ctrl+o")
            assert type(app.screen).__name__ == "OpenScreen"
            await press("escape")
            assert app.screen is s
    asyncio.run(run())


def test_timeline_zoom_keeps_the_selected_kernel_in_view():
    """The last GEMM of a step sits at its end: zooming used to show the step's first part."""
    async def run():
        from tracetui.ui.timeline import Timeline

        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            await down_proj_gemm(pilot, s)
            gemm = s.current
            await pilot.press("4")
            await pilot.pause()
            tl = s.query_one(Timeline)
            step = (tl.lo, tl.hi)
            await pilot.press("plus", "plus", "plus")
            await pilot.pause()
            assert tl.node == gemm and tl.hi - tl.lo == pytest.approx((step[1] - step[0]) / 8, abs=4)  # ns: times near 5e15 ns
            start, end = int(s.trace.tree.start[gemm]), int(s.trace.tree.start[gemm] + s.trace.tree.dur[gemm])
            assert tl.lo > step[0] + (step[1] - step[0]) / 2  # it sits at the step's end: so does the view

            def cursor_cells() -> int:
                """Cells drawn in the cursor's colours on its lane."""
                strip = tl._lane_strip(tl.cur.lane, tl._label_w(), tl._width())
                return sum(len(seg.text) for seg in strip if seg.style and seg.style.bgcolor
                           and seg.style.bgcolor.name == "bright_white")

            assert tl.lo <= start and end <= tl.hi and cursor_cells() > 0
            assert "nvjet" in tl.build_strips()[0].text
            await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket",
                              "left_square_bracket", "left_square_bracket")
            assert cursor_cells() == 0  # panned away from it ...
            await pilot.press("1", "4")
            await pilot.pause()
            assert cursor_cells() > 0  # ... and showing it again brings it back into view
    asyncio.run(run())


def test_view_bar_shows_the_view_and_switches_on_click():
    async def run():
        from textual.widgets import ContentSwitcher
        from tracetui.ui.tab_bar import TabBar

        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            bar, views = s.query_one(TabBar), s.query_one(ContentSwitcher)
            text = str(bar.render())
            at = [text.index(f"{i} {v}") for i, v in enumerate(("Tree", "Kernels", "Ops", "Timeline"), 1)]
            assert at == sorted(at)  # every view, in key order
            assert views.current == "tree" == bar.active
            await pilot.click(TabBar, offset=(text.index("3 Ops") + 1, 0))
            await pilot.pause()
            assert views.current == "ops" == bar.active and s.query_one("#op-table").has_focus
            await pilot.click(TabBar, offset=(text.index("1 Tree") + 1, 0))
            await pilot.pause()
            assert views.current == "tree" and s.tree.has_focus
    asyncio.run(run())


def test_kernel_table_sort_and_jump():
    async def run():
        app = TraceApp([TRACES / "mlp_compile.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            table = s.query_one("#kernel-table", AggTable)
            assert table.sort_by == "total µs"
            totals = [a.device_total_us for a in table.rows_data]
            assert totals == sorted(totals, reverse=True)
            await pilot.press("s")
            assert table.sort_by == "count"
            await pilot.press("S")
            assert not table.descending
            await pilot.press(*["s"] * (len(table.sort_keys) - 1))  # cycle back to total
            assert table.sort_by == "total µs"
            await pilot.press("enter")
            await pilot.pause()
            assert s.trace.kind(s.current) == "kernel"
            assert s.trace.name(s.current) == table.rows_data[0].name
    asyncio.run(run())


def test_tables_show_their_numbers_at_80_columns_and_never_mix_cpu_with_device_time():
    """Long C++ kernel names come last, so every number is on an 80x24 screen; the op table's
    device column is device time only (a view such as aten::t shows 0.0, not its CPU time)."""
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            await pilot.pause()
            table = s.query_one("#kernel-table", AggTable)
            assert max(len(a.name) for a in table.rows_data) > 80  # the GeLU functor's template name
            shown = [table.render_line(y).text for y in range(1, 1 + len(table.rows_data))]  # row 0: header
            for a, line in zip(table.rows_data, shown):
                assert f"{a.device_total_us:,.1f}" in line and f"{a.count:g}" in line
                assert len(line.rstrip()) <= 80
            await pilot.press("3")
            await pilot.pause()
            ops = s.query_one("#op-table", AggTable)
            assert ops.sort_by == "device µs"
            device = [a.device_total_us for a in ops.rows_data]
            assert device == sorted(device, reverse=True)
            i = next(i for i, a in enumerate(ops.rows_data) if a.name == "aten::t")
            assert ops.cell_text(i, "device µs") == "0.0"
            assert ops.rows_data[i].cpu_total_us > 0
            assert float(ops.cell_text(i, "CPU total µs").replace(",", "")) == pytest.approx(
                ops.rows_data[i].cpu_total_us, abs=0.05)
            m = next(i for i, a in enumerate(ops.rows_data) if a.kind == "module")
            assert "nn.Module: " + ops.cell_text(m, "name") == ops.rows_data[m].name  # the kind column says it
            await pilot.press("t")  # per step: 4 syncs over 3 steps
            await pilot.pause()
            sync = next(i for i, a in enumerate(ops.rows_data) if a.name == "cudaDeviceSynchronize")
            assert ops.rows_data[sync].count == 4 and ops.cell_text(sync, "count") == "1.33"
    asyncio.run(run())


def test_a_repaired_trace_warns_and_d_spells_out_diagnostics_and_repairs(tmp_path):
    """The status line only counts; a damaged file warns as it opens, and D shows the list."""
    import gzip

    from tracetui.model.trace import LOST_GPU_NOTE
    from tracetui.model.tree import DIAGNOSTICS

    raw = gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes())
    p = tmp_path / "killed.json"
    p.write_bytes(raw[: int(len(raw) * 0.6)])  # a killed exporter: the GPU part is gone
    async def run():
        app = TraceApp([p])
        async with app.run_test(size=(80, 24)) as pilot:  # a detail pane 6 rows high
            s = await explorer(pilot)
            assert any("ends early" in n.message and LOST_GPU_NOTE in n.message for n in app._notifications)
            assert "repairs" in str(s.query_one("#status").render())
            await pilot.press("d", "D")  # details hidden first: D shows them again
            await pilot.pause()
            assert s.current == 0 and not s.query_one("#details").has_class("hidden")
            await pilot.pause()
            pane = s.query_one(DetailPane)
            assert pane.render_line(0).text.startswith("repairs")  # scrolled to them
            top = pane.scroll_y
            await pilot.press("tab", "pagedown")  # the README's way to read on: focus the pane, scroll
            await pilot.pause()
            assert app.focused is pane and pane.scroll_y > top
            text = detail_text(s)
            assert "ends early" in text and LOST_GPU_NOTE in text
            diag = s.trace.tree.diagnostics
            assert diag["partial_overlaps"] > 0
            assert f"partial overlaps: {diag['partial_overlaps']}" in text
            assert DIAGNOSTICS["partial_overlaps"] in text and "\\x0a" not in text  # no escaped newlines
    asyncio.run(run())


def test_names_are_plain_text(tmp_path):
    import json
    evil = "aten::[bold red]x[/] \x1b[2J"
    p = tmp_path / "evil.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1 \x1b[2J", "pid": 1, "tid": 1, "ts": 0.0, "dur": 9.0},
        {"ph": "X", "cat": "cpu_op", "name": evil, "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0,
         "args": {"\x1b]0;key\x07": 1}}]}))

    async def run():
        from tracetui.ui.timeline import Timeline

        app = TraceApp([p])
        async with app.run_test(size=(100, 30)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "aten")
            await wait_for(pilot, lambda: s.trace.store.args_loaded)
            s.show_node(s.current)  # with its args: their keys are names from the trace too
            text = detail_text(s)
            assert "[bold red]x[/]" in text and "\\x1b[2J" in text and "\x1b" not in text
            assert "\\x1b]0;key" in text and "\x07" not in text
            await pilot.press("4")
            await pilot.pause()
            lanes = "\n".join(strip.text for strip in s.query_one(Timeline).build_strips())
            assert "ProfilerStep#1 \\x1b[2J" in lanes and "\x1b" not in lanes
    asyncio.run(run())


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """A trace that takes long enough to load for keys to arrive while it does (60k events)."""
    from benchmarks.make_large_trace import replicate
    big = tmp_path_factory.mktemp("big") / "big.json"
    replicate(TRACES / "mlp_eager.json.gz", big, 60_000)
    return big


def test_loading_shows_progress_and_cancel_keeps_keys_alive(big_trace):
    async def run():
        app = TraceApp([big_trace])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LoadingScreen))
            await pilot.press("question_mark")  # keys answer while the worker runs
            await pilot.pause()
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, ExplorerScreen), timeout=30)
            await pilot.pause()
            # whether the load ended before or after Esc closed the help: nothing left beneath
            assert [type(x).__name__ for x in app.screen_stack[1:]] == ["ExplorerScreen"]
    asyncio.run(run())


def test_a_trace_that_loads_under_the_help_screen_replaces_its_loading_screen(big_trace):
    async def run():
        app = TraceApp([big_trace])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LoadingScreen))
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, ExplorerScreen), timeout=30)
            await pilot.pause()
            assert [type(x).__name__ for x in app.screen_stack[1:]] == ["ExplorerScreen"]
            await pilot.press("escape")  # nothing to go back to: the explorer stays
            await pilot.pause()
            assert isinstance(app.screen, ExplorerScreen)
    asyncio.run(run())


def test_diff_screen_one_cursor_and_next_difference():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"], diff=True)
        async with app.run_test(size=(160, 40)) as pilot:
            s = await diff_screen(pilot)
            await pilot.press("n")
            assert s.result.rows[s.row].status != "same"
            assert s.query_one("#pane-b").cursor_row == s.query_one("#pane-a").cursor_row
            await pilot.press("down")
            await pilot.pause()
            assert s.query_one("#pane-b").cursor_row == s.query_one("#pane-a").cursor_row
            summary = str(s.query_one("#diffsummary").render())
            assert "kernels/step 5 → 4" in summary and "fused 1" in summary
            await pilot.press("u")
            assert "triton_poi_fused__unsafe_view_gelu_mul_0" in str(s.query_one("#fusion-text").render())
    asyncio.run(run())


def test_diff_keys_step_between_differences_switch_layout_and_open_a_side():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"], diff=True)
        async with app.run_test(size=(160, 40)) as pilot:
            s = await diff_screen(pilot)
            rows = s.result.rows
            diffs = [i for i, r in enumerate(rows) if r.status != "same"]
            assert len(diffs) >= 2
            await pilot.press("right_square_bracket")
            first = s.row
            assert first in diffs
            await pilot.press("n")
            second = s.row
            assert second in diffs and second != first
            await pilot.press("left_square_bracket")
            assert s.row == first
            await pilot.press("N")  # wraps to the last difference
            assert s.row == diffs[-1]
            main = s.query_one("#diffmain")
            assert not main.has_class("stacked")  # side by side at 160 columns
            await pilot.press("v")
            await pilot.pause()
            assert main.has_class("stacked")
            await pilot.press("v")
            await pilot.pause()
            assert not main.has_class("stacked")
            await pilot.press("right_square_bracket")
            row = rows[s.row]
            side, item = ("b", row.b) if row.b is not None else ("a", row.a)
            await pilot.press(side)
            await wait_for(pilot, lambda: isinstance(app.screen, ExplorerScreen))
            e = app.screen
            await wait_for(pilot, lambda: getattr(e, "current", None) == item.node)
            assert e.trace is (s.b if side == "b" else s.a)
            await pilot.press("slash", "x")
            await pilot.press("escape")  # first Esc closes the search
            await pilot.pause()
            assert app.screen is e and not e.query_one("#search").has_class("visible")
            await pilot.press("escape")  # the next goes back to the diff
            await pilot.pause()
            assert app.screen is s
    asyncio.run(run())


def test_toggling_python_frames_updates_the_breadcrumb():
    """`p` rebuilds the tree on the same node; the breadcrumb must then show (or hide) its frames."""
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(160, 48)) as pilot:
            s = await explorer(pilot)
            tr = s.trace
            await search(pilot, "Linear_2")
            node = s.current
            frames = [p for p in tr.tree.path(node) if tr.kind(p) == "python"]
            assert frames, "the module sits under Python frames in this trace"
            marker = tr.name(frames[-1])[:20]
            crumb = lambda: str(s.query_one("#breadcrumb").render())  # noqa: E731
            assert marker not in crumb()
            await pilot.press("p")
            await pilot.pause()
            assert s.current == node and marker in crumb()
            await pilot.press("p")
            await pilot.pause()
            assert s.current == node and marker not in crumb()
    asyncio.run(run())


def test_detail_pane_wraps_to_its_width_scrolls_and_follows_resizes():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "nvjet")  # a long kernel name and many detail rows
            pane = s.query_one(DetailPane)
            width = pane.scrollable_content_region.width

            def rows():
                return [pane.render_line(y).text.rstrip() for y in range(pane.scrollable_content_region.height)]

            assert all(len(r) <= width for r in rows())
            assert pane.virtual_size.height > pane.scrollable_content_region.height  # more than fits
            narrow = pane.virtual_size.height
            first = rows()
            pane.scroll_down(animate=False)
            await pilot.pause()
            assert rows() != first and rows()[0] == first[1]  # one row up
            await pilot.resize_terminal(104, 30)  # still stacked (narrow), so the pane gets wider
            await pilot.pause()
            assert pane.scrollable_content_region.width > width
            assert pane.virtual_size.width == pane.scrollable_content_region.width  # re-wrapped at it
            assert pane.virtual_size.height <= narrow and all(len(r) <= pane.virtual_size.width for r in rows())
            assert pane.plain == detail_text(s) and "nvjet" in pane.plain
    asyncio.run(run())


def test_tree_label_width_matches_the_rendered_label():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "nvjet")  # expands a path down to a kernel: rows of every kind
            tree = s.tree
            lines = tree._tree_lines
            assert len(lines) > 10
            for line in lines:
                node = line.node
                want = tree.render_label(node, tree.rich_style, tree.rich_style).cell_len
                assert tree.get_label_width(node) == want, node.label.plain
    asyncio.run(run())


def test_loaded_trace_is_kept_out_of_the_cyclic_gc():
    import gc

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            await wait_for(pilot, lambda: s.trace.store.args_loaded)
            await pilot.pause()
            tracked = {id(o) for o in gc.get_objects()}  # frozen objects are not listed
            assert id(s.trace.tree.names) not in tracked and id(s.trace.store._raw) not in tracked
            assert gc.get_freeze_count() > 0
    asyncio.run(run())  # tests/ui/conftest.py thaws it afterwards


def test_detail_pane_follows_the_cursor_while_hidden():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "nvjet")
            pane = s.query_one(DetailPane)
            await pilot.press("d", "o")  # hide the pane, then jump to the launching op
            await pilot.pause()
            await pilot.press("d")
            await pilot.pause()
            rows = [pane.render_line(y).text.strip() for y in range(pane.scrollable_content_region.height)]
            assert "aten::mm" in pane.plain and any("aten::mm" in r for r in rows)
    asyncio.run(run())


def test_the_cli_head_start_is_used_for_the_first_trace(big_trace, monkeypatch):
    monkeypatch.setattr(split, "MIN_BYTES", 0)  # the 60k-event trace is below the CLI's threshold
    early = start_load(big_trace)
    assert early is not None

    async def run():
        app = TraceApp([big_trace], early=early)
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            assert s.trace.path == big_trace and split.TIMES.get("child share") == early.share
    asyncio.run(run())
    assert reaped(early.pending.pid)


def test_cancelling_the_load_reaps_the_head_start_child(big_trace, monkeypatch):
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    early = start_load(big_trace)

    async def run():
        app = TraceApp([big_trace], early=early)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("escape")  # at once: the worker may or may not have started
            await pilot.pause()
            await app.workers.wait_for_complete()
    asyncio.run(run())
    assert reaped(early.pending.pid)  # consumed or cancelled: no child outlives the app


def test_table_keys_pressed_before_the_hidden_tabs_mount_still_apply():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            first = await explorer(pilot)
            s = ExplorerScreen(first.trace)
            s.action_toggle_avg()  # before the screen is even composed
            await app.push_screen(s)
            assert not s.kernel_table.is_mounted  # still behind its Lazy
            s.action_tab("kernels")
            await wait_for(pilot, lambda: s.kernel_table.is_mounted and s.op_table.is_mounted)
            await pilot.pause()
            assert s.kernel_table.per_step and s.op_table.per_step
            assert "per step" in s.kernel_table.border_subtitle
            assert app.focused is s.kernel_table
    asyncio.run(run())


def test_quitting_during_a_load_does_not_wait_for_it(monkeypatch):
    import threading
    import time

    import tracetui.ui.loading as app_mod
    release = threading.Event()

    def endless_load(path, progress=None, early=None):  # a decode that cannot be interrupted
        release.wait(60)
        raise app_mod.TraceError(path, "stopped by the test")

    monkeypatch.setattr(app_mod, "load_trace", endless_load)
    t0 = time.perf_counter()

    def run():
        async def go():
            app = TraceApp([TRACES / "mlp_eager.json.gz"])
            async with app.run_test(size=(80, 24)) as pilot:
                await wait_for(pilot, lambda: isinstance(app.screen, LoadingScreen))
                await pilot.press("q")
        asyncio.run(go())  # asyncio.run waits for its default executor's threads at the end

    try:
        run()
        assert time.perf_counter() - t0 < 20  # not the 60 s the load would have taken
    finally:
        release.set()


def test_loading_progress_reaches_the_screen_in_order(big_trace, monkeypatch):
    seen = []
    real = LoadingScreen._progress

    def record(self, stage, pct):
        seen.append((stage, pct))
        real(self, stage, pct)

    monkeypatch.setattr(LoadingScreen, "_progress", record)
    monkeypatch.setattr(loading_module, "PROGRESS_EVERY_S", 0.0)  # every update, to check their order

    async def run():
        app = TraceApp([big_trace])
        async with app.run_test(size=(80, 24)) as pilot:
            await explorer(pilot)
    asyncio.run(run())
    pcts = [p for _, p in seen]
    assert any("decoding" in s for s, _ in seen) and pcts == sorted(pcts) and len(pcts) >= 3
    every = len(pcts)

    seen.clear()
    monkeypatch.setattr(loading_module, "PROGRESS_EVERY_S", 3600.0)  # throttled: the first one only
    asyncio.run(run())
    assert len(seen) == 1 < every and seen[0][1] == 0.0


def test_footer_follows_focus_but_is_not_rebuilt_for_the_same_keys(monkeypatch):
    from textual.widgets._footer import FooterKey

    from tracetui.ui.footer import StableFooter
    rebuilt = []
    real = StableFooter.recompose

    async def counting(self):
        rebuilt.append(1)
        return await real(self)

    monkeypatch.setattr(StableFooter, "recompose", counting)

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            keys = lambda: {k.key for k in s.query(FooterKey) if k.display}  # noqa: E731  (shown)
            assert {"q", "n", "slash"} <= keys()
            rebuilt.clear()
            await pilot.press("down", "down", "up")
            await pilot.pause()
            assert rebuilt == []  # same focus, same keys: nothing to rebuild
            await pilot.press("slash")
            await pilot.pause()
            assert "q" not in keys() and "n" not in keys()  # typed into the search box, not bound
            await pilot.press("g", "e", "l", "u", "enter")
            await pilot.pause()
            # the first `/` adds `f1 Help` to the footer's widgets (the box takes `?`): one rebuild
            assert {"q", "n"} <= keys() and len(rebuilt) == 1
            rebuilt.clear()
            await pilot.press("slash")
            await pilot.pause()
            assert "q" not in keys() and "f1" in keys() and "question_mark" not in keys()
            await pilot.press("escape")
            await pilot.pause()
            assert {"q", "n", "question_mark"} <= keys() and "f1" not in keys()
            assert rebuilt == []  # then shown and hidden, both ways
            for views, rebuilds in (("41434131", 2), ("43134141", 0)):
                rebuilt.clear()
                for view in views:  # the timeline's keys, the op table's, the tree's
                    await pilot.press(view)
                    await pilot.pause()
                    shown = [(w.key, w.description) for w in s.query(FooterKey)
                             if w.display and not w.has_class("-command-palette")]
                    want: dict = {}  # one key per action, the first, in order (as Footer.compose)
                    for _, b, _, _ in s.active_bindings.values():
                        if b.show:
                            want.setdefault(b.action, (b.key, b.description))
                    assert shown == list(want.values())
                # the first time a view shows keys the footer never had, it is rebuilt with them
                # (the timeline's, the op table's); then every switch shows and hides its widgets
                assert len(rebuilt) == rebuilds
    asyncio.run(run())


def test_the_trees_cached_scrollbars_paint_what_an_uncached_bar_paints():
    """The tree's scrollbars keep their painted lines per look (position, sizes, colours): after
    each key they must equal a fresh paint of the same bar (Textual's own, its caches cleared)."""
    from textual.geometry import Region
    from textual.widget import Widget

    from tracetui.ui.scrollbars import _CachedBar

    def paint(lines):
        return [[(seg.text, str(seg.style)) for seg in strip] for strip in lines]

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            bar = s.tree.vertical_scrollbar
            assert isinstance(bar, _CachedBar)
            looks = set()
            for keys in ((), ("p",), ("G",), ("slash",), ("escape",), ("g",), ("G",)):
                await pilot.press(*keys)
                await pilot.pause()
                if not bar.display or not bar.size.height:
                    continue
                crop = Region(0, 0, *bar.size)
                cached = paint(bar.render_lines(crop))
                bar._styles_cache.clear()
                assert cached == paint(Widget.render_lines(bar, crop)), keys
                looks.add(str(cached))
            assert len(looks) >= 2  # the thumb moved (G, g) or the colours changed (focus): repainted
    asyncio.run(run())



def test_a_vertical_bar_put_together_from_its_lines_paints_what_textual_paints(monkeypatch):
    """A vertical bar at a new position reuses the lines it drew for each segment (track above,
    thumb, track below, the thumb's partial end glyphs): at every scroll position of a tall tree,
    in both focus colours, it must equal Textual's own paint of the same bar; and once its
    segments are known, most positions draw nothing through Textual."""
    from textual.geometry import Region
    from textual.widget import Widget

    from tracetui.ui.scrollbars import _CachedBar

    drawn = []
    real = Widget.render_lines

    def counted(self, crop):
        if isinstance(self, _CachedBar):
            drawn.append(self)
        return real(self, crop)

    def paint(lines):
        return [[(seg.text, str(seg.style), str(seg.style.meta) if seg.style else "") for seg in strip]
                for strip in lines]

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("p", *(["right", "down"] * 12))  # frames shown, rows opened: a tall tree
            await pilot.pause()
            tree, bar = s.tree, s.tree.vertical_scrollbar
            assert tree.max_scroll_y > 2 * tree.size.height and bar.display
            monkeypatch.setattr(Widget, "render_lines", counted)
            positions, through_textual = 0, 0
            for focused in (True, False):
                (tree.focus if focused else s.query_one("#details").focus)()
                await pilot.pause()
                for y in range(0, int(tree.max_scroll_y) + 1):
                    tree.scroll_to(y=y, animate=False)
                    await pilot.pause()
                    crop = Region(0, 0, *bar.size)
                    drawn.clear()
                    bar._looks = None  # the per-look cache: what is tested here is under it
                    ours = paint(bar.render_lines(crop))
                    through_textual += bool(drawn)
                    positions += 1
                    bar._styles_cache.clear()
                    assert ours == paint(real(bar, crop)), (focused, y)
            assert positions >= 10 and through_textual <= positions // 2, (through_textual, positions)
    asyncio.run(run())

def test_search_box_floats_above_the_status_line_without_resizing_the_panes():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            before = (s.tree.region, s.query_one("#details").region)
            await search(pilot, "gelu")  # the box is open while typing, closed by Enter
            await pilot.press("slash", "g")
            await pilot.pause()
            box, status = s.query_one("#search"), s.query_one("#status")
            assert box.has_class("visible") and (s.tree.region, s.query_one("#details").region) == before
            assert box.region.bottom <= status.region.y  # the status line (match count) stays visible
            assert str(status.render()).startswith(f"{s.matches.size:,} matches")
    asyncio.run(run())
