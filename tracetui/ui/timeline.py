"""The timeline view: paints ``tracetui.model.lanes`` with the Line API and moves a cursor over events.

Rows, top to bottom: a title line (the event under the cursor), the time axis (labels, then
ticks with step starts ┃ and the range), then lanes grouped by process and GPU device, then a
legend or the range's summary. Lanes scroll vertically to keep the cursor's lane in view.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache, wraps

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events, work
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from tracetui.read.events import GPU_KINDS, K, kind_mask
from tracetui.model.lanes import Lane, build_lanes, extent, fmt_time, range_summary, ticks
from tracetui.model.names import shorten_cpp
from tracetui.model.trace import Trace
from tracetui.textsafe import visible
from tracetui.ui.focus_now import FocusApplied

CLASS_COLOUR = {
    "gemm": "#d7005f", "conv": "#ff8700", "attention": "#af5fd7", "norm": "#d787d7",
    "communication": "#00afaf", "nccl": "#00afaf", "pointwise": "#d7af00", "reduction": "#5f5fd7",
    "triton": "#5faf00", "memcpy": "#0087d7", "memset": "#5fafff", "other": "#8a8a8a",
}
"""Kernel class (``names.decode_kernel``) -> background colour (truecolor: the same in every
theme); an unknown class gets ``FALLBACK``. The glyph row of the legend names them."""
FALLBACK = "#6c6c6c"
LANE_COLOUR = {"steps": "#875f87", "annot": "#87875f", "ops": "#00878f", "launch": "#5f5f87",
               "gpu_annot": "#585858"}
"""Host lanes (and GPU user annotations) by lane kind."""
MODULE_COLOUR = "#5f875f"
DARK_TEXT = frozenset({"#d7af00", "#5fafff", "#d787d7", "#00afaf", "#8a8a8a", "#ff8700", "#5faf00"})
"""Backgrounds light enough that names on them are written in black."""
LEGEND = (("gemm", "gemm"), ("conv", "conv"), ("attention", "attn"), ("norm", "norm"),
          ("communication", "comm"), ("pointwise", "pointwise"), ("reduction", "reduce"),
          ("triton", "triton"), ("memcpy", "memcpy"), ("memset", "memset"), ("other", "other"))
ZOOM_MIN_NS_PER_CELL = 1.0
"""The closest zoom: one nanosecond per cell (the trace's resolution)."""
HEAD_ROWS = 3
"""Title, axis labels, axis ticks."""
BUILD_IN_WORKER = 50_000
"""Events from which `4` builds the lanes in a worker when the prefetch has not built them yet
(~0.75 µs an event, 0.2 s at 270k: over a key's 50 ms); the view says so meanwhile, and its keys
wait. Under it they are built in the key (a test's `4` finds them at once)."""


def _needs_lanes(handler):
    """A key or mouse handler that does nothing while the worker builds the lanes."""
    @wraps(handler)
    def run(self, *args, **kw):
        if self._lanes is None and self._building:
            return None
        return handler(self, *args, **kw)
    return run


@lru_cache(maxsize=256)
def _style(color: str | None = None, bgcolor: str | None = None, bold: bool = False) -> Style:
    """One Style per look: a lane paints a few looks over ~100 cells, and Style() costs ~5 µs."""
    return Style(color=color, bgcolor=bgcolor, bold=bold)


@dataclass
class Cursor:
    lane: int = 0
    index: int = -1


class Timeline(FocusApplied, Widget, can_focus=True):
    """Lanes of every thread and stream; the cursor sits on one event of one lane."""

    BINDINGS = [
        Binding("left,h", "move(-1)", "Prev event", show=False),
        Binding("right,l", "move(1)", "Next event", show=False),
        Binding("up,k", "lane(-1)", "Lane up", show=False),
        Binding("down,j", "lane(1)", "Lane down", show=False),
        Binding("tab", "lane(1)", "Next lane", show=False, priority=False),
        Binding("shift+tab", "lane(-1)", "Prev lane", show=False),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in"),
        Binding("minus", "zoom(2)", "Zoom out"),
        Binding("left_square_bracket", "pan(-0.25)", "Pan ←", show=False),
        Binding("right_square_bracket", "pan(0.25)", "Pan →", show=False),
        Binding("w", "whole", "Whole trace", show=False),
        Binding("f", "flow", "Follow flow"),
        Binding("m", "mark", "Mark range"),
        Binding("M", "clear_range", "Clear range", show=False),
        Binding("z", "zoom_range", "Zoom to range", show=False),
        Binding("enter", "open", "Open in tree"),
    ]

    class Opened(Message):
        """Enter on an event: show its node in the tree and the detail pane."""

        def __init__(self, node: int) -> None:
            super().__init__()
            self.node = node

    class RangeChanged(Message):
        """A range was marked (``summary`` from ``lanes.range_summary``) or cleared (None)."""

        def __init__(self, summary: dict | None) -> None:
            super().__init__()
            self.summary = summary

    def __init__(self, trace: Trace, **kw):
        super().__init__(**kw)
        self.trace = trace
        self._lanes: list[Lane] | None = None
        self._colour_cache: dict[int, list] = {}
        self.cur = Cursor()
        self.lo, self.hi = 0.0, 1.0
        self.top = 0                  # first lane row shown
        self.anchor: int | None = None  # range start marked, end not yet
        self.range: tuple[int, int] | None = None
        self.summary: dict | None = None
        self.message = ""
        self._strips: list[Strip] | None = None
        self._lanes_lock = threading.Lock()  # the prefetch worker and `4`'s worker build them once
        self._building = False               # `4`'s worker is building the lanes
        self._pending: int | None = None     # the node `4` asked for meanwhile
        self._strips_size = None       # the size they were built at
        self._rows_of: tuple | None = None  # (lanes, their rows)
        self._drag: tuple[int, float] | None = None

    # ---- model
    @property
    def lanes(self) -> list[Lane]:
        if self._lanes is None:
            with self._lanes_lock:  # (the prefetch worker and `4`'s may both get here)
                if self._lanes is None:
                    lanes = build_lanes(self.trace)
                    self.full = extent(lanes)
                    self.lo, self.hi = self.full
                    self._lanes = lanes
        return self._lanes

    @property
    def ready(self) -> bool:
        """The lanes are built (else `4` shows that they are being built, in a worker)."""
        return self._lanes is not None

    @work(thread=True, group="timeline")
    def _build(self) -> None:
        self.prepare()
        try:
            self.app.call_from_thread(self._built)
        except RuntimeError:  # the app closed meanwhile
            pass

    def _built(self) -> None:
        self._building = False
        node, self._pending = self._pending, None
        if node is not None:
            self.show(node)

    def prepare(self) -> None:
        """Build the lanes and decode their kernel classes now (the app calls this in a worker
        after its first paint: 0.19 s on a 270k-event trace, which `4` would otherwise wait for)."""
        for li in range(len(self.lanes)):
            self._colours(li)

    @property
    def node(self) -> int:
        """The tree node under the cursor (-1: none, or an event with no node)."""
        lane = self._lane()
        return int(lane.nodes[self.cur.index]) if lane is not None and self.cur.index >= 0 else -1

    def _lane(self) -> Lane | None:
        ls = self.lanes
        return ls[self.cur.lane] if 0 <= self.cur.lane < len(ls) else None

    def _event(self) -> tuple[int, int] | None:
        lane = self._lane()
        if lane is None or self.cur.index < 0:
            return None
        return int(lane.starts[self.cur.index]), int(lane.ends[self.cur.index])

    def _width(self) -> int:
        return max(10, (self.size.width or 100) - self._label_w())

    def _label_w(self) -> int:
        return 16 if (self.size.width or 100) < 120 else 22

    def find(self, node: int) -> Cursor | None:
        """The lane event of ``node``, or of its nearest ancestor that has one."""
        t = self.trace.tree
        n = int(node)
        while n > 0:
            for li, lane in enumerate(self.lanes):
                i = lane.index_of_node(n)
                if i >= 0:
                    return Cursor(li, i)
            n = int(t.parent[n])
        return None

    def scope(self, node: int) -> tuple[float, float]:
        """The time span ``4`` opens on: the step around ``node`` (with the GPU work it launched),
        else the node's own span (with its GPU work), else the whole trace."""
        tr, t = self.trace, self.trace.tree
        n = int(node)
        if n > 0 and t.kind[n] in GPU_KINDS:
            n = tr.launcher(n) or n
        step = int(tr.roll.step_of[n]) if n > 0 else -1
        if step >= 0:
            g = tr.step_gpu_nodes(step)
            s0, s1 = int(t.start[step]), int(t.start[step] + t.dur[step])
            if g.size:
                s1 = max(s1, int((t.start[g] + t.dur[g]).max()))
            return self._padded(s0, s1)
        if n > 0 and t.kind[n] != K["thread"] and t.dur[n] > 0:
            s0, s1 = int(t.start[n]), int(t.start[n] + t.dur[n])
            if t.kind[int(node)] not in GPU_KINDS:
                g = tr.gpu_descendants(n)
                if g.size:
                    s1 = max(s1, int((t.start[g] + t.dur[g]).max()))
            return self._padded(s0, s1)
        return tuple(map(float, self.full))

    def _padded(self, s0: int, s1: int) -> tuple[float, float]:
        """``s0..s1`` and 2% each side; never narrower than the closest zoom (a zero-length step
        made an empty view, and the axis divided by its width)."""
        pad = (s1 - s0) * 0.02
        lo, hi = s0 - pad, s1 + pad
        least = self._width() * ZOOM_MIN_NS_PER_CELL
        if hi - lo < least:
            mid = (lo + hi) / 2
            lo, hi = mid - least / 2, mid + least / 2
        return lo, hi

    # ---- entry points
    def show(self, node: int) -> None:
        """Put the cursor on ``node`` (or its nearest ancestor in a lane) and open on its scope;
        on a large trace whose lanes are not built yet, once a worker has built them."""
        if self._lanes is None and (self._building or len(self.trace.store) > BUILD_IN_WORKER):
            self._pending = node
            self._strips = None
            self.refresh()
            if not self._building:
                self._building = True
                self._build()
            return
        self.lanes  # noqa: B018 - builds them
        c = self.find(node)
        self.lo, self.hi = self.scope(node)
        if c is None:  # the root, a thread: the first lane's first event in view
            c = Cursor(0, -1)
            for li, lane in enumerate(self.lanes):
                if len(lane):
                    c = Cursor(li, lane.index_at(self.lo))
                    break
        self.cur = c
        self._changed()

    def select(self, lane: int, index: int, keep_view: bool = False) -> None:
        """Move the cursor; scroll the view so the event shows unless ``keep_view``."""
        self.cur = Cursor(lane, index)
        ev = self._event()
        if ev is not None and not keep_view:
            a, b = ev
            span = self.hi - self.lo
            if b < self.lo or a > self.hi:
                mid = (a + b) / 2
                self.lo, self.hi = mid - span / 2, mid + span / 2
                self._clamp()
        self._changed()

    def _changed(self) -> None:
        self._keep_lane_visible()
        self._strips = None
        self.refresh()

    def _clamp(self) -> None:
        f0, f1 = self.full
        span = min(self.hi - self.lo, (f1 - f0) * 1.1)
        lo = min(max(self.lo, f0 - (f1 - f0) * 0.05), f1 + (f1 - f0) * 0.05 - span)
        self.lo, self.hi = lo, lo + span

    # ---- actions
    @_needs_lanes
    def action_move(self, d: int) -> None:
        lane = self._lane()
        if lane is None or not len(lane):
            return
        i = self.cur.index
        if i < 0:
            i = lane.index_at((self.lo + self.hi) / 2)
        else:
            i = int(np.clip(i + d, 0, len(lane) - 1))
        self.select(self.cur.lane, i)

    @_needs_lanes
    def action_lane(self, d: int) -> None:
        ls = self.lanes
        ev = self._event()
        t = (ev[0] + ev[1]) / 2 if ev else (self.lo + self.hi) / 2
        li = self.cur.lane + d
        while 0 <= li < len(ls) and not len(ls[li]):
            li += d
        if not 0 <= li < len(ls):
            return
        self.select(li, ls[li].index_at(t))

    @_needs_lanes
    def action_zoom(self, factor: float, at: float | None = None) -> None:
        """Zoom by ``factor`` (< 1: in) around time ``at``, else the cursor's event (where it is on
        screen; centred when it is off screen), else the middle of the view."""
        span = self.hi - self.lo
        if at is None:
            ev = self._event()
            at = (ev[0] + ev[1]) / 2 if ev else (self.lo + self.hi) / 2
        frac = (at - self.lo) / span if span else 0.5
        if not 0 <= frac <= 1:
            frac = 0.5
        new = max(span * factor, self._width() * ZOOM_MIN_NS_PER_CELL)
        self.lo = at - frac * new
        self.hi = self.lo + new
        self._clamp()
        self._changed()

    @_needs_lanes
    def action_pan(self, d: float) -> None:
        span = self.hi - self.lo
        self.lo += d * span
        self.hi += d * span
        self._clamp()
        self._changed()

    @_needs_lanes
    def action_whole(self) -> None:
        self.lo, self.hi = self.full
        self._changed()

    @_needs_lanes
    def action_flow(self) -> None:
        """Between a launch and the GPU work it launched: a kernel goes to its launch, a launch
        (or an op) to its first kernel."""
        tr, t = self.trace, self.trace.tree
        n = self.node
        if n < 0:
            return
        if t.kind[n] in GPU_KINDS:
            target = tr.launcher(n)
        else:
            kids = t.child_idx[t.child_off[n]:t.child_off[n + 1]]
            g = kids[kind_mask(t.kind[kids], GPU_KINDS)]
            if not g.size:
                g = tr.gpu_descendants(n)
            target = int(g[np.argmin(t.start[g])]) if g.size else None
        c = self.find(target) if target is not None else None
        if c is None:
            self.app.notify("no launch or GPU work linked to this event", severity="warning")
            return
        self.select(c.lane, c.index)

    @_needs_lanes
    def action_open(self) -> None:
        if self.node > 0:
            self.post_message(self.Opened(self.node))
        else:
            self.app.notify("this event is not in the tree (a GPU user annotation)", severity="warning")

    @_needs_lanes
    def action_mark(self) -> None:
        ev = self._event()
        if ev is None:
            return
        if self.anchor is None:
            self.anchor, self.range, self.summary = ev[0], None, None
            self.message = "range start marked: move, then m again"
            self.post_message(self.RangeChanged(None))
        else:
            a, b = sorted((self.anchor, ev[0]))
            self.set_range(a, max(b, ev[1]))
            return
        self._changed()

    def set_range(self, a: float, b: float) -> None:
        a, b = int(min(a, b)), int(max(a, b))
        self.anchor = None
        self.range = (a, max(b, a + 1))
        self.summary = range_summary(self.trace, self.lanes, *self.range)
        self.message = ""
        self.post_message(self.RangeChanged(self.summary))
        self._changed()

    @_needs_lanes
    def action_clear_range(self) -> None:
        self.anchor = self.range = self.summary = None
        self.message = ""
        self.post_message(self.RangeChanged(None))
        self._changed()

    @_needs_lanes
    def action_zoom_range(self) -> None:
        if self.range:
            self.lo, self.hi = self._padded(*self.range)
            self._changed()

    # ---- mouse
    def _at(self, x: int) -> float:
        return self.lo + (x - self._label_w() + 0.5) / self._width() * (self.hi - self.lo)

    def _lane_at(self, y: int) -> int | None:
        rows = self._rows()
        k = y - HEAD_ROWS + self.top
        if HEAD_ROWS <= y and 0 <= k < len(rows) and rows[k][0] == "lane":
            return rows[k][1]
        return None

    @_needs_lanes
    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.x >= self._label_w():
            self._drag = (event.x, self._at(event.x))
            self.capture_mouse()

    @_needs_lanes
    def on_mouse_up(self, event: events.MouseUp) -> None:
        self.release_mouse()
        drag, self._drag = self._drag, None
        if drag is None:
            return
        if abs(event.x - drag[0]) >= 2:
            self.set_range(drag[1], self._at(event.x))
            return
        li = self._lane_at(event.y)
        if li is None or not len(self.lanes[li]):
            return
        t = self._at(event.x)
        lane = self.lanes[li]
        i = lane.index_at(t)
        half = (self.hi - self.lo) / self._width()
        if lane.starts[i] - half <= t <= lane.ends[i] + half:
            self.focus()
            self.select(li, i, keep_view=True)

    @_needs_lanes
    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.action_zoom(0.5, at=self._at(event.x) if event.x >= self._label_w() else None)

    @_needs_lanes
    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_zoom(2, at=self._at(event.x) if event.x >= self._label_w() else None)

    def on_resize(self, event) -> None:
        if event.size == self._strips_size:  # shown again at the size it was painted (back to 4)
            return
        self._strips = None
        if self._lanes is not None:
            self._keep_lane_visible()
        self.refresh()

    # ---- painting
    def _rows(self) -> list[tuple[str, object]]:
        """The lane area's rows: ("group", name) headers and ("lane", index) rows."""
        lanes = self.lanes
        if self._rows_of is None or self._rows_of[0] is not lanes:
            out, group = [], None
            for i, lane in enumerate(lanes):
                if lane.group != group:
                    group = lane.group
                    out.append(("group", group))
                out.append(("lane", i))
            self._rows_of = (lanes, out)
        return self._rows_of[1]

    def _lane_rows_shown(self) -> int:
        return max(1, (self.size.height or 20) - HEAD_ROWS - self._foot_rows())

    def _foot_rows(self) -> int:
        return 1

    def _keep_lane_visible(self) -> None:
        rows = self._rows()
        k = next((r for r, (what, v) in enumerate(rows) if what == "lane" and v == self.cur.lane), 0)
        shown = self._lane_rows_shown()
        if k < self.top:
            self.top = max(0, k - 1)  # keep its group header in view when it is just above
        elif k >= self.top + shown:
            self.top = k - shown + 1
        self.top = max(0, min(self.top, max(0, len(rows) - shown)))

    def render_line(self, y: int) -> Strip:
        if self._strips is None:
            self._strips = self.build_strips()
            self._strips_size = self.size
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width)

    def build_strips(self) -> list[Strip]:
        """Every row of the widget as a Strip: the head, the lanes shown, the foot."""
        width = self.size.width or 100
        if self._lanes is None and self._building:
            title = Strip([Segment(f"building the timeline of {len(self.trace.store):,} events…"[:width],
                                   Style(bold=True))]).extend_cell_length(width)
            return [title] + [Strip.blank(width)] * max(0, (self.size.height or 1) - 1)
        lw, w = self._label_w(), self._width()
        steps = self._step_cells(w)
        out = [self._title(width), *self._axis(lw, w, steps)]
        rows = self._rows()
        shown = self._lane_rows_shown()
        for what, v in rows[self.top:self.top + shown]:
            if what == "group":
                out.append(Strip([Segment(f"▾ {visible(v)}"[:width].ljust(width), Style(bold=True, underline=True))]))
            else:
                out.append(self._lane_strip(v, lw, w, steps))
        while len(out) < HEAD_ROWS + shown:
            out.append(Strip.blank(width))
        out += self._foot(width)
        return out

    def _title(self, width: int) -> Strip:
        segs = []
        ev, lane = self._event(), self._lane()
        if ev is not None and lane is not None:
            name = shorten_cpp(visible(lane.name(self.trace, self.cur.index)))
            segs.append(Segment(f"{visible(lane.label)}: ", Style(dim=True)))
            segs.append(Segment(name[:max(10, width // 2)], Style(bold=True)))
            segs.append(Segment(f"  {fmt_time(ev[1] - ev[0])} at +{fmt_time(ev[0] - self.full[0])}", Style()))
        segs.append(Segment(f"  view {fmt_time(self.hi - self.lo)}", Style(dim=True)))
        if self.message:
            segs.append(Segment("  " + self.message, Style(color="cyan", bold=True)))
        return Strip(segs).crop(0, width).extend_cell_length(width)

    def _step_cells(self, w: int) -> set[int]:
        """The cells of the ``w`` shown where a step starts (one pass for the axis and every lane)."""
        steps = np.asarray(self.trace.steps, dtype=np.int64)
        if not steps.size:
            return set()
        px = (self.hi - self.lo) / w
        c = ((self.trace.tree.start[steps] - self.lo) / px).astype(np.int64)  # int(): toward zero
        return set(c[(c >= 0) & (c < w)].tolist())

    def _axis(self, lw: int, w: int, steps: set[int] | None = None) -> list[Strip]:
        if steps is None:
            steps = self._step_cells(w)
        origin = self.full[0]
        labels = [" "] * w
        marks = ["─"] * w
        mstyle = [Style(dim=True)] * w
        for cell, text in ticks(self.lo, self.hi, w, origin):
            marks[cell] = "┴"
            if cell + len(text) <= w and all(c == " " for c in labels[max(0, cell - 1):cell + len(text)]):
                labels[cell:cell + len(text)] = list(text)
        for c in steps:
            marks[c], mstyle[c] = "┃", _style("magenta", bold=True)
        for a, b, st in self._range_cells(w):
            for c in range(a, b + 1):
                mstyle[c] = Style(color="bright_cyan", bold=True)
                marks[c] = "━" if marks[c] in "─┴" else marks[c]
        head = "time" if self.lo >= origin else ""
        lab = Strip([Segment(head.ljust(lw)[:lw], Style(dim=True)), Segment("".join(labels), Style(dim=True))])
        segs = [Segment(" " * lw)]
        segs += [Segment(ch, st) for ch, st in zip(marks, mstyle)]
        return [lab, Strip(segs).simplify()]

    def _range_cells(self, w: int) -> list[tuple[int, int, Style]]:
        px = (self.hi - self.lo) / w
        if self.range:
            a, b = self.range
        elif self.anchor is not None:
            a = b = self.anchor
        else:
            return []
        ca, cb = int((a - self.lo) / px), int((b - self.lo) / px)
        if cb < 0 or ca >= w:
            return []
        return [(max(0, ca), min(w - 1, cb), Style())]

    def _colours(self, li: int) -> list:
        """Background colour of each interval of lane ``li`` (kernel classes decoded once per lane)."""
        if li not in self._colour_cache:
            lane = self.lanes[li]
            t = self.trace.tree
            if lane.kind == "gpu":
                cls = self.trace.kernel_classes(lane.nodes)
                self._colour_cache[li] = [CLASS_COLOUR.get(c, FALLBACK) for c in cls]
            elif lane.kind == "annot":
                self._colour_cache[li] = [MODULE_COLOUR if k == K["module"] else LANE_COLOUR["annot"]
                                     for k in t.kind[lane.nodes].tolist()]
            else:
                self._colour_cache[li] = LANE_COLOUR.get(lane.kind, FALLBACK)
        return self._colour_cache[li]

    def _lane_strip(self, li: int, lw: int, w: int, steps: set[int] | None = None) -> Strip:
        lane = self.lanes[li]
        if steps is None:
            steps = self._step_cells(w)
        is_cur = li == self.cur.lane
        label = visible(lane.label)
        if len(label) > lw - 1:
            label = label[:lw - 2] + "…"
        segs = [Segment(label.ljust(lw), Style(bold=True, reverse=is_cur))]
        rep, merged = lane.cells(self.lo, self.hi, w)
        cols = self._colours(li)
        px = (self.hi - self.lo) / w
        cur = self.cur.index if is_cur else -1
        if cur >= 0:  # the cursor's event shows even where it is narrower than a cell
            c0 = int((lane.starts[cur] - self.lo) / px)
            c1 = int(np.ceil((lane.ends[cur] - self.lo) / px)) - 1
            c0, c1 = max(c0, 0), min(max(c1, c0), w - 1)
            if c0 <= c1:
                rep = rep.copy()
                merged = merged.copy()
                rep[c0:c1 + 1] = cur
                merged[c0:c1 + 1] = False
        rng = self._range_cells(w)
        in_range = [False] * w
        for a, b, _ in rng:
            in_range[a:b + 1] = [True] * (b + 1 - a)
        rl, ml = rep.tolist(), merged.tolist()
        x = 0
        while x < w:
            r, m = rl[x], ml[x]
            y = x + 1
            while y < w and rl[y] == r and ml[y] == m and (r >= 0 or in_range[y] == in_range[x]):
                y += 1
            n = y - x
            colour = (cols[r] if isinstance(cols, list) else cols) if r >= 0 else None
            if r < 0:
                text = "".join("┊" if c in steps else " " for c in range(x, y))
                segs.append(Segment(text, _style("#af5faf", "#303030" if in_range[x] else None)))
            elif m:
                segs.append(Segment("▒" * n, _style(colour, "#303030" if in_range[x] else None)))
            else:
                name = shorten_cpp(visible(lane.name(self.trace, r)))
                if n >= 3:
                    text = (" " + name)[:n] if len(name) + 1 <= n else (" " + name)[:n - 1] + "…"
                else:
                    text = " " * n
                text = text.ljust(n)
                if r == cur:
                    st = _style("black", "bright_white", bold=True)
                else:
                    st = _style("black" if colour in DARK_TEXT else "white", colour)
                if x > 0 and rl[x - 1] >= 0 and not ml[x - 1]:  # two events side by side stay apart
                    text = "▏" + text[1:]
                segs.append(Segment(text, st))
            x = y
        return Strip(segs)

    def _foot(self, width: int) -> list[Strip]:
        if self.summary is None:
            segs = []
            for cls, label in LEGEND:
                segs += [Segment("█", Style(color=CLASS_COLOUR[cls])), Segment(f"{label} ", Style(dim=True))]
            segs.append(Segment("▒ merged ┃ step", Style(dim=True)))
            return [Strip(segs).crop(0, width)]
        s = self.summary
        win = s["window_ns"]
        segs = [Segment(f"range {fmt_time(win)}", Style(bold=True, color="bright_cyan"))]
        for st in s["streams"]:
            segs.append(Segment(f" │ {visible(st['stream'])} busy {100 * st['busy_ns'] / win:.0f}%"))
        segs.append(Segment(f" │ {s['launches']} launches"))
        return [Strip(segs).crop(0, width)]
