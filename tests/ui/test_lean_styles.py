"""LeanStylesCache draws every line as Textual's StylesCache does: the explorer's tree, detail
pane and memory tables in their states, and widgets with each style it leaves to StylesCache
(outline, hatch, tint, opacity, text opacity) or draws itself (borders, padding, titles)."""
from __future__ import annotations

import asyncio

from textual._styles_cache import StylesCache
from textual.app import App
from textual.widgets import Static

from tracetui.ui.app import TraceApp
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.lean_styles import LeanLines, LeanStylesCache
from tracetui.ui.line_table import LineTable
from tracetui.ui.tree_view import TraceTree

from tests.ui.test_memory_view import MEM, _warm_view


def _lines(widget, cache) -> list:
    """Every line of ``widget`` as ``cache`` styles it (a fresh cache: nothing reused)."""
    strips = cache.render_widget(widget, widget.region.reset_offset)
    return [(s.cell_length, [(seg.text, seg.style) for seg in s]) for s in strips]


def _same(widget) -> int:
    assert isinstance(widget._styles_cache, LeanStylesCache)
    lean, ref = _lines(widget, LeanStylesCache()), _lines(widget, StylesCache())
    assert len(lean) == len(ref) == widget.region.height
    for y, (a, b) in enumerate(zip(lean, ref)):
        assert a == b, f"{widget!r} row {y}: {a} vs {b}"
    return len(lean)


def test_explorer_widgets_draw_as_textual_draws_them():
    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot)
            tree, pane = screen.query_one(TraceTree), screen.query_one(DetailPane)
            rows = _same(tree) + _same(pane)  # wide: the pane has a left border and padding
            screen.jump(int(screen.trace.tree.children(screen.trace.steps[0])[-1]))  # deeper rows
            await pilot.pause()
            pane.scroll_to(0, 3, animate=False)
            await pilot.pause()
            rows += _same(tree) + _same(pane)
            await pilot.press("tab")  # the tree blurred: its other cursor and guide styles
            await pilot.pause()
            rows += _same(tree) + _same(pane)
            await pilot.press("5")
            await pilot.pause()
            for table in view.query(LineTable):  # bordered all round, with a title and subtitle
                rows += _same(table)
            await pilot.resize_terminal(80, 24)  # narrow: the pane's border on top
            await pilot.press("1")
            await pilot.pause()
            rows += _same(tree) + _same(pane)
            assert rows > 200
    asyncio.run(run())


class _Lean(LeanLines, Static):
    pass


CSS = """
_Lean { height: 4; }
#border { border: round red; padding: 0 2; border-title-align: center; }
#sides { border-left: wide blue; border-right: tall green; padding: 1 1; }
#outline { outline: solid red; }
#hatch { hatch: cross red; }
#tint { tint: red 30%; }
#opacity { opacity: 50%; }
#text-opacity { text-opacity: 60%; }
#plain { background: $panel; }
"""


def test_each_style_draws_as_textual_draws_it():
    class Styled(App):
        def compose(self):
            for name in ("border", "sides", "outline", "hatch", "tint", "opacity", "text-opacity", "plain"):
                w = _Lean("a line\nand a second, longer one, cut at the width", id=name)
                w.border_title = "title"
                w.border_subtitle = "sub"
                yield w
    Styled.CSS = CSS

    async def run():
        app = Styled()
        async with app.run_test(size=(40, 40)) as pilot:
            await pilot.pause()
            assert sum(_same(w) for w in app.query(_Lean)) == 8 * 4
    asyncio.run(run())
