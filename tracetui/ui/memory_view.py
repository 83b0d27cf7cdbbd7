"""The memory view (key 5): allocated and reserved over the selected step's time axis, its peak
marked, what was live at the peak and the per-op statistics; every row jumps to the tree.

The plot is our own braille drawing (2×4 dots per cell), not the timeline's widget, so the two
can change apart. The model (tracetui/model/memory.py) is built in a worker, never on a key.
"""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tracetui.model.memory import Memory, fmt_bytes
from tracetui.model.trace import Trace

from .format import fmt_us, plain
from .line_table import LineTable

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
        self.device = 0
        self.scope = 0            # the step shown (0: the whole trace)
        self._holders: list = []  # rows of the live-at-peak table: (group, its allocations)
        self._stats: list = []
        self._peak = None          # the shown window's peak, once refresh_all ran
        self._shown = False
        self._key: tuple = ()

    def compose(self):
        yield Static(id="mem-head")
        yield MemoryPlot(id="mem-plot")
        with Horizontal(id="mem-tables"):
            yield LineTable([("bytes", True), ("count", True), ("op", False), ("module", False), ("step", False)],
                            id="mem-live")
            yield LineTable([("self Δ", True), ("Δ", True), ("allocs", True), ("alloc size", True),
                             ("self allocs", True), ("calls", True), ("op", False)], id="mem-ops")

    def on_mount(self) -> None:
        live, ops = self.query_one("#mem-live", LineTable), self.query_one("#mem-ops", LineTable)
        live.border_title = "live at the peak (Enter: the op)"
        ops.border_title = "per op, TensorBoard definitions (Enter: the op, n next)"

    def on_resize(self, event) -> None:
        self.set_class(self.size.width < WIDE_COLS, "narrow")
        if self._shown:
            self._draw_plot()

    # ---- what is shown
    def show(self, node: int) -> None:
        """Show the step around ``node`` (the whole trace outside any step)."""
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
        self.trace.memory  # noqa: B018 - builds it (reads every [memory] instant's args)
        try:
            self.app.call_from_thread(self.refresh_all)
        except RuntimeError:  # the app closed meanwhile
            pass

    @property
    def memory(self) -> Memory:
        return self.trace.memory

    def window(self) -> tuple[int, int]:
        """The shown time axis: the step's window (host interval, stretched to its GPU work) or
        the whole trace."""
        t, store = self.trace.tree, self.trace.store
        if not self.scope:  # the events' own span (a synthetic node can hold the root's start at 0)
            ends = [int(store.ts.min()), int((store.ts + store.dur).max())] if len(store) else [0, 1]
            if len(self.memory):
                ends += [int(self.memory.ts[0]), int(self.memory.ts[-1]) + 1]
            return min(ends), max(max(ends), min(ends) + 1)
        s0, s1 = int(t.start[self.scope]), int(t.start[self.scope] + t.dur[self.scope])
        if self.scope:
            gpu = self.trace.step_window(self.scope).gpu
            if gpu.size:
                s1 = max(s1, int((t.start[gpu] + t.dur[gpu]).max()))
        return s0, max(s1, s0 + 1)

    def refresh_all(self) -> None:
        mem = self.memory
        head = self.query_one("#mem-head", Static)
        if not len(mem):
            head.update(Text("no [memory] events in this trace: record with "
                             "torch.profiler.profile(profile_memory=True)", style="yellow"))
            self.query_one("#mem-plot", Static).update("")
            for tid in ("#mem-live", "#mem-ops"):
                self.query_one(tid, LineTable).set_rows([])
            return
        self.device %= len(mem.devices)
        lo, hi = self.window()
        self._peak = mem.peak(self.device, lo, hi) if self.scope else mem.peak(self.device)
        self._shown = True
        self._key = (self.device, self.scope)
        self._draw_plot()
        self._fill_live()
        self._fill_ops(lo, hi)

    def _draw_plot(self) -> None:
        mem, tr = self.memory, self.trace
        if not len(mem):
            return
        lo, hi = self.window()
        d = self.device
        ts, alloc, res = mem.series(d)
        width = max(10, (self.size.width or 80) - AXIS_W - 2)
        peak = self._peak
        n_rows = int(np.clip((self.size.height or 20) // 4, *PLOT_ROWS))
        rows, styles, top = braille_plot(ts, alloc, res, lo, hi, width, n_rows,
                                         peak.ts if peak is not None else None)
        head = Text()
        scope_name = tr.name(self.scope) if self.scope else "whole trace"
        head.append(f"{mem.devices[d]}", style="bold")
        head.append(f" {d + 1}/{len(mem.devices)} (v)" if len(mem.devices) > 1 else "")
        head.append(" · ")
        head.append(plain(scope_name[:40], "bold"))
        head.append(" (, .) · ")
        if peak is not None:
            head.append(f"peak {fmt_bytes(peak.allocated)}", style="bold red")
            head.append(f" at +{fmt_us(peak.ts - lo) if peak.ts > lo else '0'}")
            if peak.reserved > 0:
                head.append(f" · reserved {fmt_bytes(peak.reserved)}")
        never = mem.never_freed(d)
        if never.size:
            head.append(f" · never freed {never.size} ({fmt_bytes(int(mem.nbytes[never].sum()))})", style="yellow")
        self.query_one("#mem-head", Static).update(head, layout=False)  # one line, always
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
        plot = self.query_one("#mem-plot", Static)
        height = n_rows + 2
        if plot.styles.height is None or plot.styles.height.value != height:
            plot.styles.height = height  # a new height lays the screen out once; same height: no layout
        plot.update(out, layout=False)

    def _fill_live(self) -> None:
        mem, table = self.memory, self.query_one("#mem-live", LineTable)
        self._holders = []
        peak = self._peak
        rows = []
        if peak is not None:
            groups = mem.holders(peak.live, "op,module,step")
            for g in groups[:HOLDER_ROWS]:
                op, module, step = g["key"]
                rows.append((fmt_bytes(g["bytes"]), f"{g['count']:,}", op, module, step))
                self._holders.append(g)
            rest = groups[HOLDER_ROWS:]
            if rest:
                rows.append((fmt_bytes(sum(g["bytes"] for g in rest)), f"{sum(g['count'] for g in rest):,}",
                             f"… {len(rest)} more groups", "", ""))
            if peak.held_before:
                rows.append((fmt_bytes(peak.held_before), "", "(allocated before the trace)", "", ""))
        table.set_rows(rows, max_widths=[12, 9, 32, 28, 20])
        table.border_subtitle = f"{peak.live.size:,} allocations" if peak is not None else ""

    def _fill_ops(self, lo: int, hi: int) -> None:
        mem, table = self.memory, self.query_one("#mem-ops", LineTable)
        label = mem.devices[self.device]
        stats = [s for s in mem.op_stats(*((lo, hi) if self.scope else (None, None))) if s.device == label]
        self._stats = stats
        table.set_rows([(fmt_bytes(s.self_increase), fmt_bytes(s.increase), f"{s.alloc_count:,}", fmt_bytes(s.alloc_bytes),
                         f"{s.self_alloc_count:,}", f"{s.calls:,}", s.name) for s in stats],
                       max_widths=[12, 12, 9, 12, 11, 9, 200])
        table.border_subtitle = "sorted by self Δ (size increase)"

    # ---- keys
    def action_next_device(self) -> None:
        if self.trace.memory_ready and len(self.memory.devices) > 1:
            self.device = (self.device + 1) % len(self.memory.devices)
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
