"""The ranks timeline: every rank of a job as a lane of one timeline (compute, communication,
copies, idle), on the clocks the job's analysis aligned; a rank opens into its streams (threads on
a CPU rank); one collective at a time is drawn across the ranks: where each rank arrived, where the
last one did, and who waited how long.

Everything shown comes from the job's tables (``jobs.lanes``) and its ``ranks`` document: the
lanes draw only the rows on screen (Line API), each row from two binary searches per class, so a
key costs the same with 8 ranks or 1,024.
"""
from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from tracetui.textsafe import visible
from tracetui.ui.footer import StableFooter

LABEL_W = 13
"""Width of a lane's label: ``▸ rank 1023`` or ``  stream 13``."""

CLASS_STYLE = {
    "compute": Style(color="rgb(80,200,90)"),
    "comm": Style(color="rgb(220,80,200)"),
    "copy": Style(color="rgb(230,200,60)"),
}
"""Each lane class's colour; idle is a dim dot."""

IDLE = Style(color="rgb(90,90,90)")
SELECTED = Style(bgcolor="rgb(20,70,120)")
"""Background of the cells the selected collective spans on a rank."""
LAST = Style(color="rgb(255,220,0)", bold=True)
"""The column where the last rank arrived at the selected collective."""
CURSOR = Style(reverse=True)
ZOOM_MIN_NS = 1000
"""The narrowest window (ns): a cell is never less than a few ns."""


def _us(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


class Lanes(ScrollView, can_focus=True):
    """The lanes, one row each, drawn for the window [``t0``, ``t1``) (aligned ns)."""

    inherit_bindings = False  # the screen's keys (up/down move the cursor, not the scroll)
    virtual_size: Reactive[Size] = Reactive(Size(0, 0))

    def __init__(self, lanes, collectives: list[dict], **kw):
        super().__init__(**kw)
        self.job = lanes
        self.colls = collectives
        self.t0, self.t1 = lanes.start, lanes.end
        self.expanded: set = set()
        self.cursor = 0
        self.selected: int | None = None
        self.rows: list = []
        self._cache: LRUCache = LRUCache(1024)
        self._flatten()

    def _flatten(self) -> None:
        self.rows = []
        for r in self.job.ranks:
            self.rows.append(self.job.lanes[r])
            if r in self.expanded:
                self.rows += self.job.subs.get(r, [])
        self.virtual_size = Size(self.size.width, len(self.rows))
        self._cache.clear()

    def set_view(self, t0: int, t1: int) -> None:
        span = max(int(t1 - t0), ZOOM_MIN_NS)
        self.t0, self.t1 = int(t0), int(t0) + span
        self.refresh()

    def toggle(self) -> None:
        """The cursor's rank opened into its streams, or closed."""
        r = self.rows[self.cursor].rank
        self.expanded ^= {r}
        self._flatten()
        self.cursor = next(i for i, ln in enumerate(self.rows) if ln.rank == r and ln.sub is None)
        self.refresh()

    def move(self, delta: int) -> None:
        self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))
        h = max(self.size.height, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False)
        self.refresh()

    def _marks(self, lane, edges) -> tuple[range | None, int | None, int | None]:
        """The selected collective on this lane: the cells it spans on the rank, the cell of the
        rank's own arrival, and the cell of the last arrival (every lane)."""
        if self.selected is None or not self.colls:
            return None, None, None
        c = self.colls[self.selected]
        w = len(edges) - 1
        cell = lambda ns: int(np.searchsorted(edges, ns, side="right") - 1)  # noqa: E731
        last = max(round(p["start_us"] * 1000) for p in c["per_rank"])
        lc = cell(last)
        lc = lc if 0 <= lc < w else None
        if lane.sub is not None:
            return None, None, lc
        mine = next((p for p in c["per_rank"] if p["rank"] == lane.rank), None)
        if mine is None:
            return None, None, lc
        a, b = cell(round(mine["start_us"] * 1000)), cell(round(mine["end_us"] * 1000))
        span = range(max(a, 0), min(b, w - 1) + 1) if b >= 0 and a < w else None
        return span, (a if 0 <= a < w else None), lc

    def render_line(self, y: int) -> Strip:
        i = self.scroll_offset.y + y
        width = self.size.width
        if i >= len(self.rows) or width <= LABEL_W:
            return Strip.blank(width)
        key = (i, self.t0, self.t1, width, self.selected, i == self.cursor, len(self.rows))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._line(self.rows[i], i == self.cursor, width)
        return hit

    def _line(self, lane, is_cursor: bool, width: int) -> Strip:
        w = width - LABEL_W
        edges = np.linspace(self.t0, self.t1, w + 1).round().astype(np.int64)
        cover = lane.cover(edges)
        cell_ns = max((self.t1 - self.t0) / w, 1.0)
        if lane.sub is None:
            label = f"{'▾' if lane.rank in self.expanded else '▸'} rank {lane.rank}"
        else:
            label = f"  {visible(lane.sub)}"
        segs = [Segment(label[:LABEL_W - 1].ljust(LABEL_W), CURSOR if is_cursor else Style(bold=lane.sub is None))]
        span, arrive, last = self._marks(lane, edges)
        classes = [k for k in ("comm", "compute", "copy") if k in cover]
        stack = np.vstack([cover[k] for k in classes]) if classes else np.zeros((1, w))
        best = stack.argmax(axis=0)
        frac = stack.max(axis=0) / cell_ns
        run_text, run_style = "", None
        for j in range(w):
            if j == last:
                ch, st = "┃", LAST
            elif j == arrive:
                ch, st = "◆", Style(color="white", bold=True)
            elif frac[j] <= 0:
                ch, st = "·", IDLE
            else:
                ch, st = ("█" if frac[j] >= 0.5 else "▄"), CLASS_STYLE[classes[best[j]]]
            if span is not None and j in span:
                st = st + SELECTED
            if st is run_style or st == run_style:
                run_text += ch
            else:
                if run_text:
                    segs.append(Segment(run_text, run_style))
                run_text, run_style = ch, st
        if run_text:
            segs.append(Segment(run_text, run_style))
        return Strip(segs, width)

    def on_resize(self, _event) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        self._cache.clear()


class RanksTimelineScreen(Screen):
    """The job's ranks on one timeline (module docstring); ``doc`` is the ``ranks`` document."""

    CSS_PATH = "ranks_timeline.tcss"
    help_section = "Ranks timeline"
    """``?`` shows this screen's keys first (help.md's section of that name)."""
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back to the job"),
        Binding("n,right_square_bracket", "collective(1)", "Next collective"),
        Binding("p,left_square_bracket", "collective(-1)", "Prev collective"),
        Binding("enter,space", "expand", "Streams"),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in"),
        Binding("minus", "zoom(2)", "Zoom out"),
        Binding("f", "focus_collective", "Fit collective"),
        Binding("0,home", "fit", "Whole job", show=False),
        Binding("left,h", "pan(-1)", "Earlier", show=False),
        Binding("right,l", "pan(1)", "Later", show=False),
        Binding("up,k", "cursor(-1)", "Rank up", show=False),
        Binding("down,j", "cursor(1)", "Rank down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
    ]

    def __init__(self, doc: dict, lanes):
        super().__init__()
        self.doc = doc
        self.lanes = lanes
        self.per = {p["rank"]: p for p in doc["per_rank"]}

    def compose(self) -> ComposeResult:
        yield Static(id="tl-head")
        yield Static(id="tl-ruler")
        yield Lanes(self.lanes, self.doc["collectives"], id="tl-lanes")
        yield Static(id="tl-detail")
        yield StableFooter()

    @property
    def view(self) -> Lanes:
        return self.query_one("#tl-lanes", Lanes)

    def on_mount(self) -> None:
        self.view.focus()
        self._redraw()

    def _redraw(self) -> None:
        v = self.view
        t = Text()
        t.append(f"{len(self.lanes.ranks)} ranks", style="bold")
        t.append(f" · aligned to rank {self.doc['reference_rank']} · {(v.t1 - v.t0) / 1e6:,.3f} of "
                 f"{(self.lanes.end - self.lanes.start) / 1e6:,.3f} ms · ")
        for k in ("compute", "comm", "copy"):
            t.append("█", style=CLASS_STYLE[k])
            t.append(f" {k} ")
        t.append("· idle", style=IDLE)
        self.query_one("#tl-head", Static).update(t)
        self.query_one("#tl-ruler", Static).update(self._ruler())
        self.query_one("#tl-detail", Static).update(self._detail())

    def _ruler(self) -> Text:
        """Milliseconds since the job's first activity at the window's edges and middle."""
        v = self.view
        w = max(v.size.width - LABEL_W, 10)
        marks = [(v.t0 - self.lanes.start) / 1e6, ((v.t0 + v.t1) / 2 - self.lanes.start) / 1e6,
                 (v.t1 - self.lanes.start) / 1e6]
        a, b, c = (f"{m:,.3f} ms" for m in marks)
        mid = max((w - len(b)) // 2 - len(a), 1)
        line = a + " " * mid + b
        line += " " * max(w - len(line) - len(c), 1) + c
        return Text(" " * LABEL_W + line[:w], style="dim")

    def _detail(self) -> Text:
        v = self.view
        t = Text()
        if v.rows:
            lane = v.rows[v.cursor]
            p = self.per.get(lane.rank, {})
            t.append(f"rank {lane.rank}" + (f" {visible(lane.sub)}" if lane.sub else ""), style="bold")
            t.append(f" · clock {visible(str(p.get('clock', '-')))} offset {p.get('offset_us', 0):+,.3f} µs "
                     f"({self._spread(p)}) · start skew {_us(p.get('start_skew_us'))} µs · work imbalance "
                     f"{_us(p.get('work_imbalance_us'))} µs a step")
            e = np.array([v.t0, v.t1], dtype=np.int64)
            cov = {k: int(c[0]) for k, c in lane.cover(e).items()}
            busy = sum(cov.values())
            t.append(f"\nin the window: compute {cov.get('compute', 0) / 1e3:,.0f} µs · comm "
                     f"{cov.get('comm', 0) / 1e3:,.0f} µs · copy {cov.get('copy', 0) / 1e3:,.0f} µs · idle "
                     f"{max(v.t1 - v.t0 - busy, 0) / 1e3:,.0f} µs")
        t.append("\n")
        t.append_text(self._collective_text())
        return t

    def _spread(self, p: dict) -> str:
        """Beside the offset: how far the rank's collective ends spread about it (``clocks.spread``)."""
        sp = p.get("offset_spread_us")
        ref = self.doc["reference_rank"]
        if p.get("rank") == ref:
            return "the reference"
        sp = "-" if sp is None else f"{sp:,.3f} µs"
        if not p.get("offset_from"):
            return f"rank {ref}'s clock; ends spread {sp}"
        return f"± spread {sp} over {p['offset_from']} ends"

    def _collective_text(self) -> Text:
        v = self.view
        colls = self.doc["collectives"]
        if not colls:
            return Text("no collective matched across ranks", style="yellow")
        if v.selected is None:
            return Text(f"{len(colls)} collectives: n / p select one and draw it across the ranks", style="cyan")
        c = colls[v.selected]
        first = min(p["start_us"] for p in c["per_rank"])
        t = Text(f"collective {v.selected + 1}/{len(colls)}: {visible(str(c['name']))} "
                 f"({visible(str(c['group']))} {c['match']} {visible(str(c['index']))}) · ", style="bold")
        last = max(c["per_rank"], key=lambda p: p["start_us"])
        t.append(f"last: rank {c['last_rank']} arrived {last['start_us'] - first:,.0f} µs after the first ┃", style="")
        waited = sorted((p for p in c["per_rank"] if p["wait_us"] > 0), key=lambda p: -p["wait_us"])
        t.append(" · waited: " + (", ".join(f"rank {p['rank']} {p['wait_us']:,.0f} µs" for p in waited[:6])
                                  + (f" and {len(waited) - 6} more" if len(waited) > 6 else "") if waited else "nobody"))
        return t

    # ---- actions
    def action_cursor(self, delta: int) -> None:
        self.view.move(delta)
        self.query_one("#tl-detail", Static).update(self._detail())

    def action_page(self, sign: int) -> None:
        self.action_cursor(sign * max(self.view.size.height - 1, 1))

    def action_expand(self) -> None:
        self.view.toggle()
        self.query_one("#tl-detail", Static).update(self._detail())

    def action_pan(self, sign: int) -> None:
        v = self.view
        d = (v.t1 - v.t0) // 4 * sign
        v.set_view(v.t0 + d, v.t1 + d)
        self._redraw()

    def action_zoom(self, factor: float) -> None:
        v = self.view
        mid, half = (v.t0 + v.t1) // 2, (v.t1 - v.t0) * factor / 2
        if v.selected is not None:  # zoom about the selected collective's last arrival
            mid = max(round(p["start_us"] * 1000) for p in self.doc["collectives"][v.selected]["per_rank"])
        v.set_view(int(mid - half), int(mid + half))
        self._redraw()

    def action_fit(self) -> None:
        self.view.set_view(self.lanes.start, self.lanes.end)
        self._redraw()

    def action_collective(self, step: int) -> None:
        """Select the next (previous) collective in start order and bring it into the window."""
        v = self.view
        n = len(self.doc["collectives"])
        if not n:
            return
        v.selected = 0 if v.selected is None and step > 0 else (n - 1 if v.selected is None else
                                                                  max(0, min(n - 1, v.selected + step)))
        c = self.doc["collectives"][v.selected]
        a = min(round(p["start_us"] * 1000) for p in c["per_rank"])
        b = max(round(p["end_us"] * 1000) for p in c["per_rank"])
        if a < v.t0 or b > v.t1:  # off screen: centre it, keeping the zoom
            half = (v.t1 - v.t0) // 2
            v.set_view((a + b) // 2 - half, (a + b) // 2 + half)
        v.refresh()
        self._redraw()

    def action_focus_collective(self) -> None:
        """The window fitted to the selected collective, from the first arrival to the last end."""
        v = self.view
        if v.selected is None:
            self.action_collective(1)
        c = self.doc["collectives"][v.selected] if v.selected is not None else None
        if c is None:
            return
        a = min(round(p["start_us"] * 1000) for p in c["per_rank"])
        b = max(round(p["end_us"] * 1000) for p in c["per_rank"])
        pad = max((b - a) // 10, ZOOM_MIN_NS)
        v.set_view(a - pad, b + pad)
        self._redraw()

    def system_commands(self):
        """For the command palette: (title, help, callback)."""
        return [("Next collective", "select the next collective and draw it across the ranks (n)",
                 lambda: self.action_collective(1)),
                ("Previous collective", "select the previous collective (p)", lambda: self.action_collective(-1)),
                ("Expand rank", "open or close the cursor rank's streams / threads (Enter)", self.action_expand),
                ("Fit collective", "zoom to the selected collective (f)", self.action_focus_collective),
                ("Whole job", "zoom out to the whole job (0)", self.action_fit)]
