"""Kernel and op tables: every name aggregated with count, total, mean, share; sortable."""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable

from tracetui.model.stats import Agg
from tracetui.model.trace import Trace

from .format import plain

COLUMNS = ("name", "kind", "count", "total µs", "mean µs", "share %", "CPU total µs", "CPU self µs")
SORT_KEYS = ("total µs", "count", "mean µs", "CPU total µs", "CPU self µs", "name")


class AggTable(DataTable):
    """One aggregate table; ``s`` cycles the sort column, Enter jumps to the first occurrence."""

    BINDINGS = [Binding("s", "cycle_sort", "Sort"), Binding("S", "reverse_sort", "Reverse sort", show=False)]

    def __init__(self, trace: Trace, kernels: bool, per_step: bool = False, **kw):
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.trace, self.kernels, self.per_step = trace, kernels, per_step
        self.sort_by, self.descending = "total µs", True
        self.rows_data: list[Agg] = []

    def on_mount(self) -> None:
        self.add_columns(*COLUMNS)
        self.refill()

    def _value(self, a: Agg, col: str):
        div = self.trace.n_steps if self.per_step and self.trace.n_steps else 1
        total = a.device_total_us if self.kernels or a.device_total_us else a.cpu_total_us
        return {"name": a.name.lower(), "count": a.count / div, "total µs": total / div,
                "mean µs": total / a.count if a.count else 0, "CPU total µs": a.cpu_total_us / div,
                "CPU self µs": a.cpu_self_us / div}[col]

    def refill(self) -> None:
        tr = self.trace
        rows = tr.kernel_table if self.kernels else [a for a in tr.op_table if a.kind != "python"]
        rows = sorted(rows, key=lambda a: self._value(a, self.sort_by), reverse=self.descending)
        self.rows_data = rows
        grand = sum(self._value(a, "total µs") for a in rows) or 1.0
        self.clear()
        for a in rows:
            total = self._value(a, "total µs")
            self.add_row(plain(a.name[:120]), a.kind, f"{self._value(a, 'count'):g}", f"{total:,.1f}",
                         f"{self._value(a, 'mean µs'):,.2f}", f"{100 * total / grand:.1f}",
                         f"{self._value(a, 'CPU total µs'):,.1f}", f"{self._value(a, 'CPU self µs'):,.1f}")
        label = f"sorted by {self.sort_by} {'↓' if self.descending else '↑'}" + (" · per step" if self.per_step else "")
        self.border_subtitle = label

    def action_cycle_sort(self) -> None:
        i = SORT_KEYS.index(self.sort_by)
        self.sort_by = SORT_KEYS[(i + 1) % len(SORT_KEYS)]
        self.descending = self.sort_by != "name"
        self.refill()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.refill()

    def selected(self) -> Agg | None:
        if not self.rows_data or self.cursor_row < 0 or self.cursor_row >= len(self.rows_data):
            return None
        return self.rows_data[self.cursor_row]
