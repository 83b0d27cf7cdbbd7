"""The detail pane: a Line-API view of one Rich Text, wrapped once per update.

A Static inside a VerticalScroll re-measures its content on every layout and asks for a layout
on every update, which cost each cursor move a second full-screen frame. This view wraps the
text once, keeps the lines, and draws only the rows on screen.
"""
from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from tracetui.ui.focus_now import FocusApplied
from tracetui.ui.lean_styles import LeanLines
from tracetui.ui.scrollbars import CachedScrollbars


class DetailPane(FocusApplied, LeanLines, CachedScrollbars, ScrollView, can_focus=True):
    """Shows one Text; ``show`` replaces it and scrolls back to the top."""

    # Its box is fixed by the layout; a new text changes only the content height, so a new text
    # updates the scrollbars instead of relayouting (and repainting) the whole screen.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0))

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.text = Text()
        self._strips: list[Strip] = []  # wrapped at virtual_size.width

    @property
    def plain(self) -> str:
        return self.text.plain

    def show(self, text: Text) -> None:
        self.text = text
        self._wrap()
        self.scroll_to(0, 0, animate=False)

    def scroll_to_heading(self, *headings: str) -> None:
        """Scroll so the first line that starts with one of ``headings`` is the top row (the
        pane is 6 rows high at 80x24: a section further down would stay out of sight)."""
        for y, strip in enumerate(self._strips):
            if strip.text.startswith(headings):
                self.scroll_to(0, y, animate=False)
                return

    def _wrap(self) -> None:
        console = self.app.console
        style = self.rich_style
        width = self.scrollable_content_region.width
        if width > 0:  # styled and padded by Rich as it splits the lines (as Strip's would, one pass)
            lines = console.render_lines(self.text, console.options.update_width(width), style=style)
        else:  # hidden (another view is shown, or `d`): at the width it will have when shown, so
            # showing it again (Enter in the memory view) lays the screen out once, not twice
            full, bar = self.container_size.width, self.styles.scrollbar_size_vertical
            if full <= bar:  # never laid out: wrap when it is shown, at its width then
                self._strips = []
                self.virtual_size = Size(0, 0)
                return
            with_bar = self.show_vertical_scrollbar
            for _ in range(2):  # a text that takes the scrollbar (or gives it back) wraps twice
                width = full - (bar if with_bar else 0)
                lines = console.render_lines(self.text, console.options.update_width(width), style=style)
                if (len(lines) > self.container_size.height) == with_bar:
                    break
                with_bar = not with_bar
        self._strips = [Strip(line, width) for line in lines]
        self.virtual_size = Size(width, len(self._strips))
        self.refresh()

    def on_resize(self) -> None:
        if self.scrollable_content_region.width != self.virtual_size.width:
            self._wrap()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.scrollable_content_region.width
        if i >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        strip = self._strips[i]  # wrapped at this width, styled once
        return strip if not scroll_x and width == self.virtual_size.width else strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
