"""Scrollbars that paint again only when what they show changed.

Textual repaints a scroll view's scrollbars on every layout (``_size_updated`` refreshes them) and
on every restyle of the view (a focus change is one), through Rich's renderer and a Style sum per
cell: 5-15 ms of a key's CPU for the tree's two bars at 120x40 (search open, search close, back
to the tree; measured per widget on a 270k-event trace). A bar's look depends only on the inputs
in ``_CachedBar._look``; the same inputs give the same lines.
"""
from __future__ import annotations

from textual.scrollbar import ScrollBar


LOOKS = 8
"""Looks kept per bar: the view focused and not (search open and closed), at a few positions."""


class _CachedBar(ScrollBar):
    _looks: dict | None = None

    def _look(self, crop) -> tuple:
        parent, styles = self.parent, self.parent.styles
        return (crop, self.size, self.window_virtual_size, self.window_size, self.position, self.thickness,
                self.vertical, self.grabbed, self.mouse_over, parent.background_colors,
                styles.scrollbar_background, styles.scrollbar_color, styles.scrollbar_background_hover,
                styles.scrollbar_color_hover, styles.scrollbar_background_active, styles.scrollbar_color_active,
                self.screen.styles.scrollbar_color, self.styles.background, self.styles.tint)

    def render_lines(self, crop):
        look = self._look(crop)
        if self._looks is None:
            self._looks = {}
        lines = self._looks.get(look)
        if lines is None:
            if len(self._looks) >= LOOKS:
                self._looks.pop(next(iter(self._looks)))
            lines = self._looks[look] = super().render_lines(crop)
        return lines


class CachedScrollbars:
    """Mix in before a scrollable Widget: its scrollbars are ``_CachedBar``s (Widget's own
    properties, which create them on first use, with that class)."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        if self._vertical_scrollbar is None:
            self._vertical_scrollbar = bar = _CachedBar(vertical=True, name="vertical",
                                                        thickness=self.scrollbar_size_vertical)
            bar.display = False
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        if self._horizontal_scrollbar is None:
            self._horizontal_scrollbar = bar = _CachedBar(vertical=False, name="horizontal",
                                                          thickness=self.scrollbar_size_horizontal)
            bar.display = False
            self.app._start_widget(self, bar)
        return self._horizontal_scrollbar
