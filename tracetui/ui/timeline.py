"""A terminal timeline of one step: CPU thread lanes and GPU stream lanes in text cells."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widgets import Static

from tracetui.model.events import K
from tracetui.model.names import shorten_cpp
from tracetui.model.trace import Trace

from .format import plain

CLASS_STYLE = {"gemm": "red", "pointwise": "yellow", "reduction": "magenta", "triton": "green",
               "memcpy": "blue", "memset": "blue", "nccl": "cyan", "other": "white", "conv": "red"}
LABEL_W = 14


class Timeline(Static):
    """Lanes for the step around ``node``: host ops (─), launches (│), kernels (█ by class), idle (·)."""

    def __init__(self, trace: Trace, **kw):
        super().__init__(**kw)
        self.trace = trace
        self.node = 0
        self.zoom = 1.0
        self.pan = 0.0

    def show(self, node: int) -> None:
        """Draw the step around ``node``; zoomed in, bring ``node`` into view if it is not."""
        self.node = node
        if self.zoom > 1 and node:
            _, s0, s1, _ = self._window()
            t = self.trace.tree
            a = (int(t.start[node]) - s0) / (s1 - s0)
            b = (int(t.start[node]) + int(t.dur[node]) - s0) / (s1 - s0)
            if b < self.pan or a > self.pan + 1 / self.zoom:
                self.pan = float(np.clip((a + b) / 2 - 0.5 / self.zoom, 0, 1 - 1 / self.zoom))
        self.refresh_lanes()

    def refresh_lanes(self) -> None:
        self.update(self.render_lanes(max(20, (self.size.width or 80) - LABEL_W - 2)))

    def _window(self) -> tuple[int, int, int, np.ndarray]:
        """(scope node, its start, its end, its GPU activity): the step around the selection (the
        root outside any step), stretched to the end of the GPU work it launched."""
        tr, t = self.trace, self.trace.tree
        step = int(tr.roll.step_of[self.node])
        scope = step if step >= 0 else 0
        gpu = tr.gpu_descendants(scope)
        s0, s1 = int(t.start[scope]), int(t.start[scope] + t.dur[scope])
        if gpu.size:
            s1 = max(s1, int((t.start[gpu] + t.dur[gpu]).max()))
        return scope, s0, max(s1, s0 + 1), gpu

    def zoom_by(self, factor: float) -> None:
        """Zoom keeping the selection where it is on screen (centred when it was off screen);
        without a selection inside the step, keep the middle of the view."""
        _, s0, s1, _ = self._window()
        t, old = self.trace.tree, self.zoom
        new = max(1.0, old * factor)
        view_mid = self.pan + 0.5 / old
        if self.node != 0 and int(t.start[self.node]) >= s0 and int(t.start[self.node]) <= s1:
            focus = ((int(t.start[self.node]) + int(t.dur[self.node]) / 2) - s0) / (s1 - s0)
        else:
            focus = view_mid
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
        out.append(f"{tr.name(scope)[:40]}  {span / 1e3:,.1f}µs shown, zoom ×{self.zoom:g} (+/- zoom, [ ] pan)\n",
                   style="bold")
        if self.node != scope:
            n = self.node
            out.append("selected", style="reverse")  # drawn reversed in its lane, as here
            out.append(" ")
            out.append(plain(f"{shorten_cpp(tr.name(n))[:40]}  {int(t.dur[n]) / 1e3:,.1f}µs "
                             f"at +{(int(t.start[n]) - s0) / 1e3:,.1f}µs"))
            out.append("\n")

        def cells(starts, ends):
            a = np.clip(((starts - lo) / (hi - lo) * width).astype(int), 0, width - 1)
            b = np.clip(((ends - lo) / (hi - lo) * width).astype(int), 0, width - 1)
            vis = (ends >= lo) & (starts <= hi)
            return a[vis], b[vis], vis

        sel = self.node
        # CPU lanes: host events under the scope, by thread
        sub = np.nonzero(tr.roll.step_of == scope)[0] if step >= 0 else np.arange(len(t.kind))
        host = sub[np.isin(t.kind[sub], [K["op"], K["annotation"], K["module"], K["runtime"]])]
        tracks = sorted(set(tr.store.track[t.ev[host]].tolist())) if host.size else []
        for trk in tracks:
            h = host[tr.store.track[t.ev[host]] == trk]
            row = ["·"] * width
            styles = [""] * width
            for kind_code, ch, st in ((K["annotation"], "─", "yellow"), (K["module"], "─", "green"),
                                      (K["op"], "━", "cyan"), (K["runtime"], "│", "blue")):
                hh = h[t.kind[h] == kind_code]
                a, b, vis = cells(t.start[hh], t.start[hh] + t.dur[hh])
                for x, y, n in zip(a.tolist(), b.tolist(), hh[vis].tolist()):
                    for c in range(x, max(x, y) + 1):
                        row[c], styles[c] = ch, ("reverse " + st) if n == sel else st
            key = tr.store.track_keys[trk]
            out.append(f"{('cpu ' + str(key[1]))[:LABEL_W]:<{LABEL_W}}", style="bold")
            _emit(out, row, styles)
        # GPU lanes, by stream
        if gpu.size:
            streams = sorted(set(tr.store.track[t.ev[gpu]].tolist()))
            for trk in streams:
                g = gpu[tr.store.track[t.ev[gpu]] == trk]
                row = ["·"] * width
                styles = ["dim"] * width
                a, b, vis = cells(t.start[g], t.start[g] + t.dur[g])
                for x, y, n in zip(a.tolist(), b.tolist(), g[vis].tolist()):
                    st = CLASS_STYLE.get(tr.kernel_info(n).klass, "white")
                    for c in range(x, max(x, y) + 1):
                        row[c], styles[c] = "█", ("reverse " + st) if n == sel else st
                key = tr.store.track_keys[trk]
                out.append(f"{('gpu' + str(key[1]) + ' s' + str(key[2]))[:LABEL_W]:<{LABEL_W}}", style="bold")
                _emit(out, row, styles)
            busy = tr.step_gpu(scope) if step >= 0 else None
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
