"""A read-only table drawn with the Line API: rows are formatted once into plain lines, and a
frame draws only the rows on screen (one Segment per cell style), with a cursor row.

Textual's DataTable renders every visible cell through Rich on each refill; in the memory view,
whose two tables are refilled on every step key, that was most of a key's time (~0.3 ms a cell,
~190 ms to open the view on a 270k-event trace).
"""
from __future__ import annotations

from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive, reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tracetui.textsafe import visible

HEADER = Style(bold=True)
CURSOR = Style(reverse=True)
CURSOR_BLURRED = Style(underline=True)


class Lines(NamedTuple):
    """A table's rows as the lines it draws: the header, one str per row, the column widths."""
    header: str
    lines: list[str]
    widths: list[int]


def format_rows(columns: list[tuple[str, bool]], rows: list[tuple], max_widths: list[int] | None = None) -> Lines:
    """Rows (cells are str; names from a trace are made visible here) as padded lines under
    ``columns`` ((header, right-justified)); plain Python, so a worker can format a table
    before it is shown."""
    cells = [[visible(str(c)) for c in r] for r in rows]
    widths = [len(h) for h, _ in columns]
    for r in cells:
        for j, c in enumerate(r):
            widths[j] = max(widths[j], len(c))
    if max_widths:
        widths = [min(w, m) for w, m in zip(widths, max_widths)]

    def line(r: list[str]) -> str:
        out = []
        for (_, right), w, c in zip(columns, widths, r):
            c = c[:w]
            out.append(c.rjust(w) if right else c.ljust(w))
        return " " + "  ".join(out) + " "
    return Lines(line([h for h, _ in columns]), [line(r) for r in cells], widths)


class LineTable(ScrollView, can_focus=True):
    """Columns of plain text; ↑↓ PgUp PgDn Home End move the cursor, Enter posts ``Selected``."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False), Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False), Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1000000000)", "First row", show=False),
        Binding("end", "move(1000000000)", "Last row", show=False),
        Binding("enter", "select", "Jump", show=False),
    ]

    cursor: reactive[int] = reactive(0)
    virtual_size: Reactive[Size] = Reactive(Size(0, 0))

    class Selected(Message):
        """Enter on row ``row`` of ``table``."""

        def __init__(self, table: "LineTable", row: int) -> None:
            super().__init__()
            self.table, self.row = table, row

    def __init__(self, columns: list[tuple[str, bool]], **kw) -> None:
        super().__init__(**kw)
        self.columns = columns          # (header, right-justified)
        self._lines: list[str] = []
        self._header = ""
        self._widths: list[int] = []
        self._base: Style | None = None
        self.set_rows([])

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    @property
    def row_count(self) -> int:
        return len(self._lines)

    def set_rows(self, rows: list[tuple], max_widths: list[int] | None = None) -> None:
        """Replace every row (cells are str; names from a trace are made visible here)."""
        self.set_lines(format_rows(self.columns, rows, max_widths))

    def set_lines(self, lines: "Lines") -> None:
        """Replace every row with rows formatted already (``format_rows``, e.g. in a worker)."""
        if lines.lines is self._lines and lines.header == self._header:
            return  # on screen already (a view shown again)
        self._header, self._lines, self._widths = lines.header, lines.lines, lines.widths
        self.virtual_size = Size(len(self._header), len(self._lines) + 1)
        self.cursor = min(self.cursor, max(len(self._lines) - 1, 0))
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self._base
        if base is None:  # rich_style walks the CSS of every ancestor: once per style change
            base = self._base = self.rich_style
        if y == 0:  # the header stays on top
            return Strip([Segment(self._header[scroll_x:scroll_x + width].ljust(width), base + HEADER)])
        i = scroll_y + y - 1
        if i >= len(self._lines):
            return Strip.blank(width, base)
        style = base
        if i == self.cursor:
            style = base + (CURSOR if self.has_focus else CURSOR_BLURRED)
        return Strip([Segment(self._lines[i][scroll_x:scroll_x + width].ljust(width), style)])

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self._keep_visible()

    def _keep_visible(self) -> None:
        rows = max(self.scrollable_content_region.height - 1, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self._lines:
            self.cursor = max(0, min(len(self._lines) - 1, self.cursor + delta))

    def action_page(self, sign: int) -> None:
        self.action_move(sign * max(self.scrollable_content_region.height - 2, 1))

    def action_select(self) -> None:
        if self._lines:
            self.post_message(self.Selected(self, self.cursor))

    def row_text(self, i: int) -> str:
        """Row ``i`` as drawn (for tests)."""
        return self._lines[i]
