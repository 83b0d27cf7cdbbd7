"""Textual's Tree, repainted cheaply: same pixels, less work per row and per change.

Measured on a 270k-event trace, a jump to a search match (`n`) cost a screen relayout, two
frames, and ~0.5 ms per visible row, most of it rebuilding each row's label as Rich Text. This
mixin changes how, never what, the Tree draws (a test compares every cell with Textual's own
renderer):

- the box is fixed by the CSS, so a new row count updates the scrollbars instead of asking the
  whole screen for a layout;
- component styles are looked up once per repaint, not once per row;
- a row's label is rendered once per (node, state) and reused wherever the row moves; only the
  guides and the row's own style are rebuilt.

It relies on Textual 8.2 Tree internals (``_render_line``, ``_tree_lines``, ``_line_cache``);
the equivalence test fails loudly if they change.
"""
from __future__ import annotations

from contextlib import contextmanager

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual._segment_tools import line_pad
from textual.geometry import Size
from textual.reactive import Reactive
from textual.strip import Strip

LABEL_CACHE_MAX = 20_000


class _Frame:
    """The component styles of one repaint."""

    def __init__(self, tree) -> None:
        cs, crs = tree.get_component_styles, tree.get_component_rich_style
        self.base = tree.rich_style
        self.base_hidden = cs("tree--guides").color.a == 0
        self.hover_hidden = cs("tree--guides-hover").color.a == 0
        self.selected_hidden = cs("tree--guides-selected").color.a == 0
        self.guide = crs("tree--guides", partial=True)
        self.guide_hover = self.guide + crs("tree--guides-hover", partial=True)
        self.guide_selected = self.guide + crs("tree--guides-selected", partial=True)
        self.highlight_line = crs("tree--highlight-line")
        self.label = crs("tree--label", partial=True)
        self.highlight = crs("tree--highlight", partial=True)
        self.cursor = crs("tree--cursor", partial=False)
        self.focus = tree.has_focus
        self._guides: dict = {}
        self._tree = tree

    def guides(self, style: Style, hidden: bool) -> tuple[str, str, str, str]:
        """Space, vertical, terminator and cross strings, as Tree._render_line makes them."""
        key = (style, hidden)
        g = self._guides.get(key)
        if g is None:
            t = self._tree
            if t.show_guides and not hidden:
                lines = t.LINES["default"]
                if style.bold:
                    lines = t.LINES["bold"]
                elif style.underline2:
                    lines = t.LINES["double"]
            else:
                lines = ("  ", "  ", "  ", "  ")
            depth = max(0, t.guide_depth - 2)
            g = self._guides[key] = tuple(f"{c[0]}{c[1] * depth} " for c in lines)
        return g


class FastTreeLines:
    """Mix in before ``textual.widgets.Tree``."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0))  # no layout=True: see the module docstring
    _frame: _Frame | None = None

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    _resized_to: Size | None = None

    def _on_resize(self, event) -> None:
        """Tree._on_resize drops every line; a tree shown again at its size (back from another
        view, Enter in the memory view) keeps them, which saves that key a second frame."""
        if event.size == self._resized_to:
            event.prevent_default()  # not Tree._on_resize
        self._resized_to = event.size

    _held = 0  # > 0: inside held_invalidation(); 1 + whether an invalidation waits

    def _invalidate(self) -> None:
        if self._held:  # adding a batch of rows: once at the end, not once per row
            self._held = 2
            return
        self._clear_line_cache()
        self._updates += 1
        self.root._reset()
        self.refresh()

    @contextmanager
    def held_invalidation(self):
        """Add many rows with one invalidation (TreeNode.add invalidates the tree each time:
        ~25 µs a row, 5 ms for the 200 children of a step on a jump into it)."""
        self._held = 1
        try:
            yield
        finally:
            waiting, self._held = self._held == 2, 0
            if waiting:
                self._invalidate()

    def render_lines(self, crop):
        self._frame = _Frame(self)
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        frame = self._frame
        if frame is None:
            return super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, frame.base)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        frame = self._frame
        if frame is None or frame.base is not base_style:
            return super()._render_line(y, x1, x2, base_style)
        tree_lines = self._tree_lines
        width = self.size.width
        if y >= len(tree_lines):
            return Strip.blank(width, base_style)
        line = tree_lines[y]
        is_hover = self.hover_line >= 0 and any(node._hover for node in line.path)
        key = (y, is_hover, width, self._updates, self._pseudo_class_state,
               tuple(node._updates for node in line.path))
        strip = self._line_cache.get(key)
        if strip is None:
            strip = self._line_cache[key] = self._build_line(frame, y, line, is_hover, width)
        return strip.crop(x1, x2)

    def _build_line(self, f: _Frame, y: int, line, is_hover: bool, width: int) -> Strip:
        line_style = (f.highlight_line if is_hover else f.base) + Style(meta={"line": y})
        segments: list[Segment] = []
        cells = 0
        path = line.path
        hover = path[0]._hover
        selected = path[0]._selected and f.focus
        guide_style, hidden = f.guide, True
        for node in path[1:]:
            hidden = f.base_hidden
            if hover:
                guide_style, hidden = f.guide_hover, f.hover_hidden
            if selected:
                guide_style, hidden = f.guide_selected, f.selected_hidden
            if node is not path[-1]:
                space, vertical, _, _ = f.guides(guide_style, hidden)
                guide = space if node.is_last else vertical
                if guide:
                    segments.append(Segment(guide, line_style + guide_style))
                    cells += cell_len(guide)
            hover = hover or node._hover
            selected = (selected or node._selected) and f.focus
        if len(path) > 1:
            _, _, terminator, cross = f.guides(guide_style, hidden)
            end = terminator if line.last else cross
            if end:
                segments.append(Segment(end, line_style + guide_style))
                cells += cell_len(end)
        label_style = f.label
        if self.hover_line == y:
            label_style += f.highlight
        if self.cursor_line == y:
            label_style += f.cursor
        label, label_cells = self._label_segments(path[-1], line.node._id, label_style)
        segments.extend([Segment(text, line_style + style) for text, style in label])
        cells += label_cells
        segments = line_pad(segments, 0, max(self.virtual_size.width, width) - cells, line_style)
        return Strip(segments)

    def _label_segments(self, node, node_id: int, label_style: Style) -> tuple[list, int]:
        """The label rendered with no base style (the row's is added per row), cached."""
        cache = self.__dict__.setdefault("_label_cache", {})
        key = (node._id, node._updates, node.is_expanded, node._allow_expand, node_id, label_style)
        got = cache.get(key)
        if got is None:
            if len(cache) >= LABEL_CACHE_MAX:
                cache.clear()
            text = self.render_label(node, Style.null(), label_style).copy()
            text.stylize(Style(meta={"node": node_id}))
            segs = [(s.text, s.style or Style.null()) for s in text.render(self.app.console)]
            got = cache[key] = (segs, text.cell_len)
        return got
