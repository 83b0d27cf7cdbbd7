"""Scrollbars that paint again only when what they show changed.

Textual repaints a scroll view's scrollbars on every layout (``_size_updated`` refreshes them) and
on every restyle of the view (a focus change is one), through Rich's renderer and a Style sum per
cell: 5-15 ms of a key's CPU for the tree's two bars at 120x40 (search open, search close, back
to the tree; measured per widget on a 270k-event trace). A bar's look depends only on the inputs
in ``_CachedBar._look``; the same inputs give the same lines.

A vertical bar at a new position (a jump, a scroll) is made of lines it has drawn before: each
line is one segment of Textual's bar (``ScrollBarRender.render_bar``: the track above or below
the thumb, the thumb, or one of its eight partial end glyphs), drawn the same way whatever its
row. The bar keeps the line Textual drew for each segment and puts a new position together from
them (~1.5 ms through Textual's renderer for a 44-row bar, ~0.05 ms this way); the segments it
has not drawn yet go through Textual's renderer as a bar of one line each.
"""
from __future__ import annotations

from rich.color import Color
from rich.segment import Segments
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.widget import Widget


LOOKS = 8
"""Looks kept per bar: the view focused and not (search open and closed), at a few positions."""
LINES = 64
"""Lines kept per vertical bar, one per (look but the position, segment)."""


class _CachedBar(ScrollBar):
    _looks: dict | None = None
    _lines: dict | None = None

    def _look(self, crop) -> tuple:
        return (crop, self.window_virtual_size, self.window_size, self.position) + self._style_key()

    def _style_key(self) -> tuple:
        """Everything but the crop and the position that a line of the bar depends on."""
        parent, styles = self.parent, self.parent.styles
        return (self.size, self.thickness, self.vertical, self.grabbed, self.mouse_over, parent.background_colors,
                styles.scrollbar_background, styles.scrollbar_color, styles.scrollbar_background_hover,
                styles.scrollbar_color_hover, styles.scrollbar_background_active, styles.scrollbar_color_active,
                self.screen.styles.scrollbar_color, self.styles.background, self.styles.tint, self.styles.opacity)

    def render_lines(self, crop):
        look = self._look(crop)
        if self._looks is None:
            self._looks = {}
        lines = self._looks.get(look)
        if lines is None:
            if len(self._looks) >= LOOKS:
                self._looks.pop(next(iter(self._looks)))
            lines = self._looks[look] = self._render_lines(crop, look[4:])
        return lines

    def _render_lines(self, crop, style_key: tuple) -> list:
        """The bar's lines: put together from lines drawn before where every segment has one."""
        width, height = self.size
        if not self.vertical or crop != Region(0, 0, width, height) or not height:
            return super().render_lines(crop)
        bar = self.render()
        if type(bar) is not ScrollBarRender:  # another renderer: its lines are its own
            return super().render_lines(crop)
        segments = bar.render_bar(size=height, window_size=bar.window_size, virtual_size=bar.virtual_size,
                                  position=bar.position, vertical=True, thickness=width,
                                  back_color=bar.style.bgcolor or Color.parse("#555555"),
                                  bar_color=bar.style.color or Color.parse("bright_magenta")).segments[:height]
        if len(segments) != height:
            return super().render_lines(crop)
        if self._lines is None:
            self._lines = {}
        known = self._lines
        got = [known.get((style_key, seg)) for seg in segments]
        if None in got:
            missing = list(dict.fromkeys(seg for seg, line in zip(segments, got) if line is None))
            if len(known) + len(missing) > LINES:
                known.clear()
                missing = list(dict.fromkeys(segments))
            for seg, line in zip(missing, self._draw_segments(missing)):
                known[(style_key, seg)] = line
            got = [known[(style_key, seg)] for seg in segments]
        return got

    _drawing: Segments | None = None

    def render(self):
        return self._drawing if self._drawing is not None else super().render()

    def _draw_segments(self, segments: list) -> list:
        """The lines Textual draws for ``segments`` (one per line, as it draws the bar's own),
        through its own renderer, one line each: the bar's content is them for this call."""
        self._drawing = Segments(segments, new_lines=True)
        try:
            self._forget()  # the content, its visual and the line cache: drawn from ``_drawing``
            return Widget.render_lines(self, Region(0, 0, self.size.width, len(segments)))
        finally:
            self._drawing = None
            self._forget()  # nothing of it stays for a later paint

    def _forget(self) -> None:
        self._layout_cache.clear()  # Widget._render keeps the visual there
        self._set_dirty()


class CachedScrollbars:
    """Mix in before a ScrollView: its scrollbars are ``_CachedBar``s (Widget's own properties,
    which create them on first use, with that class), and a layout that leaves its size and its
    scrollable size as they were leaves its scrollbars as they were.

    ScrollView._size_updated compares the compositor's virtual size for it (its region) with its
    own (its content) and so updates and repaints its scrollbars on every layout of the screen:
    after a view switch's frame (Enter's jump into the tree, 1, 5) that was a second frame, ~2 ms
    on a 270k-event trace, for the tree's and the detail pane's bars drawn already in the first.
    """

    _bars_for: tuple | None = None
    """(size, container size, virtual size) of the last scrollbar update."""

    def _scroll_update(self, virtual_size) -> None:
        super()._scroll_update(virtual_size)
        self._bars_for = (self._size, self._container_size, virtual_size)

    def _size_updated(self, size, virtual_size, container_size, layout: bool = True) -> bool:
        if self._bars_for == (size, size - self.styles.gutter.totals, self.virtual_size):
            return self._container_size != container_size  # ScrollView's answer when nothing changed
        return super()._size_updated(size, virtual_size, container_size, layout)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        if self._vertical_scrollbar is None:
            self._vertical_scrollbar = self._new_bar(True, self.scrollbar_size_vertical)
        return self._vertical_scrollbar

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        if self._horizontal_scrollbar is None:
            self._horizontal_scrollbar = self._new_bar(False, self.scrollbar_size_horizontal)
        return self._horizontal_scrollbar

    def _new_bar(self, vertical: bool, thickness: int) -> ScrollBar:
        """A hidden ``_CachedBar`` started as this widget's child, as Widget's properties do."""
        bar = _CachedBar(vertical=vertical, name="vertical" if vertical else "horizontal", thickness=thickness)
        bar.display = False
        self.app._start_widget(self, bar)
        return bar
