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
from tracetui.ui.format import fit, fit_distinct
from tracetui.ui.focus_now import FocusApplied
from tracetui.ui.lean_styles import LeanLines
from tracetui.ui.scrollbars import CachedScrollbars

FITTED = 96
"""Fitted row sets kept per table, by (rows, width): every page of the memory view at one width."""
HEADER = Style(bold=True)
CURSOR = Style(reverse=True)
CURSOR_BLURRED = Style(underline=True)


class Lines(NamedTuple):
    """A table's rows as the lines it draws: the header, one str per row, the column widths, and
    the cells (kept so that a table narrower than its lines can lay them out again, its name
    column cut to the width there is: ``LineTable(flex=...)``)."""
    header: str
    lines: list[str]
    widths: list[int]
    cells: list[list[str]] = []


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
    return Lines(_line(columns, widths, [h for h, _ in columns]), [_line(columns, widths, r) for r in cells],
                 widths, cells)


def _line(columns: list[tuple[str, bool]], widths: list[int], r: list[str]) -> str:
    """One row padded to the column widths; a longer cell keeps its head and tail (``fit``)."""
    out = []
    for (_, right), w, c in zip(columns, widths, r):
        c = fit(c, w)
        out.append(c.rjust(w) if right else c.ljust(w))
    return " " + "  ".join(out) + " "


def relayout(columns: list[tuple[str, bool]], lines: Lines, flex: int, width: int, least: int) -> Lines:
    """``lines`` in ``width`` cells where they are wider: column ``flex`` (a name) gets what the
    others leave, at least ``least`` cells, its names cut apart (``fit_distinct``). What still
    does not fit scrolls, as before."""
    natural = len(lines.header)
    if natural <= width or not lines.cells and lines.lines:
        return lines
    others = sum(w + 2 for j, w in enumerate(lines.widths) if j != flex) + 2
    w = max(least, min(lines.widths[flex], width - others))
    if w >= lines.widths[flex]:
        return lines
    widths = list(lines.widths)
    widths[flex] = w
    names = fit_distinct([r[flex] for r in lines.cells], w)
    cells = [r[:flex] + [n] + r[flex + 1:] for r, n in zip(lines.cells, names)]
    return Lines(_line(columns, widths, [h for h, _ in columns]), [_line(columns, widths, r) for r in cells],
                 widths, lines.cells)


class LineTable(FocusApplied, LeanLines, CachedScrollbars, ScrollView, can_focus=True):
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

    def __init__(self, columns: list[tuple[str, bool]], flex: int | None = None, least: int = 24, **kw) -> None:
        super().__init__(**kw)
        self.columns = columns          # (header, right-justified)
        self.flex, self.least = flex, least  # the name column that takes the width there is, and its least
        self._lines: list[str] = []
        self._header = ""
        self._widths: list[int] = []
        self._given: Lines | None = None   # as set, before fitting them to the width
        self._fit_width = -1
        self._shown_width = 0              # the rows' width when last laid out (0: never)
        self._fitted: dict = {}            # (id of the given lines, width) -> (given, fitted)
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
        if lines is self._given:
            return  # on screen already (a view shown again)
        self._given, self._fit_width = lines, -1
        # hidden (a view not shown yet: the memory view on a new step), at the width it had when
        # shown: fitted at 0 (as given), its Resize on showing fitted and drew it a second time
        self._fit((self.scrollable_content_region.width or self._shown_width) if self.flex is not None else 0)
        self.cursor = min(self.cursor, max(len(self._lines) - 1, 0))
        self.refresh()

    @property
    def laid_out_width(self) -> int:
        """The rows' width when the table was last laid out (0: never; a hidden table keeps it)."""
        return self._shown_width

    def fitted(self, lines: Lines, width: int) -> Lines:
        """``lines`` laid out for ``width`` cells, as ``set_lines`` would show them there (plain
        Python: a worker can fit the pages a table will show before it shows them)."""
        return relayout(self.columns, lines, self.flex, width, self.least) if self.flex is not None else lines

    def keep_fitted(self, lines: Lines, width: int, fitted: Lines) -> None:
        """Keep ``fitted`` (``fitted(lines, width)``) for when ``lines`` is shown at ``width``."""
        if len(self._fitted) >= FITTED:
            self._fitted.pop(next(iter(self._fitted)))
        self._fitted[(id(lines), width)] = (lines, fitted)

    def _fit(self, width: int) -> None:
        """Show the rows laid out for ``width`` cells (the flex column cut to it; 0: as given)."""
        lines = self._given
        if width and self.flex is not None:
            hit = self._fitted.get((id(lines), width))
            if hit is None or hit[0] is not lines:  # ~2 ms for 200 look-alike names: once per page and width
                hit = (lines, self.fitted(lines, width))
                self.keep_fitted(lines, width, hit[1])
            lines = hit[1]
        self._fit_width = width
        self._header, self._lines, self._widths = lines.header, lines.lines, lines.widths
        self.virtual_size = Size(len(self._header), len(self._lines) + 1)

    def on_resize(self, event) -> None:
        if self.flex is not None and self._given is not None:
            width = self._shown_width = self.scrollable_content_region.width
            if width != self._fit_width:
                self._fit(width)
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
