"""The memory view (key 5): allocated and reserved over the selected step's time axis, its peak
marked, what was live at the peak and the per-op statistics; every row jumps to the tree.

The plot is our own braille drawing (2×4 dots per cell), not the timeline's widget, so the two
can change apart. The model (tracetui/model/memory.py) is built in a worker, never on a key.
"""
from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual import on, work
from textual.worker import get_current_worker
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Region
from textual.widgets import Static

from tracetui.model.memory import Memory, OpStat, Peak, fmt_bytes
from tracetui.model.trace import Trace

from tracetui.ui.boxes import HBox
from tracetui.ui.format import fmt_us, plain
from tracetui.ui.line_table import LineTable, Lines, format_rows

AXIS_W = 10
"""Columns of the plot's left axis (the byte labels)."""
PLOT_ROWS = (3, 8)
"""Fewest and most text rows of the plot (4 braille dots each): a quarter of the view's height."""
WIDE_COLS = 160
"""From this width the two tables stand side by side; below it they are stacked."""
BRAILLE_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.int64)
"""The braille bit of dot (row, column) inside one cell (Unicode's dot numbering)."""
HOLDER_ROWS = 200
"""Rows of the live-at-peak table (grouped by op, module and step); the rest are summed in one row."""
PLOT_CACHE = 96
"""Plots kept drawn, per (device, step, width, rows): a view shown again, or a step visited again,
draws nothing."""
LIVE_COLUMNS = [("bytes", True), ("count", True), ("op", False), ("module", False), ("step", False)]
LIVE_WIDTHS = [12, 9, 200, 28, 20]
OPS_COLUMNS = [("op", False), ("self Δ", True), ("Δ", True), ("allocs", True), ("alloc size", True),
               ("self allocs", True), ("calls", True)]
OPS_WIDTHS = [200, 12, 12, 9, 12, 11, 9]
"""The op comes first in the per-op table: last, after 77 cells of figures, it showed ~11 cells at
any width (``aten::empty_strided`` read ``aten::empty``). In both tables the op column takes the
width the table has (``LineTable(flex=...)``), its names cut around an ellipsis, not at their end."""


@dataclass
class Page:
    """Everything the view shows for one device and step (0: the whole trace) but the plot,
    which depends on the view's size: computed once, by the prefetch worker after the model is
    built (``MemoryView.prepare``) or, for a page it has not reached yet, by the key that needs it."""
    lo: int                    # the time axis (ns)
    hi: int
    peak: Peak | None
    holders: list[dict]        # the live table's rows that jump (groups of op, module, step)
    live: Lines
    live_count: int            # allocations live at the peak
    stats: list[OpStat]        # the per-op table's rows
    ops: Lines
    never: int                 # allocations of the device never freed, and their bytes
    never_bytes: int


def trace_span(trace: Trace, mem: Memory) -> tuple[int, int]:
    """The whole trace's time axis: the events' own span and the memory instants' (a synthetic
    node can hold the root's start at 0)."""
    store = trace.store
    ends = [int(store.ts.min()), int((store.ts + store.dur).max())] if len(store) else [0, 1]
    if len(mem):
        ends += [int(mem.ts[0]), int(mem.ts[-1]) + 1]
    return min(ends), max(max(ends), min(ends) + 1)


def step_span(trace: Trace, step: int) -> tuple[int, int]:
    """A step's time axis: its host interval, stretched to the end of its GPU work."""
    t = trace.tree
    s0, s1 = int(t.start[step]), int(t.start[step] + t.dur[step])
    gpu = trace.step_window(step).gpu
    if gpu.size:
        s1 = max(s1, int((t.start[gpu] + t.dur[gpu]).max()))
    return s0, max(s1, s0 + 1)


def build_page(trace: Trace, mem: Memory, device: int, scope: int, span: tuple[int, int] | None = None) -> Page:
    """The page of ``device`` over step ``scope`` (0: the whole trace, whose ``span`` can be given)."""
    lo, hi = (span or trace_span(trace, mem)) if not scope else step_span(trace, scope)
    peak = mem.peak(device, lo, hi) if scope else mem.peak(device)
    holders, rows = [], []
    if peak is not None:
        groups = mem.holders(peak.live, "op,module,step")
        for g in groups[:HOLDER_ROWS]:
            op, module, step = g["key"]
            rows.append((fmt_bytes(g["bytes"]), f"{g['count']:,}", op, module, step))
            holders.append(g)
        rest = groups[HOLDER_ROWS:]
        if rest:
            rows.append((fmt_bytes(sum(g["bytes"] for g in rest)), f"{sum(g['count'] for g in rest):,}",
                         f"… {len(rest)} more groups", "", ""))
        if peak.held_before:
            rows.append((fmt_bytes(peak.held_before), "", "(allocated before the trace)", "", ""))
    label = mem.devices[device]
    stats = [s for s in mem.op_stats(*((lo, hi) if scope else (None, None))) if s.device == label]
    ops = format_rows(OPS_COLUMNS, [(s.name, fmt_bytes(s.self_increase), fmt_bytes(s.increase), f"{s.alloc_count:,}",
                                     fmt_bytes(s.alloc_bytes), f"{s.self_alloc_count:,}", f"{s.calls:,}")
                                    for s in stats], OPS_WIDTHS)
    never = mem.never_freed(device)
    return Page(lo, hi, peak, holders, format_rows(LIVE_COLUMNS, rows, LIVE_WIDTHS),
                peak.live.size if peak is not None else 0, stats, ops, int(never.size), int(mem.nbytes[never].sum()))


def braille_plot(ts: np.ndarray, alloc: np.ndarray, reserved: np.ndarray, lo: int, hi: int,
                 width: int, rows: int, peak_ts: int | None) -> tuple[list[str], np.ndarray, int]:
    """Cells (text rows, a ``STYLES`` code per cell) of allocated (filled) and reserved (a line) over [lo, hi),
    and the top of the scale in bytes. Each dot column shows the highest value in its time slice
    (a step function: the level carried in counts), so a short peak is never lost between columns."""
    xs, ys = 2 * width, 4 * rows
    edges = lo + (np.arange(xs + 1) * (hi - lo)) // xs
    before = np.searchsorted(ts, edges[:-1], side="right") - 1   # the level at each slice's start
    start = np.searchsorted(ts, edges[:-1], side="left")
    stop = np.searchsorted(ts, edges[1:], side="left")

    def colmax(v: np.ndarray) -> np.ndarray:
        level = np.where(before >= 0, v[np.maximum(before, 0)], 0)
        if not v.size:
            return level
        vv = np.r_[v, 0]  # a sentinel, so an index at the end is valid
        mx = np.maximum.reduceat(vv, np.r_[start, stop[-1]])[:-1]  # slice i: [start[i], start[i+1])
        return np.where(stop > start, np.maximum(level, mx), level)

    a, r = colmax(alloc), colmax(np.maximum(reserved, 0))
    top = int(max(a.max(initial=0), r.max(initial=0), 1))
    ya = np.ceil(a * ys / top).astype(np.int64)       # filled dots from the bottom
    yr = np.ceil(r * ys / top).astype(np.int64) - 1    # the reserved line's dot (-1: none)
    dot_row = np.arange(ys)[::-1][:, None]             # 0 at the bottom
    fill = dot_row < ya[None, :]
    line = (dot_row == yr[None, :]) & (r[None, :] > 0)
    bits_fill = np.zeros((rows, width), dtype=np.int64)
    bits_line = np.zeros((rows, width), dtype=np.int64)
    for dr in range(4):
        for dc in range(2):
            bits_fill |= fill[dr::4, dc::2] * BRAILLE_BITS[dr, dc]
            bits_line |= line[dr::4, dc::2] * BRAILLE_BITS[dr, dc]
    bits = bits_fill | bits_line
    code = np.where(bits_fill > 0, 1, np.where(bits_line > 0, 2, 0))  # STYLES index per cell
    if peak_ts is not None and hi > lo:
        col = int(np.clip((peak_ts - lo) * width // (hi - lo), 0, width - 1))
        code[:, col] = np.where(code[:, col] == 1, 3, code[:, col])
    chars = np.where(bits > 0, 0x2800 + bits, 32)  # a braille pattern, or a space where no dot is set
    text = ["".join(map(chr, r)) for r in chars.tolist()]
    return text, code, top


STYLES = ("", "green", "yellow", "bold red")
"""Cell styles of the plot by code: empty, allocated, reserved only, allocated at the peak."""


class MemoryPlot(Static):
    """Allocated (green, filled) and reserved (yellow line) of one device over the view's window."""


class MemoryView(Vertical):
    """Memory of the step around the selection: ``v`` next device, ``,`` ``.`` previous / next
    step, Enter on a row jumps to the op (``n`` for the op's next call)."""

    BLANK = True  # a box: its lines are its background (ui/boxes.py)

    BINDINGS = [
        Binding("v", "next_device", "Device", show=False),
        Binding("comma", "step(-1)", "Prev step", show=False),
        Binding("full_stop", "step(1)", "Next step", show=False),
    ]
    """Not in the footer: a footer whose keys change is rebuilt on every focus change into the
    view (~60 ms on a 270k-event trace); the view's first line names them instead."""

    def __init__(self, trace: Trace, **kw):
        super().__init__(**kw)
        self.trace = trace
        self.device: int | None = None  # None until the model is built: then its largest device
        self.scope = 0            # the step shown (0: the whole trace)
        self._holders: list = []  # rows of the live-at-peak table: (group, its allocations)
        self._stats: list = []
        self._peak = None          # the shown window's peak, once refresh_all ran
        self._shown = False
        self._key: tuple = ()
        self._pages: dict[tuple[int, int], Page] = {}  # (device, step) -> Page; filled by prepare()
        self._pages_lock = threading.Lock()
        self._span: tuple[int, int] | None = None      # the whole trace's time axis
        self._series: dict[int, tuple] = {}            # device -> (ts, allocated, reserved)
        self._plots: OrderedDict = OrderedDict()       # (device, step, width, rows) -> (head, plot, height)
        self._plot_key: tuple = ()                     # the one on screen
        self.pages_ready = False                       # prepare() built every page
        self._warm = None                              # the box laid out off screen (warm_layout)

    def compose(self):
        yield Static(id="mem-head")
        yield MemoryPlot(id="mem-plot")
        with HBox(id="mem-tables"):
            yield LineTable(LIVE_COLUMNS, flex=2, least=32, id="mem-live")
            yield LineTable(OPS_COLUMNS, flex=0, id="mem-ops")

    def on_mount(self) -> None:
        live, ops = self.query_one("#mem-live", LineTable), self.query_one("#mem-ops", LineTable)
        live.border_title = "live at the peak (Enter: the op)"
        ops.border_title = "per op, TensorBoard definitions (Enter: the op, n next)"

    def on_resize(self, event) -> None:
        self.set_class(self.size.width < WIDE_COLS, "narrow")
        if self._shown:
            self._draw_plot()

    # ---- the pages, off the keys
    def _settle_device(self) -> int:
        """The device shown: the one that reaches highest until the user picks one with ``v``
        (``memory`` must have instants)."""
        mem = self.memory
        self.device = mem.largest_device() if self.device is None else self.device % len(mem.devices)
        return self.device

    def page(self, device: int, scope: int) -> Page:
        """The page of (device, step), built now if the prefetch has not reached it yet."""
        page = self._pages.get((device, scope))
        if page is None:
            with self._pages_lock:  # the worker may be building this very page
                page = self._pages.get((device, scope))
                if page is None:
                    page = self._pages[(device, scope)] = self._build_page(device, scope)
        return page

    def _build_page(self, device: int, scope: int) -> Page:
        mem = self.memory
        if not scope and self._span is None:
            self._span = trace_span(self.trace, mem)
        return build_page(self.trace, mem, device, scope, self._span)

    def prepare(self, node: int = 0, cancelled=lambda: False) -> None:
        """Build the model and every page (each device, the whole trace and every step; the
        step around ``node`` first): in a worker, so that no key computes them. ~0.1 s on a
        270k-event trace with 60k memory instants, after the model's own build."""
        mem = self.memory
        if not len(mem):
            self.pages_ready = True
            return
        self._settle_device()
        step = int(self.trace.roll.step_of[node]) if node > 0 else -1
        first = [max(step, 0), 0]
        order = first + [s for s in self.trace.steps if s not in first]
        for d in range(len(mem.devices)):
            for scope in order:
                if cancelled():
                    return
                self.page(d, scope)
        self.pages_ready = True

    # ---- the first layout, before the first 5
    def warm_layout(self, node: int) -> None:
        """Lay the hidden view out once, below the screen's bottom edge, showing the step
        around ``node``. Textual lays newly shown widgets out twice more (each gets its first
        size, then their scrollbars theirs): the first 5 cost two extra full-screen frames
        (62 ms against 31 for the next ones on a 270k-event trace). Run once, when the
        prefetch has built the pages; a 5 meanwhile (show) ends it at once."""
        box = self.parent
        switcher = box.parent if box is not None else None
        if (self._warm is not None or self._shown or not self.is_mounted or switcher is None
                or self.screen is not self.app.screen  # another screen on top: its frames are not ours
                or getattr(switcher, "current", None) == box.id or not self.trace.memory_ready
                or not len(self.memory)):
            return
        size = switcher.content_size  # what the box gets as the current view (height: 1fr)
        if not size.width or not size.height:
            return
        self._warm = box
        styles = box.styles
        styles.position = "absolute"
        styles.offset = (0, self.app.size.height + size.height)  # wholly below the screen: never drawn
        styles.width, styles.height = size.width, size.height
        step = int(self.trace.roll.step_of[node]) if node > 0 else -1
        self.scope = step if step >= 0 else 0
        self.refresh_all()
        box.display = True
        self._warm_rounds(3)

    def _warm_rounds(self, left: int) -> None:
        """Wait for the layouts the first size sets off (one frame each), then put the box back."""
        if self._warm is None:
            return
        if left == 1:
            # the tables' scrollbars exist now; Textual styles a scrollbar the first time its
            # table is restyled while it shows (the first 5's focus), and that first styling
            # laid the screen out a second time in the key: style them here, off screen
            self.app.update_styles(self)
        if left:
            self.call_after_refresh(self._warm_rounds, left - 1)
        else:
            self._paint_off_screen()
            self._end_warm()
            self._predraw_all()
            # the widgets, caches and lines of this first layout will live as long as the view:
            # out of the cyclic GC's scans (the loaded trace went there after loading), after
            # one collection of the garbage so far. Full collections in keys went from 11-17
            # to 5-7 ms on a 270k-event trace (gc.callbacks), and the first 5 lost one.
            gc.collect()
            gc.freeze()

    def _paint_off_screen(self) -> None:
        """Render every widget of the box once at the size it was laid out at, as the compositor
        would: the lines stay in each widget's cache (Textual's StylesCache) and the first 5,
        which gives the same sizes, paints only what changed since, as every later 5 does."""
        for w in self._warm.walk_children(with_self=True):
            if not w.display:
                continue
            bars = (w._vertical_scrollbar, w._horizontal_scrollbar, w._scrollbar_corner)
            for part in (w, *bars):
                size = part.outer_size if part is not None and part.display else None
                if size:
                    part.render_lines(Region(0, 0, size.width, size.height))

    def _predraw_all(self) -> None:
        """Start the predraw worker at the sizes the view was just laid out at."""
        live, ops = self.query_one("#mem-live", LineTable), self.query_one("#mem-ops", LineTable)
        width, n_rows = self._plot_size()
        tables = [(t, w) for t in (live, ops) if (w := t.laid_out_width)]
        if self.device is not None and width and tables:
            self._predraw(self.device, width, n_rows, tables)

    @work(thread=True, exclusive=True, group="memory-predraw")
    def _predraw(self, d: int, width: int, n_rows: int, tables: list) -> None:
        """Every step's plot and table lines for device ``d`` at the laid-out sizes (~2 ms a step
        on a 270k-event trace), so that 5 on a step not shown yet, and , . , fit and draw nothing
        in the key. Handed to the view on the app's thread, where its caches are used."""
        worker = get_current_worker()
        plots, fits = {}, []
        for scope in [0, *self.trace.steps]:
            if worker.is_cancelled:
                return
            key = (d, scope, width, n_rows)
            if key not in self._plots:
                plots[key] = self._render_plot(d, scope, width, n_rows)
            page = self.page(d, scope)
            for table, w in tables:
                lines = page.live if table.id == "mem-live" else page.ops
                fits.append((table, lines, w, table.fitted(lines, w)))
        try:
            self.app.call_from_thread(self._keep_predrawn, plots, fits)
        except RuntimeError:  # the app closed meanwhile
            pass

    def _keep_predrawn(self, plots: dict, fits: list) -> None:
        for key, drawn in plots.items():
            self._plots.setdefault(key, drawn)
        while len(self._plots) > PLOT_CACHE:
            self._plots.popitem(last=False)
        for table, lines, width, fitted in fits:
            table.keep_fitted(lines, width, fitted)

    def _end_warm(self) -> None:
        box, self._warm = self._warm, None
        if box is None:
            return
        for rule in ("position", "offset", "width", "height"):
            box.styles.clear_rule(rule)
        box.display = box.parent.current == box.id
        box.refresh(layout=True)

    # ---- what is shown
    def show(self, node: int) -> None:
        """Show the step around ``node`` (the whole trace outside any step)."""
        self._end_warm()
        step = int(self.trace.roll.step_of[node]) if node > 0 else -1
        self.scope = step if step >= 0 else 0
        if self._shown and self._key == (self.device, self.scope):
            return  # what is on screen already (back from a jump to the tree)
        if not self.trace.memory_ready:
            self.query_one("#mem-head", Static).update("reading memory events…")
            self._build()
            return
        self.refresh_all()

    @work(thread=True, exclusive=True, group="memory")
    def _build(self) -> None:
        """The model (and the page to show) when ``5`` came before the prefetch built them."""
        self.trace.memory  # noqa: B018 - builds it (reads every [memory] instant's args)
        if len(self.memory):
            self.page(self._settle_device(), self.scope)
        try:
            self.app.call_from_thread(self.refresh_all)
        except RuntimeError:  # the app closed meanwhile
            pass

    @property
    def memory(self) -> Memory:
        return self.trace.memory

    def refresh_all(self) -> None:
        mem = self.memory
        head = self.query_one("#mem-head", Static)
        if not len(mem):
            head.update(Text("no [memory] events: record with profile_memory=True", style="yellow"))
            self.query_one("#mem-plot", Static).update("")
            for tid in ("#mem-live", "#mem-ops"):
                self.query_one(tid, LineTable).set_rows([])
            return
        self._settle_device()
        page = self.page(self.device, self.scope)
        self._peak = page.peak
        self._shown = True
        self._key = (self.device, self.scope)
        if self._laid_out_size().width:  # never laid out yet: drawn by on_resize, at the size it gets
            self._draw_plot()
        self._fill_live(page)
        self._fill_ops(page)

    def _draw_plot(self) -> None:
        mem, tr = self.memory, self.trace
        if not len(mem):
            return
        d = self.device
        width, n_rows = self._plot_size()
        key = (d, self.scope, width, n_rows)
        if self._plot_key == key:
            return  # on screen already: shown again at the same size (5 after a jump to the tree)
        drawn = self._plots.get(key)
        if drawn is None:
            drawn = self._plots[key] = self._render_plot(d, self.scope, width, n_rows)
            if len(self._plots) > PLOT_CACHE:
                self._plots.popitem(last=False)
        else:
            self._plots.move_to_end(key)
        self._plot_key = key
        head, out, height = drawn
        self.query_one("#mem-head", Static).update(head, layout=False)  # one line, always
        plot = self.query_one("#mem-plot", Static)
        if plot.styles.height is None or plot.styles.height.value != height:
            plot.styles.height = height  # a new height lays the screen out once; same height: no layout
        plot.update(out, layout=False)

    def _laid_out_size(self):
        """The view's size, or while hidden the one it had when last laid out (what it gets
        when shown again): a step chosen in the tree draws its plot in the key's own frame."""
        return self.size if self.size.width else self.container_size

    def _plot_size(self) -> tuple[int, int]:
        """The plot's cells (width, text rows) at the view's laid-out size."""
        size = self._laid_out_size()
        return max(10, (size.width or 80) - AXIS_W - 2), int(np.clip((size.height or 20) // 4, *PLOT_ROWS))

    def _render_plot(self, d: int, scope: int, width: int, n_rows: int) -> tuple[Text, Text, int]:
        """(the view's first line, the plot with its axis and legend, its height) of device ``d``
        over step ``scope`` (0: the whole trace), ``width`` cells by ``n_rows``. Plain Python: the
        predraw worker calls it too."""
        mem, tr = self.memory, self.trace
        page = self.page(d, scope)
        lo, hi, peak = page.lo, page.hi, page.peak
        if d not in self._series:
            self._series[d] = mem.series(d)
        ts, alloc, res = self._series[d]
        rows, styles, top = braille_plot(ts, alloc, res, lo, hi, width, n_rows,
                                         peak.ts if peak is not None else None)
        head = self._head(d, scope, page, lo, hints=True)
        if head.cell_len > width + AXIS_W:  # narrow: the key hints give way to the figures
            head = self._head(d, scope, page, lo, hints=False)
        out = Text()
        for y, (row, st) in enumerate(zip(rows, styles)):  # styles: a code per cell
            label = fmt_bytes(top) if y == 0 else ("0" if y == len(rows) - 1 else "")
            out.append(f"{label:>{AXIS_W - 1}} ", style="dim")
            _emit(out, row, st)
        out.append(" " * AXIS_W + "+0")
        span = f"+{fmt_us(hi - lo)}"
        out.append(" " * max(1, width - 2 - len(span)) + span + "\n")
        out.append(" " * AXIS_W)
        out.append("⣿ allocated ", style="green")
        out.append("⠉ reserved ", style="yellow")
        out.append("⣿ at the peak", style="bold red")
        return head, out, n_rows + 2

    def _head(self, d: int, scope: int, page: Page, lo: int, hints: bool) -> Text:
        """The view's first line: device, step, peak, reserved, never freed; the keys that change
        device and step only when ``hints`` (they are in the help and the footer's palette)."""
        mem, peak = self.memory, page.peak
        scope_name = self.trace.name(scope) if scope else "whole trace"
        head = Text()
        head.append(f"{mem.devices[d]}", style="bold")
        if len(mem.devices) > 1:
            head.append(f" {d + 1}/{len(mem.devices)}" + (" (v)" if hints else ""))
        head.append(" · ")
        head.append(plain(scope_name[:40 if hints else 24], "bold"))
        if not hints:  # a narrow head: the figures stay whole, the hints give way
            head.append(" · ")
        else:  # no steps: nothing for , and . to step to, so why, not the keys
            head.append(" (, .) · " if self.trace.steps else " (no step markers) · ")
        if peak is not None:
            head.append(f"peak {fmt_bytes(peak.allocated)}", style="bold red")
            head.append(f" at +{fmt_us(peak.ts - lo) if peak.ts > lo else '0'}")
            if peak.reserved > 0:
                head.append(f" · reserved {fmt_bytes(peak.reserved)}")
        if page.never:
            head.append(f" · never freed {page.never}" + (f" ({fmt_bytes(page.never_bytes)})" if hints else ""),
                        style="yellow")
        return head

    def _fill_live(self, page: Page) -> None:
        table = self.query_one("#mem-live", LineTable)
        self._holders = page.holders
        table.set_lines(page.live)
        table.border_subtitle = f"{page.live_count:,} allocations" if page.peak is not None else ""

    def _fill_ops(self, page: Page) -> None:
        table = self.query_one("#mem-ops", LineTable)
        self._stats = page.stats
        table.set_lines(page.ops)
        table.border_subtitle = "sorted by self Δ (size increase)"

    # ---- keys
    def action_next_device(self) -> None:
        if self.trace.memory_ready and len(self.memory.devices) > 1:
            self.device = ((self.device or 0) + 1) % len(self.memory.devices)
            self.refresh_all()

    def action_step(self, delta: int) -> None:
        steps = self.trace.steps
        if not steps:
            return
        i = steps.index(self.scope) if self.scope in steps else (-1 if delta > 0 else len(steps))
        self.scope = steps[(i + delta) % len(steps)]
        if self.trace.memory_ready:
            self.refresh_all()

    @on(LineTable.Selected)
    def row_selected(self, event: LineTable.Selected) -> None:
        event.stop()
        mem, t = self.memory, self.trace.tree
        row = event.row
        if event.table.id == "mem-live":
            if row >= len(self._holders):
                return
            i = self._holders[row]["first"]
            nodes = np.array([mem.op[i] if mem.op[i] >= 0 else mem.node[i]], dtype=np.int64)
        else:
            if row >= len(self._stats):
                return
            nodes = self._stats[row].nodes
        nodes = nodes[nodes > 0]
        if not nodes.size:
            self.app.notify("no op holds this allocation", severity="warning")
            return
        screen = self.screen
        screen.matches = nodes[np.argsort(t.start[nodes], kind="stable")]
        screen.match_i = -1
        screen.action_next_match()


def _emit(out: Text, row: str, codes: np.ndarray) -> None:
    """One plot row: a span per run of cells of one style."""
    cuts = np.flatnonzero(np.diff(codes)) + 1
    for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, codes.size].tolist()):
        out.append(row[a:b], style=STYLES[int(codes[a])])
    out.append("\n")
