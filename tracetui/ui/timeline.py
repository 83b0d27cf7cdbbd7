"""A terminal timeline of one step: CPU thread lanes and GPU stream lanes in text cells."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widgets import Static

from tracetui.model.events import K
from tracetui.model.names import shorten_cpp
from tracetui.model.trace import Trace

from tracetui.textsafe import visible

from .format import plain

CLASS_STYLE = {"gemm": "red", "conv": "dark_orange", "attention": "bright_magenta", "norm": "bright_cyan",
               "communication": "cyan", "pointwise": "yellow", "reduction": "magenta", "triton": "green",
               "memcpy": "blue", "memset": "blue", "other": "white"}
"""Kernel colours by taxonomy class (tracetui/model/taxonomy.py CLASSES); a test checks every class has one."""
LABEL_W = 14
CPU_LAYERS = ((K["annotation"], "─", "yellow"), (K["module"], "─", "green"), (K["op"], "━", "cyan"),
              (K["runtime"], "│", "blue"))
"""Host kinds in drawing order: an op's cells cover its module's, a launch's cover its op's."""


class Timeline(Static):
    """Lanes for the step around ``node``: host ops (─), launches (│), kernels (█ by class), idle (·)."""

    def __init__(self, trace: Trace, **kw):
        super().__init__(**kw)
        self.trace = trace
        self.node = 0
        self.zoom = 1.0
        self.pan = 0.0
        self._win: tuple | None = None  # _window()'s answer for the scope it was asked for

    def show(self, node: int) -> None:
        """Draw the step around ``node``; zoomed in, bring ``node`` into view if it is not."""
        self.node = node
        if self.zoom > 1 and node:
            a, b = self._selection()
            if b < self.pan or a > self.pan + 1 / self.zoom:
                self.pan = float(np.clip((a + b) / 2 - 0.5 / self.zoom, 0, 1 - 1 / self.zoom))
        self.refresh_lanes()

    def refresh_lanes(self) -> None:
        self.update(self.render_lanes(max(20, (self.size.width or 80) - LABEL_W - 2)))

    def _window(self) -> tuple[int, int, int, np.ndarray]:
        """(scope node, its start, its end, its GPU activity): the step around the selection (the
        root outside any step), stretched to the end of the GPU work it launched. Kept per scope:
        a zoom key asks for it twice, and the whole trace's GPU activity is a scan of every kernel."""
        tr, t = self.trace, self.trace.tree
        step = int(tr.roll.step_of[self.node])
        scope = step if step >= 0 else 0
        if self._win is None or self._win[0] != scope:
            gpu = tr.step_gpu_nodes(scope) if step >= 0 else tr.gpu_descendants(scope)
            s0, s1 = int(t.start[scope]), int(t.start[scope] + t.dur[scope])
            if gpu.size:
                s1 = max(s1, int((t.start[gpu] + t.dur[gpu]).max()))
            self._win = scope, s0, max(s1, s0 + 1), gpu
        return self._win

    def _selection(self) -> tuple[float, float]:
        """Where the selected node starts and ends, as fractions of the window."""
        _, s0, s1, _ = self._window()
        t, n = self.trace.tree, self.node
        return (int(t.start[n]) - s0) / (s1 - s0), (int(t.start[n]) + int(t.dur[n]) - s0) / (s1 - s0)

    def zoom_by(self, factor: float) -> None:
        """Zoom keeping the selection where it is on screen (centred when it was off screen);
        without a selection inside the step, keep the middle of the view."""
        old = self.zoom
        new = max(1.0, old * factor)
        a, b = self._selection()
        focus = (a + b) / 2 if self.node != 0 and 0 <= a <= 1 else self.pan + 0.5 / old
        at = (focus - self.pan) * old  # where the focus is on screen, 0..1
        if not 0 <= at <= 1:
            at = 0.5
        self.zoom = new
        self.pan = float(np.clip(focus - at / new, 0, 1 - 1 / new))
        self.refresh_lanes()

    def pan_by(self, delta: float) -> None:
        """Move the view by ``delta`` screen widths."""
        self.pan = float(np.clip(self.pan + delta / self.zoom, 0, 1 - 1 / self.zoom))
        self.refresh_lanes()

    def render_lanes(self, width: int) -> Text:
        tr, t = self.trace, self.trace.tree
        scope, s0, s1, gpu = self._window()
        step = scope if scope else -1
        span = (s1 - s0) / self.zoom
        lo = s0 + self.pan * (s1 - s0)
        hi = lo + span
        out = Text()
        out.append(f"{visible(tr.name(scope))[:40]}  {span / 1e3:,.1f}µs shown, zoom ×{self.zoom:g} (+/- zoom, [ ] pan)\n",
                   style="bold")
        if self.node != scope:
            n = self.node
            out.append("selected", style="reverse")  # drawn reversed in its lane, as here
            out.append(" ")
            out.append(plain(f"{shorten_cpp(tr.name(n))[:40]}  {int(t.dur[n]) / 1e3:,.1f}µs "
                             f"at +{(int(t.start[n]) - s0) / 1e3:,.1f}µs"))
            out.append("\n")

        def cells(nodes):
            """The visible ``nodes`` and the first and last cell each covers."""
            starts, ends = t.start[nodes], t.start[nodes] + t.dur[nodes]
            vis = (ends >= lo) & (starts <= hi)
            a = np.clip(((starts[vis] - lo) / (hi - lo) * width).astype(np.int64), 0, width - 1)
            b = np.clip(((ends[vis] - lo) / (hi - lo) * width).astype(np.int64), 0, width - 1)
            return nodes[vis], a, np.maximum(a, b)

        def covered(a, b) -> np.ndarray:
            """Cells under any of the intervals [a, b]: O(events + width), however many there are."""
            edges = np.bincount(a, minlength=width + 1) - np.bincount(b + 1, minlength=width + 1)
            return np.cumsum(edges[:width]) > 0

        def lane(label: str, layers, blank: str, blank_style: str) -> None:
            """One lane: ``layers`` of (nodes, char, style), each drawn over the ones before it;
            the selection last, reversed."""
            row = np.full(width, blank, dtype=object)
            styles = np.full(width, blank_style, dtype=object)
            top = None
            for nodes, ch, st in layers:
                _, a, b = cells(nodes)
                on = covered(a, b)
                row[on], styles[on] = ch, st
                if sel in nodes:
                    top = ch, st
            if top is not None:
                _, a, b = cells(np.array([sel]))
                if a.size:
                    row[a[0]:b[0] + 1], styles[a[0]:b[0] + 1] = top[0], "reverse " + top[1]
            out.append(f"{visible(label)[:LABEL_W]:<{LABEL_W}}", style="bold")  # a tid can be any string
            _emit(out, row.tolist(), styles.tolist())

        sel = self.node
        # CPU lanes: host events under the scope, by thread
        sub = np.nonzero(tr.roll.step_of == scope)[0] if step >= 0 else np.arange(len(t.kind))
        host = sub[np.isin(t.kind[sub], [K["op"], K["annotation"], K["module"], K["runtime"]])]
        host_track = tr.store.track[t.ev[host]]
        for trk in np.unique(host_track).tolist():
            h = host[host_track == trk]
            lane("cpu " + str(tr.store.track_keys[trk][1]),
                 [(h[t.kind[h] == code], ch, st) for code, ch, st in CPU_LAYERS], "·", "")
        # GPU lanes, by stream, coloured by kernel class
        if gpu.size:
            gpu_track = tr.store.track[t.ev[gpu]]
            for trk in np.unique(gpu_track).tolist():
                g, _, _ = cells(gpu[gpu_track == trk])
                cls = np.array(tr.kernel_classes(g), dtype=object)
                key = tr.store.track_keys[trk]
                lane(f"gpu{key[1]} s{key[2]}",
                     [(g[cls == c], "█", CLASS_STYLE.get(c, "white")) for c in sorted(set(cls.tolist()))],
                     "·", "dim")
            busy = tr.step_breakdown(scope) if step >= 0 else None
            if busy:
                out.append(f"GPU busy {busy['busy_ns'] / 1e3:,.1f}µs, idle {busy['idle_ns'] / 1e3:,.1f}µs "
                           f"of {busy['window_ns'] / 1e3:,.1f}µs\n", style="dim")
        out.append("█ gemm ", style="red")
        out.append("█ pointwise ", style="yellow")
        out.append("█ triton ", style="green")
        out.append("█ mem ", style="blue")
        out.append("━ op │ launch · idle", style="dim")
        return out


def _emit(out: Text, row: list, styles: list) -> None:
    i = 0
    while i < len(row):
        j = i
        while j < len(row) and styles[j] == styles[i]:
            j += 1
        out.append("".join(row[i:j]), style=styles[i])
        i = j
    out.append("\n")
