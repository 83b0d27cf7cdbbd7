"""Diff screens: the biggest changes first, the full aligned list one key away; N-way ladders.

``DiffScreen`` opens on the changes grouped by kind (fusion, GEMM/attention implementation,
kernels added/removed, timing, CPU overhead), each sorted by µs per step with repeats folded:
the screen that answers "why is B faster or slower". ``l`` (or Enter on a change) shows the
aligned list: one cursor moves both panes; ``/`` searches names, ``s`` sorts by Δ, ``f`` filters
by status. ``LadderScreen`` shows A → B → C … per step and the biggest changes between
neighbours; Enter opens the diff of a rung with the one before it.
"""
from __future__ import annotations

import re

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from tracetui.compare.diff import DiffResult, diff_traces
from tracetui.model.names import kernel_label
from tracetui.shorten import file_labels, fit_arrow, fit_distinct
from tracetui.model.trace import Trace
from tracetui.report.host_step import host_pair
from tracetui.textsafe import visible

from tracetui.ui.exporting import EXPORT_BINDINGS, ExportsView, stem_of, table_rows
from tracetui.ui.footer import StableFooter
from tracetui.ui.idle_gc import release_frozen
from tracetui.ui.navigate import OpenDiff, OpenTrace

STATUS_STYLE = {"same": "", "changed": "yellow", "removed": "red", "added": "green", "fused": "bold magenta",
                "unfused": "magenta", "replaced": "cyan"}
STATUS_GLYPH = {"same": "=", "changed": "~", "removed": "-", "added": "+", "fused": "⊕", "unfused": "⊖", "replaced": "⇄"}
FILTERS = (None, "differs", "fused", "replaced", "changed", "added", "removed", "unexplained")
"""``f`` cycles the aligned list through these (None: every row; differs: every row not 'same')."""
CHANGE_TOP = 8
"""Changes shown per kind on the first screen (the rest are folded into one '… N more' line)."""


class DiffPane(DataTable):
    """One side of the diff; the screen keeps both cursors on the same row."""

    def __init__(self, side: str, **kw):
        super().__init__(cursor_type="row", **kw)
        self.side = side


def _keep(r, flt: str | None, text: str) -> bool:
    if flt == "differs" and r.status == "same":
        return False
    if flt == "unexplained" and r.explained:
        return False
    if flt not in (None, "differs", "unexplained") and r.status != flt:
        return False
    if text:
        low = text.lower()
        return any(low in it.name.lower() for it in (r.a, r.b) if it is not None)
    return True


class DiffScreen(ExportsView, Screen):
    BINDINGS = [
        Binding("n,right_square_bracket", "next_diff", "Next difference"),
        Binding("N,left_square_bracket", "prev_diff", "Prev difference", show=False),
        Binding("l", "list", "Aligned list"),
        Binding("c", "changes", "Changes"),
        Binding("slash", "search", "Search"),
        Binding("s", "sort", "Sort by Δ"),
        Binding("f", "filter", "Filter status"),
        Binding("u", "fusion", "Fusion report"),
        Binding("v", "layout", "Side by side / stacked"),
        Binding("a", "open('a')", "Open A here", show=False),
        Binding("b", "open('b')", "Open B here", show=False),
        Binding("escape", "back", "Back", show=False),
        *EXPORT_BINDINGS,
    ]

    def __init__(self, a: Trace, b: Trace):
        super().__init__()
        self.a, self.b = a, b
        self.result: DiffResult | None = None
        self.changes: list = []
        self._syncing = False
        self.forced_layout: str | None = None
        self.order: list[int] = []     # result row index of each pane row
        self.sort_by_delta = False
        self.status_filter: str | None = None
        self.search_text = ""
        self._change_rows: list = []   # per row of the changes table: a Change or None (header)

    def compose(self) -> ComposeResult:
        yield Static(Text("aligning…", style="italic"), id="diffsummary")
        yield DataTable(cursor_type="row", id="changes")
        with Horizontal(id="diffmain"):
            yield DiffPane("a", id="pane-a")
            yield DiffPane("b", id="pane-b")
        with VerticalScroll(id="fusion"):
            yield Static(id="fusion-text")
        yield Input(placeholder="search kernel names (Enter keeps, Esc clears)", id="diffsearch")
        yield StableFooter()

    def on_unmount(self) -> None:
        release_frozen()

    def on_mount(self) -> None:
        titles = file_labels([self.a.path, self.b.path])  # two rank0.json: their folders too
        for pane, title in ((self.query_one("#pane-a", DiffPane), titles[0]), (self.query_one("#pane-b", DiffPane), titles[1])):
            pane.border_title = Text(visible(title))  # a Text: never read as markup
            # fixed widths: the layout must not depend on when the rows arrive from the worker
            for label, width in ((" ", 1), ("kernel", self._name_width()), ("µs", 9), ("Δ µs", 9),
                                 ("launched by", 30)):
                pane.add_column(label, width=width)
        ch = self.query_one("#changes", DataTable)
        ch.border_title = "biggest changes per step (Enter: in the aligned list; l: all rows)"
        ch.add_column("Δ µs/step", width=10)
        ch.add_column("change (repeats folded: N× per step)", width=self._change_width())
        self.query_one("#diffmain").display = False
        self.align()

    def _change_width(self) -> int:
        return max(40, (self.app.size.width or 80) - 18)

    def _name_width(self) -> int:
        """The kernel column: what a pane (the screen's width stacked, half of it side by side)
        leaves after the glyph, µs and Δ columns, their padding, the border and a scrollbar; the
        op that launched it comes after, scrolled to."""
        w = self.app.size.width or 80
        pane = w if w < 120 else w // 2
        return max(24, pane - 2 - 1 - 9 - 9 - 2 * 4 - 2)

    @work(thread=True, exclusive=True, group="diff")
    def align(self) -> None:
        res = diff_traces(self.a, self.b)  # pure model work, off the UI thread
        from tracetui.compare.changes import changes, diff_dict
        j = diff_dict(res)
        cs = changes(res)
        lines: list[str] = []
        from tracetui.report.diff import print_diff
        print_diff(res, write=lines.append, top=0, rows=False)
        from tracetui.compare.verdict import comparability, facts, header_lines, verdict
        head = header_lines(verdict(j), comparability(facts(self.a), facts(self.b)), None)
        self.verdict_lines = [head[0]] + [x for x in head[1:] if x.startswith("NOT")]  # comparable: said by no line
        self.app.call_from_thread(self._show, res, j, cs, lines)

    def _show(self, res: DiffResult, j: dict, cs: list, lines: list[str]) -> None:
        self.result, self.changes, self.doc = res, cs, j
        t = j["totals"]
        A, B = j["a"], j["b"]
        s = Text()
        for i, line in enumerate(getattr(self, "verdict_lines", [])):  # the verdict, then comparability
            s.append(line + "\n", style="bold" if i == 0 else "bold red")
        gpu = bool(A.get("gpu") or B.get("gpu"))  # CPU-only: the units are compute ops, which launch nothing
        s.append(f"{'kernels' if gpu else 'compute ops'}/step {t['kernels_a']} → {t['kernels_b']}", style="bold")
        if gpu:
            from tracetui.report.diff import launches_text
            s.append(f" ({launches_text(t['launches_saved'])})")
        s.append(f" · {'device' if gpu else 'compute'} µs/step {t['device_us_a']:,.1f} → {t['device_us_b']:,.1f} ({t['device_delta_us']:+,.1f}; "
                 f"rows sum {t['rows_delta_us']:+,.1f})")
        s.append(f" · host µs/step {host_pair(A, B)}")
        s.append(f" · fused {len(j['fused'])}", style="magenta")
        s.append(f" · unexplained {t['unexplained']}", style="bold red" if t["unexplained"] else "")
        counts: dict = {}
        for r in res.rows:
            counts[r.status] = counts.get(r.status, 0) + 1
        s.append("\n" + "  ".join(f"{STATUS_GLYPH[k]} {k} {v}" for k, v in counts.items()), style="dim")
        self.query_one("#diffsummary", Static).update(s)
        self._fill_changes()
        self._fill_panes()
        self.query_one("#fusion-text", Static).update(Text("\n".join(lines)))
        self._auto_layout()
        self.query_one("#changes", DataTable).focus()

    def _fill_changes(self) -> None:
        from tracetui.compare.changes import KIND_LABEL
        ch = self.query_one("#changes", DataTable)
        ch.clear()
        self._change_rows = []
        kinds = list(dict.fromkeys(c.kind for c in self.changes))
        for kind in kinds:
            group = [c for c in self.changes if c.kind == kind]
            unit = " (CPU)" if kind == "cpu" else ""
            total = sum(c.delta_us for c in group)
            ch.add_row(Text(f"{total:+,.1f}", style="bold"), Text(f"{KIND_LABEL[kind]}{unit}", style="bold"))
            self._change_rows.append(None)
            for c in group[:CHANGE_TOP]:
                style = "green" if c.delta_us < 0 else "red" if c.delta_us > 0 else ""
                why = c.detail if kind in ("added", "removed", "implementation") else ""
                if kind in ("added", "removed") and not why:
                    why = "unexplained"
                extra = (len(c.repeat) + 4 if c.repeat else 0) + (min(len(why), 24) + 4 if why else 0)
                room = max(24, self._change_width() - 2 - extra)  # the replacement after → kept
                title = Text("  " + fit_arrow(visible(c.title), room))
                if c.repeat:
                    title.append(f"  [{c.repeat}]", style="cyan")
                if why:
                    title.append(f"  ({visible(why)})", style="dim" if why != "unexplained" else "bold red")
                ch.add_row(Text(f"{c.delta_us:+,.1f}", style=style), title)
                self._change_rows.append(c)
            if len(group) > CHANGE_TOP:
                rest = sum(c.delta_us for c in group[CHANGE_TOP:])
                ch.add_row(f"{rest:+,.1f}", Text(f"  … {len(group) - CHANGE_TOP} more (l: the aligned list)",
                                                  style="dim"))
                self._change_rows.append(None)

    def _fill_panes(self, keep: int | None = None) -> None:
        res = self.result
        if res is None:
            return
        idx = [i for i, r in enumerate(res.rows) if _keep(r, self.status_filter, self.search_text)]
        if self.sort_by_delta:
            idx.sort(key=lambda i: -abs(res.rows[i].delta_ns))
        self.order = idx
        pa, pb = self.query_one("#pane-a", DiffPane), self.query_one("#pane-b", DiffPane)
        pa.clear()
        pb.clear()
        # one label per kernel name, both panes together: folded, cut to the column, never two alike
        names = sorted({visible(it.name) for i in idx for it in (res.rows[i].a, res.rows[i].b) if it is not None})
        label = dict(zip(names, fit_distinct(names, self._name_width(), short=kernel_label)))
        for i in idx:
            r = res.rows[i]
            st = STATUS_STYLE.get(r.status, "")
            g = Text(STATUS_GLYPH.get(r.status, "?"), style=st)
            for pane, item in ((pa, r.a), (pb, r.b)):
                if item is None:
                    pane.add_row(g, Text(""), "", "", "")
                else:
                    delta = f"{r.delta_ns / 1e3:+,.1f}" if (pane is pb or r.b is None) and not r.claimed else ""
                    pane.add_row(g, Text(label[visible(item.name)], style=st),
                                 f"{item.dur_ns / 1e3:,.1f}", delta, Text(visible(item.op or "(no op)")[:30]))
        title = "aligned" if not self.sort_by_delta else "by |Δ|"
        flt = f", {self.status_filter}" if self.status_filter else ""
        srch = f", '{visible(self.search_text)}'" if self.search_text else ""
        pa.border_subtitle = f"{title}{flt}{srch}: {len(idx)} of {len(res.rows)} rows"
        if keep is not None and keep in idx:
            self._goto(keep)
        else:  # a new list: from its top
            pa.move_cursor(row=0)
            pb.move_cursor(row=0)

    # ---- views
    def _show_list(self, show: bool) -> None:
        self.query_one("#changes").display = not show
        self.query_one("#diffmain").display = show
        self.query_one("#fusion").remove_class("visible")
        (self.query_one("#pane-a", DiffPane) if show else self.query_one("#changes", DataTable)).focus()

    @property
    def in_list(self) -> bool:
        return bool(self.query_one("#diffmain").display)

    def action_list(self) -> None:
        self._show_list(True)

    def action_changes(self) -> None:
        self._show_list(False)

    @on(DataTable.RowSelected, "#changes")
    def change_selected(self, event: DataTable.RowSelected) -> None:
        if not 0 <= event.cursor_row < len(self._change_rows):
            return
        c = self._change_rows[event.cursor_row]
        if c is None or not c.rows:
            return
        self.status_filter, self.search_text = None, ""
        self._fill_panes()
        self._show_list(True)
        self._goto(c.rows[0])

    def on_resize(self, event) -> None:
        self._auto_layout()

    def _auto_layout(self) -> None:
        stacked = self.forced_layout == "stacked" or (self.forced_layout is None and self.size.width < 120)
        self.query_one("#diffmain").set_class(stacked, "stacked")

    @on(DataTable.RowHighlighted)
    def sync(self, event: DataTable.RowHighlighted) -> None:
        if self._syncing or not isinstance(event.data_table, DiffPane):
            return
        if event.cursor_row != event.data_table.cursor_row:
            return  # stale: the pane moved again since (a re-sorted list starts at its top)
        self._syncing = True
        try:
            for pane in self.query(DiffPane):
                if pane is not event.data_table and pane.row_count > event.cursor_row:
                    pane.move_cursor(row=event.cursor_row)
        finally:
            self._syncing = False

    @property
    def row(self) -> int:
        """The result row (index into ``result.rows``) under the cursor."""
        c = self.query_one("#pane-a", DiffPane).cursor_row
        return self.order[c] if 0 <= c < len(self.order) else c

    def _goto(self, i: int) -> None:
        """Put the cursor on result row ``i`` (clearing the filters if they hide it)."""
        if i not in self.order:
            self.status_filter, self.search_text = None, ""
            self._fill_panes()
        pos = self.order.index(i) if i in self.order else 0
        self.query_one("#pane-a", DiffPane).move_cursor(row=pos)
        self.query_one("#pane-b", DiffPane).move_cursor(row=pos)

    def action_next_diff(self, step: int = 1) -> None:
        if not self.result:
            return
        if not self.in_list:
            self._show_list(True)
        n = len(self.order)
        cur = self.query_one("#pane-a", DiffPane).cursor_row
        i = cur
        for _ in range(n):
            i = (i + step) % n
            if self.result.rows[self.order[i]].status != "same":
                self._goto(self.order[i])
                return
        self.notify("no differences")

    def action_prev_diff(self) -> None:
        self.action_next_diff(-1)

    def action_sort(self) -> None:
        if not self.result:
            return
        keep = self.row
        self.sort_by_delta = not self.sort_by_delta
        # by |Δ|: start at the biggest; back in aligned order: where the cursor was
        self._fill_panes(None if self.sort_by_delta else keep)
        self._show_list(True)
        self.notify("sorted by |Δ| per step" if self.sort_by_delta else "aligned order")

    def action_filter(self) -> None:
        if not self.result:
            return
        keep = self.row
        self.status_filter = FILTERS[(FILTERS.index(self.status_filter) + 1) % len(FILTERS)]
        self._fill_panes(keep)
        self._show_list(True)
        self.notify(f"showing {self.status_filter or 'every'} row(s): {len(self.order)}")

    def action_search(self) -> None:
        box = self.query_one("#diffsearch", Input)
        box.add_class("visible")
        box.value = self.search_text
        box.focus()

    @on(Input.Changed, "#diffsearch")
    def search_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value
        self._fill_panes()
        if not self.in_list:
            self._show_list(True)
            event.input.focus()

    @on(Input.Submitted, "#diffsearch")
    def search_done(self, event: Input.Submitted) -> None:
        event.input.remove_class("visible")
        self.query_one("#pane-a", DiffPane).focus()

    def action_back(self) -> None:
        box = self.query_one("#diffsearch", Input)
        if box.has_class("visible"):
            box.remove_class("visible")
            self.search_text = ""
            self._fill_panes()
            self.query_one("#pane-a", DiffPane).focus()
        elif self.in_list or self.query_one("#fusion").has_class("visible"):
            self._show_list(False)
        elif len(self.app.screen_stack) > 1 and isinstance(self.app.screen_stack[-2], LadderScreen):
            self.app.pop_screen()

    def action_fusion(self) -> None:
        fusion = self.query_one("#fusion")
        fusion.toggle_class("visible")
        shown = fusion.has_class("visible")
        self.query_one("#diffmain").display = False if shown else True
        self.query_one("#changes").display = False

    def action_layout(self) -> None:
        cur = self.query_one("#diffmain").has_class("stacked")
        self.forced_layout = "side" if cur else "stacked"
        self._auto_layout()

    def action_open(self, side: str) -> None:
        if not self.result or not self.order:
            return
        r = self.result.rows[self.row]
        item = r.a if side == "a" else r.b
        self.post_message(OpenTrace(self.a if side == "a" else self.b, item.node if item is not None else None))


    def export_table(self):
        """The aligned kernel list as the panes show it (filter, search and sort applied), with
        the columns of ``diff --format csv``."""
        if self.result is None:
            return "still aligning the two traces: nothing to export yet"
        from tracetui.report.export import records_table
        header, rows = table_rows(records_table("kernels", [self.doc["kernels"][i] for i in self.order]))
        return f"{stem_of(self.a.path)}-vs-{stem_of(self.b.path)}-diff", header, rows


_DELTA_LINE = re.compile(r"^(  [ +\-]*[\d,]+\.\d  )(.*)$")
"""A report row led by its µs delta (``ladder_lines``): the delta column is 14 cells wide."""


def hanging(text: str):
    """The report's lines with every delta row's text wrapped under itself, not under the delta
    (at 80 columns a long kernel name wrapped to column 0, breaking the column of numbers)."""
    from rich.console import Group
    from rich.table import Table
    parts, grid = [], None
    for line in text.split("\n"):
        m = _DELTA_LINE.match(line)
        if m is None:
            grid = None
            parts.append(Text(line))
            continue
        if grid is None:
            grid = Table.grid(expand=True)
            grid.add_column(width=len(m.group(1)), no_wrap=True)
            grid.add_column(ratio=1, overflow="fold")
            parts.append(grid)
        grid.add_row(Text(m.group(1)), Text(m.group(2)))
    return Group(*parts)


class LadderScreen(ExportsView, Screen):
    """A → B → C …: per-step figures of each rung and the biggest changes between neighbours."""

    BINDINGS = [
        Binding("enter", "open_diff", "Diff with previous rung"),
        *EXPORT_BINDINGS,
    ]

    def __init__(self, traces: list[Trace]):
        super().__init__()
        self.traces = traces
        self.ladder: dict | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("comparing neighbours…", style="italic"), id="laddersummary")
        yield DataTable(cursor_type="row", id="ladder")
        with VerticalScroll(id="ladder-why"):
            yield Static(id="ladder-text")
        yield StableFooter()

    def on_unmount(self) -> None:
        release_frozen()

    def on_mount(self) -> None:
        t = self.query_one("#ladder", DataTable)
        t.border_title = "per step, µs (Enter: diff of a rung with the one before)"
        for label, width in (("rung", 13), ("device µs", 9), ("Δ µs", 8), ("kernels", 7), ("launch CPU", 10),
                             ("CPU µs", 9), ("unexpl.", 7)):
            t.add_column(label, width=width)
        self.build()

    @work(thread=True, exclusive=True, group="ladder")
    def build(self) -> None:
        from tracetui.compare.ladder import ladder
        ld = ladder(self.traces, top=4)
        self.app.call_from_thread(self._show, ld)

    def names(self) -> list[str]:
        return [visible(t.path.name.split(".")[0]) for t in self.traces]

    def _show(self, ld: dict) -> None:
        from tracetui.report.host_step import per_step
        from tracetui.report.ladder import ladder_lines, rung_cpu
        self.ladder = ld
        t = self.query_one("#ladder", DataTable)
        names = self.names()
        for i, (name, r) in enumerate(zip(names, ld["rungs"])):
            step = ld["steps"][i - 1] if i else None
            delta = f"{step['totals']['device_delta_us']:+,.1f}" if step else ""
            un = str(step["totals"]["unexplained"]) if step else ""
            t.add_row(Text(name), f"{r['device_us_per_step']:,.1f}", delta, str(r["kernels_per_step"]),
                      per_step(r["launch_cpu_us_per_step"]),
                      rung_cpu(r), un)
        lines = ladder_lines(ld, names)
        self.query_one("#ladder-text", Static).update(hanging("\n".join(lines[len(ld["rungs"]) + 1:]).strip("\n")))
        first, last = ld["rungs"][0], ld["rungs"][-1]
        self.query_one("#laddersummary", Static).update(Text(
            f"{len(self.traces)} rungs · device µs/step {first['device_us_per_step']:,.1f} → "
            f"{last['device_us_per_step']:,.1f} · kernels {first['kernels_per_step']} → {last['kernels_per_step']}",
            style="bold"))
        t.focus()

    @on(DataTable.RowSelected, "#ladder")
    def selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_diff()

    def action_open_diff(self) -> None:
        i = self.query_one("#ladder", DataTable).cursor_row
        i = max(i, 1)
        if i < len(self.traces):
            self.post_message(OpenDiff(self.traces[i - 1], self.traces[i]))

    def export_table(self):
        """The rungs, per step, as ``diff A B C --format csv`` writes them."""
        if self.ladder is None:
            return "still comparing the rungs: nothing to export yet"
        from tracetui.report.ladder import ladder_tables
        header, rows = table_rows(ladder_tables(self.ladder, [stem_of(t.path) for t in self.traces])[0])
        return f"{stem_of(self.traces[0].path)}-ladder", header, rows
