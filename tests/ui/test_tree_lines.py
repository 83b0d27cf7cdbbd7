"""FastTreeLines draws every tree row cell for cell as Textual's own Tree renderer does."""
from __future__ import annotations

import asyncio

from textual.widgets import Tree

from tracetui.ui.app import TraceApp
from tracetui.ui.tree_lines import _Frame

from tests.conftest import TRACES
from tests.ui.test_app import explorer, search


def _cells(strip) -> list:
    return [(ch, seg.style) for seg in strip for ch in seg.text]


def _compare_all_rows(t) -> int:
    frame = _Frame(t)
    width = t.size.width
    checked = 0
    for y in range(t.last_line + 3):  # and two rows past the end
        t._frame = frame
        t._line_cache.clear()
        fast = t._render_line(y, 0, width, frame.base)
        t._frame = None
        t._line_cache.clear()
        ref = Tree._render_line(t, y, 0, width, frame.base)
        assert _cells(fast) == _cells(ref), f"row {y}: {fast.text!r} vs {ref.text!r}"
        checked += 1
    return checked


def test_rows_match_textuals_renderer_in_every_state():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            t = s.tree
            rows = _compare_all_rows(t)  # as opened: cursor on a step
            await search(pilot, "gelu")  # deep rows, cursor on a kernel
            assert _compare_all_rows(t) > rows
            t.hover_line = 2  # the mouse over a row: highlighted row and guides
            await pilot.pause()
            _compare_all_rows(t)
            t.hover_line = -1
            await pilot.press("p")  # Python frames shown: a deeper tree
            await pilot.pause()
            _compare_all_rows(t)
            s.query_one("#details").focus()  # the tree unfocused: other cursor and guide styles
            await pilot.pause()
            assert not t.has_focus
            _compare_all_rows(t)
            # and the cached labels stay right when a row's state changes under them
            t.focus()
            await pilot.press("g", "space")
            await pilot.pause()
            _compare_all_rows(t)
    asyncio.run(run())
