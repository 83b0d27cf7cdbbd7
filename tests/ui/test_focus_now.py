"""Enter's jump from the memory view, and the view keys, draw their result in one frame: the
newly focused widget is drawn focused in the key's frame (ui/focus_now.py), a layout that leaves a
scroll view's sizes alone leaves its scrollbars alone (ui/scrollbars.py), and the screen does not
repaint itself on a focus change. Checked with Pilot at 120x40 on the bundled memory recording,
against Textual's own focus state and the cells on screen."""
from __future__ import annotations

import asyncio

from textual.screen import Screen

from tracetui.ui.app import TraceApp
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.line_table import LineTable
from tracetui.ui.tree_view import TraceTree

from tests.ui.test_memory_view import MEM, _warm_view


def _tick_log(monkeypatch) -> list:
    """(layout asked, ids or class names of the widgets to repaint) per screen update."""
    ticks: list = []
    real = Screen._on_timer_update

    def tick(self):
        if self._layout_required or self._repaint_required or self._dirty_widgets:
            ticks.append((self._layout_required or self._repaint_required,
                          sorted(w.id or type(w).__name__ for w in self._dirty_widgets)))
        return real(self)
    monkeypatch.setattr(Screen, "_on_timer_update", tick)  # before the screen's timer takes it
    return ticks


def _focus_of(screen) -> dict:
    """What Textual says of each widget's focus: has_focus and the :focus pseudo-class."""
    tree, live = screen.query_one(TraceTree), screen.memory_view.query_one("#mem-live", LineTable)
    return {"focused": screen.focused.id, "tree": (tree.has_focus, tree.has_pseudo_class("focus")),
            "live": (live.has_focus, live.has_pseudo_class("focus"))}


def test_enter_jump_draws_the_focused_tree_in_one_frame(monkeypatch):
    """Enter on the live table's row: one screen update, which lays the tree out and draws it
    focused; nothing is repainted after it (the Focus and Blur handlers restyled the tree and
    repainted it and its scrollbars in a second frame, and the layout repainted the tree's and the
    detail pane's scrollbars in a third)."""
    ticks = _tick_log(monkeypatch)
    drawn_focused: list = []
    real_render = TraceTree.render_lines

    def render_lines(self, crop):
        drawn_focused.append(self.has_focus and self.has_pseudo_class("focus"))
        return real_render(self, crop)
    monkeypatch.setattr(TraceTree, "render_lines", render_lines)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot)
            for _ in range(2):  # the second time: the tree's scrollbars exist, as in any later jump
                await pilot.press("5")
                await pilot.pause()
                live = view.query_one("#mem-live", LineTable)
                assert screen.focused is live
                await pilot.press("down")
                await pilot.pause()
                ticks.clear()
                drawn_focused.clear()
                await pilot.press("enter")
                await pilot.pause()
                await pilot.pause()
            assert screen.query_one("#views").current == "tree"
            assert ticks and ticks[0][0], ticks   # the first update lays the tree out
            assert len(ticks) == 1, ticks         # and is the only one
            assert drawn_focused and all(drawn_focused), drawn_focused
            assert _focus_of(screen) == {"focused": "tree-widget", "tree": (True, True), "live": (False, False)}
            # the tree's cursor row is drawn in its focused style, as Textual's Tree would draw it
            tree = screen.query_one(TraceTree)
            row = tree.cursor_line - tree.scroll_offset.y
            cursor = tree.get_component_rich_style("tree--cursor", partial=False)
            styles = [s.style for s in tree.render_line(row) if s.text.strip()]
            assert any(s.bgcolor == cursor.bgcolor for s in styles), (styles, cursor)
    asyncio.run(run())


def test_view_keys_move_focus_and_its_look_in_one_frame(monkeypatch):
    """5 and 1 move the focus in their own frame, and Textual's focus state ends as set_focus
    leaves it; Tab (Textual's own focus change, through Focus and Blur) still moves it."""
    ticks = _tick_log(monkeypatch)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot)
            await pilot.press("5", "1")
            await pilot.pause()
            for key, want in (("5", {"focused": "mem-live", "tree": (False, False), "live": (True, True)}),
                              ("1", {"focused": "tree-widget", "tree": (True, True), "live": (False, False)})):
                ticks.clear()
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()
                assert len(ticks) == 1 and ticks[0][0], (key, ticks)
                assert _focus_of(screen) == want, key
            # 5: the live table's cursor row is drawn as focused (reverse), not blurred (underline)
            await pilot.press("5")
            await pilot.pause()
            live = view.query_one("#mem-live", LineTable)
            row = live.cursor - live.scroll_offset.y + 1  # under the header
            assert any(s.style and s.style.reverse for s in live.render_line(row)), list(live.render_line(row))
            await pilot.press("1")
            await pilot.pause()
            await pilot.press("tab")  # the tree to the detail pane, as Textual moves focus
            await pilot.pause()
            pane, tree = screen.query_one(DetailPane), screen.query_one(TraceTree)
            assert screen.focused is pane and pane.has_focus and pane.has_pseudo_class("focus")
            assert not tree.has_focus and not tree.has_pseudo_class("focus")
            await pilot.press("shift+tab")
            await pilot.pause()
            assert screen.focused is tree and tree.has_focus and not pane.has_focus
    asyncio.run(run())


def test_scrollbars_follow_a_resize():
    """A layout that changes a scroll view's size still updates its scrollbars (the one that
    changes neither its size nor its content's leaves them alone)."""
    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, _ = await _warm_view(pilot)
            tree = screen.query_one(TraceTree)
            for node in range(1, len(screen.trace.tree), 7):  # rows for a vertical scrollbar at either size
                tree.reveal(node)
                if tree.virtual_size.height > 30:
                    break
            await pilot.pause()
            assert tree.virtual_size.height > 30
            for cols, rows in ((100, 16), (100, 22)):
                await pilot.resize_terminal(cols, rows)
                await pilot.pause()
                await pilot.pause()
                bar = tree.vertical_scrollbar
                assert tree.show_vertical_scrollbar
                assert bar.window_size == tree.container_size.height - tree.scrollbar_size_horizontal, (cols, rows)
                assert bar.window_virtual_size == tree.virtual_size.height
            # the bars' CSS changed at the same size: the next layout gives them their new size
            tree.styles.scrollbar_size_vertical = 3
            await pilot.pause()
            await pilot.pause()
            assert tree.scrollbar_size_vertical == 3
            assert tree.vertical_scrollbar.region.width == 3
    asyncio.run(run())
