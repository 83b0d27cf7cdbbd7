"""Side-by-side diff of two traces: one cursor moves both panes, rows coloured by class."""
from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tracetui.model.diff import DiffResult, diff_traces
from tracetui.model.names import shorten_cpp
from tracetui.model.trace import Trace
from tracetui.textsafe import visible

from .footer import StableFooter

STATUS_STYLE = {"same": "", "changed": "yellow", "removed": "red", "added": "green", "fused": "bold magenta"}
STATUS_GLYPH = {"same": "=", "changed": "~", "removed": "-", "added": "+", "fused": "⊕"}


class DiffPane(DataTable):
    """One side of the diff; the screen keeps both cursors on the same row."""

    def __init__(self, side: str, **kw):
        super().__init__(cursor_type="row", **kw)
        self.side = side


class DiffScreen(Screen):
    BINDINGS = [
        Binding("n,right_square_bracket", "next_diff", "Next difference"),
        Binding("N,left_square_bracket", "prev_diff", "Prev difference", show=False),
        Binding("u", "fusion", "Fusion view"),
        Binding("v", "layout", "Side by side / stacked"),
        Binding("a", "open('a')", "Open A here", show=False),
        Binding("b", "open('b')", "Open B here", show=False),
    ]

    def __init__(self, a: Trace, b: Trace):
        super().__init__()
        self.a, self.b = a, b
        self.result: DiffResult | None = None
        self._syncing = False
        self.forced_layout: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("aligning…", style="italic"), id="diffsummary")
        with Horizontal(id="diffmain"):
            yield DiffPane("a", id="pane-a")
            yield DiffPane("b", id="pane-b")
        with VerticalScroll(id="fusion"):
            yield Static(id="fusion-text")
        yield StableFooter()

    def on_mount(self) -> None:
        for pane, tr in ((self.query_one("#pane-a", DiffPane), self.a), (self.query_one("#pane-b", DiffPane), self.b)):
            pane.border_title = Text(visible(tr.path.name))  # a Text: never read as markup
            # fixed widths: the layout must not depend on when the rows arrive from the worker
            for label, width in ((" ", 1), ("kernel", 48), ("µs", 9), ("launched by", 30)):
                pane.add_column(label, width=width)
        self.align()

    @work(thread=True, exclusive=True, group="diff")
    def align(self) -> None:
        res = diff_traces(self.a, self.b)  # pure model work, off the UI thread
        self.app.call_from_thread(self._show, res)

    def _show(self, res: DiffResult) -> None:
        self.result = res
        pa, pb = self.query_one("#pane-a", DiffPane), self.query_one("#pane-b", DiffPane)
        for r in res.rows:
            st = STATUS_STYLE.get(r.status, "")
            g = Text(STATUS_GLYPH.get(r.status, "?"), style=st)
            for pane, item in ((pa, r.a), (pb, r.b)):
                if item is None:
                    pane.add_row(g, Text(""), "", "")
                else:
                    pane.add_row(g, Text(visible(shorten_cpp(item.name))[:48], style=st),
                                 f"{item.dur_ns / 1e3:,.1f}", Text(visible(item.op or "(no op)")[:30]))
        from tracetui.model.diff import diff_dict
        j = diff_dict(res)
        A, B = j["a"], j["b"]
        saved = sum(f["launches_saved"] for f in j["fused"])
        s = Text()
        s.append(f"kernels/step {A['kernels_per_step']} → {B['kernels_per_step']}", style="bold")
        s.append(f" · device µs/step {A['device_us_per_step']:,.1f} → {B['device_us_per_step']:,.1f}")
        s.append(f" · CPU µs/step {A['cpu_us_per_step']:,.1f} → {B['cpu_us_per_step']:,.1f}")
        s.append(f" · fused {len(j['fused'])}, launches saved {saved}", style="magenta")
        counts = {}
        for r in res.rows:
            counts[r.status] = counts.get(r.status, 0) + 1
        s.append("\n" + "  ".join(f"{STATUS_GLYPH[k]} {k} {v}" for k, v in counts.items()), style="dim")
        self.query_one("#diffsummary", Static).update(s)
        lines: list[str] = []
        from tracetui.report import print_diff
        print_diff(res, write=lines.append)
        self.query_one("#fusion-text", Static).update(Text("\n".join(lines)))
        self._auto_layout()
        pa.focus()

    def on_resize(self, event) -> None:
        self._auto_layout()

    def _auto_layout(self) -> None:
        stacked = self.forced_layout == "stacked" or (self.forced_layout is None and self.size.width < 120)
        self.query_one("#diffmain").set_class(stacked, "stacked")

    @on(DataTable.RowHighlighted)
    def sync(self, event: DataTable.RowHighlighted) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            for pane in self.query(DiffPane):
                if pane is not event.data_table and pane.row_count > event.cursor_row:
                    pane.move_cursor(row=event.cursor_row)
        finally:
            self._syncing = False

    @property
    def row(self) -> int:
        return self.query_one("#pane-a", DiffPane).cursor_row

    def _goto(self, i: int) -> None:
        self.query_one("#pane-a", DiffPane).move_cursor(row=i)
        self.query_one("#pane-b", DiffPane).move_cursor(row=i)

    def action_next_diff(self, step: int = 1) -> None:
        if not self.result:
            return
        n = len(self.result.rows)
        i = self.row
        for _ in range(n):
            i = (i + step) % n
            if self.result.rows[i].status != "same":
                self._goto(i)
                return
        self.notify("no differences")

    def action_prev_diff(self) -> None:
        self.action_next_diff(-1)

    def action_fusion(self) -> None:
        self.query_one("#fusion").toggle_class("visible")
        self.query_one("#diffmain").display = not self.query_one("#fusion").has_class("visible")

    def action_layout(self) -> None:
        cur = self.query_one("#diffmain").has_class("stacked")
        self.forced_layout = "side" if cur else "stacked"
        self._auto_layout()

    def action_open(self, side: str) -> None:
        if not self.result:
            return
        r = self.result.rows[self.row]
        item = r.a if side == "a" else r.b
        from .app import ExplorerScreen
        screen = ExplorerScreen(self.a if side == "a" else self.b)
        self.app.push_screen(screen)
        if item is not None:
            screen.call_after_refresh(screen.jump, item.node)
