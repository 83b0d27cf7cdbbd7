"""The timeline's marked range as a table (shown under the lanes while a range is marked): each
stream's busy and idle time, the kernels and ops with the most time in it, the launches."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tracetui.model.lanes import fmt_time
from tracetui.model.names import shorten_cpp
from tracetui.textsafe import visible
from tracetui.ui.format import fit


NAME_W = 44
"""Names in the range table are cut to this many characters (the table fits 80 columns)."""


def _short(name: str) -> str:
    """A name as the range table shows it: templates folded, head and tail kept (``fit``)."""
    return fit(shorten_cpp(name), NAME_W)


def range_rows(summary: dict, cut=_short, fmt_time=fmt_time) -> list[tuple[str, str, str, str, str]]:
    """The range summary as table rows: (what, name, count, time, % of the range); ``cut`` writes
    a kernel's or op's name (the export passes ``str``: names whole, as the trace has them),
    ``fmt_time`` a time in ns (the export writes µs as plain numbers)."""
    win = max(summary["window_ns"], 1)
    rows = []
    for st in summary["streams"]:
        rows.append(("busy", f"{st['group']} {st['stream']}", "", fmt_time(st["busy_ns"]),
                     f"{100 * st['busy_ns'] / win:.1f}"))
        rows.append(("idle", f"{st['group']} {st['stream']}", "", fmt_time(st["idle_ns"]),
                     f"{100 * st['idle_ns'] / win:.1f}"))
    for what, key in (("kernel", "kernels"), ("op", "ops")):
        for k in summary[key]:
            rows.append((what, cut(k["name"]), str(k["count"]), fmt_time(k["time_ns"]),
                         f"{100 * k['time_ns'] / win:.1f}"))
    rows.append(("launches", "launch calls started in the range", str(summary["launches"]),
                 fmt_time(summary["launch_ns"]), f"{100 * summary['launch_ns'] / win:.1f}"))
    return rows


class RangeTable(DataTable):
    """The marked range's summary as a table (shown while a range is marked)."""

    COLUMNS = ("what", "name", "count", "time", "%")

    def show(self, summary: dict | None) -> None:
        self.set_class(summary is not None, "visible")
        self.clear(columns=True)
        if summary is None:
            return
        self.add_columns(*self.COLUMNS)
        for row in range_rows(summary):
            self.add_row(*(Text(visible(c)) for c in row))
