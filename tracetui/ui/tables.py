"""Kernel and op tables: every name aggregated with count, times and share; sortable.

Numbers come first and the name last (as ``nsys stats`` prints them): a kernel's C++ name runs
to hundreds of characters, and put first it pushed every number past the edge of an 80-column
terminal. Each table has only columns that mean one thing: GPU time for kernels; CPU total,
CPU self and the device time of what an op launched for ops.
"""
from __future__ import annotations

from rich.cells import cell_len as _str_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracetui.model.stats import Agg
from tracetui.model.trace import Trace

from tracetui.model.names import shorten_cpp

from tracetui.ui.focus_now import FocusApplied
from tracetui.ui.format import KIND_STYLE, fit, fit_distinct, plain

KERNEL_COLUMNS = ("share %", "total µs", "count", "mean µs", "kind", "name")
KERNEL_SORTS = ("total µs", "count", "mean µs", "name")
OP_COLUMNS = ("CPU total µs", "CPU self µs", "device µs", "count", "kind", "name")
OP_SORTS = ("CPU total µs", "CPU self µs", "device µs", "count", "name")
PER_STEP_COLUMNS = frozenset({"total µs", "count", "CPU total µs", "CPU self µs", "device µs"})
"""Columns divided by the step count in per-step mode (``t``): their headers say "/step"."""
NUMERIC = frozenset(KERNEL_COLUMNS + OP_COLUMNS) - {"kind", "name"}

OP_LABELS = {"CPU total µs": "CPU µs", "CPU self µs": "self µs", "device µs": "dev µs"}
"""The op table's headers (its column keys stay the long names): at 80 columns the long headers
left the name 18 visible cells (``autograd::e…dmmBac``); short ones and the kind as its glyph leave
it what an 80-column screen has after the figures (about 30)."""

MODULE_PREFIX = "nn.Module: "
NAME_CHARS = 300
"""Longer names are cut in the table (the detail pane has the whole name, one Enter away)."""
MIN_NAME = 24
"""The name column never gets fewer cells than this: narrower, the numbers scroll off instead."""


def cell_len(cell) -> int:
    """Cells a table cell takes (a Text or a str)."""
    return cell.cell_len if isinstance(cell, Text) else _str_len(cell)


class AggTable(FocusApplied, DataTable):
    """One aggregate table; ``s`` cycles the sort column, Enter jumps to the first occurrence."""

    BINDINGS = [Binding("s", "cycle_sort", "Sort"), Binding("S", "reverse_sort", "Reverse sort", show=False)]

    def __init__(self, trace: Trace, kernels: bool, per_step: bool = False, **kw):
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.trace, self.kernels, self.per_step = trace, kernels, per_step
        self.columns_shown = KERNEL_COLUMNS if kernels else OP_COLUMNS
        self.sort_keys = KERNEL_SORTS if kernels else OP_SORTS
        # ops of a GPU trace: what they launched first; of a CPU-only one: where the CPU went
        self.sort_by = "total µs" if kernels else ("device µs" if trace.has_gpu else "CPU total µs")
        self.descending = True
        self.rows_data: list[Agg] = []
        self.name_width = self.natural_name_width = 0  # the name column's cells, and its names' widest

    def on_mount(self) -> None:
        self.refill()

    def _value(self, a: Agg, col: str):
        """The number (or sort key) a column shows for row ``a``; per step when ``per_step``."""
        div = self.trace.n_steps if self.per_step and self.trace.n_steps else 1
        if col == "name":
            return a.name.lower()
        if col == "mean µs":
            return a.mean_device_us
        return {"count": a.count, "total µs": a.device_total_us, "device µs": a.device_total_us,
                "CPU total µs": a.cpu_total_us, "CPU self µs": a.cpu_self_us}[col] / div

    def _cell(self, a: Agg, col: str, grand: float):
        if col == "name":  # the kind column says "module": its "nn.Module: " prefix only took width
            name = a.name[len(MODULE_PREFIX):] if a.kind == "module" and a.name.startswith(MODULE_PREFIX) else a.name
            if self.kernels:
                name = self._kernel_label(a)
            return plain(fit(name, NAME_CHARS))
        if col == "kind":  # ops: the tree's glyph (◆ step, ✎ annotation, ▣ module, ● op, → runtime)
            if self.kernels:
                return a.kind
            glyph, style = KIND_STYLE.get(a.kind, ("?", ""))
            return Text(glyph, style=style)
        if col == "share %":  # a share is the same per step or in all: both sides divide alike
            return Text(f"{100 * a.device_total_us / grand:.1f}", justify="right")
        v = self._value(a, col)
        if col == "count":  # per step it can be a fraction (a call made in 4 of 3 steps: 1.33)
            return Text(f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}", justify="right")
        return Text(f"{v:,.2f}" if col == "mean µs" else f"{v:,.1f}", justify="right")

    def refill(self) -> None:
        tr = self.trace
        rows = tr.kernel_table if self.kernels else [a for a in tr.op_table if a.kind != "python"]
        rows = sorted(rows, key=lambda a: self._value(a, self.sort_by), reverse=self.descending)
        self.rows_data = rows
        grand = sum(a.device_total_us for a in rows) or 1.0
        self.clear(columns=True)
        arrow = " ↓" if self.descending else " ↑"
        labels = {}
        for col in self.columns_shown:  # the sorted column's header carries the arrow
            per = self.per_step and col in PER_STEP_COLUMNS
            text = col if self.kernels else OP_LABELS.get(col, col)
            labels[col] = Text((text + "/step" if per else text) + (arrow if col == self.sort_by else ""),
                               justify="right" if col in NUMERIC else "left")
        cells = [[self._cell(a, col, grand) for col in self.columns_shown] for a in rows]
        j = self.columns_shown.index("name")
        widths = [max([labels[c].cell_len] + [cell_len(r[i]) for r in cells]) for i, c in enumerate(self.columns_shown)]
        self.name_width = self._name_width(widths, j, len(rows))
        self.natural_name_width = widths[j]
        if widths[j] > self.name_width:  # cut to the width there is, look-alikes kept apart
            for r, text in zip(cells, fit_distinct([r[j].plain for r in cells], self.name_width)):
                r[j] = Text(text)
        for col in self.columns_shown:
            self.add_column(labels[col], key=col)
        for r in cells:
            self.add_row(*r)
        label = f"sorted by {self.sort_by}{arrow}" + (" · per step" if self.per_step else "")
        self.border_subtitle = label

    def _name_width(self, widths: list[int], j: int, n_rows: int) -> int:
        """The name column's width: what the other columns leave of the table's width (the
        terminal's before the first layout), at least ``MIN_NAME``."""
        width = self.size.width or (self.app.size.width if self.is_attached else 0) or 80
        pad = 2 * self.cell_padding
        used = sum(w + pad for i, w in enumerate(widths) if i != j) + pad
        bar = 2 if n_rows + 1 > (self.size.height or self.app.size.height) else 0  # a vertical scrollbar
        return max(MIN_NAME, width - used - bar)

    def on_resize(self, event) -> None:
        """A new width: names are cut again to it, when that changes what they show."""
        if not self.rows_data or len(self.ordered_columns) != len(self.columns_shown):
            return
        j = self.columns_shown.index("name")
        widths = [c.get_render_width(self) - 2 * self.cell_padding for c in self.ordered_columns]
        old, new = self.name_width, self._name_width(widths, j, self.row_count)
        if new != old and self.natural_name_width > min(old, new):
            row = self.cursor_row
            self.refill()
            self.move_cursor(row=row, animate=False)

    def _kernel_label(self, a: Agg) -> str:
        """The kernel's name as the detail pane shortens it, led by the functor where the name
        has one (``mul: at::native::vectorized_elementwise_kernel<8, …>``): at 80 columns two
        elementwise kernels differ in what shows."""
        if len(a.nodes) == 0:
            return shorten_cpp(a.name)
        info = self.trace.kernel_info(int(a.nodes[0]))
        short = info.short or shorten_cpp(a.name)
        return f"{info.hint_op}: {short}" if info.hint_op else short

    def cell_text(self, row: int, col: str) -> str:
        """What row ``row`` shows in column ``col`` (for tests and copy-out)."""
        return str(self.get_cell_at((row, self.columns_shown.index(col)))).strip()

    def action_cycle_sort(self) -> None:
        i = self.sort_keys.index(self.sort_by) if self.sort_by in self.sort_keys else -1
        self.sort_by = self.sort_keys[(i + 1) % len(self.sort_keys)]
        self.descending = self.sort_by != "name"
        self.refill()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.refill()

    def selected(self) -> Agg | None:
        if not self.rows_data or self.cursor_row < 0 or self.cursor_row >= len(self.rows_data):
            return None
        return self.rows_data[self.cursor_row]
