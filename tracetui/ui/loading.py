"""The loading screen: traces decode in a worker thread with progress; Esc cancels. What to show
once they are loaded is the App's decision (the callback it passes), not this screen's."""
from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Label, ProgressBar
from textual.worker import get_current_worker

from tracetui.model import TraceError, load_trace
from tracetui.textsafe import visible
from tracetui.ui.footer import StableFooter
from tracetui.ui.idle_gc import keep_out_of_gc

PROGRESS_EVERY_S = 0.2
"""The loading screen takes at most one progress update per this many seconds. Each update waits
for the UI thread (call_from_thread) and restyles the screen while the decode wants the GIL:
first_screen_pty on the 270k-event replica, 7 rounds, 1.61 -> 1.57 s with 0.25 s (no updates at
all: 1.55 -> 1.50 s). Cancelling is still checked at every step."""


class Cancelled(Exception):
    """Raised inside the loading worker when the user cancels."""


class LoadingScreen(Screen):
    """Progress while traces load in a thread; Esc cancels. Keys keep answering meanwhile."""

    BINDINGS = [Binding("escape", "cancel", "Cancel loading"), Binding("q", "app.quit", "Quit")]

    def __init__(self, paths: list[Path], on_done, early=None, load_opts: dict | None = None):
        super().__init__()
        self.paths, self.on_done = paths, on_done
        self.early = early  # start_load()'s head start on the first path, if the CLI made one
        self.load_opts = load_opts or {}  # --steps, --torch-version

    def compose(self) -> ComposeResult:
        with Vertical(id="loading-box"):
            yield Label(Text(f"loading {', '.join(visible(p.name) for p in self.paths)}"), id="loading-title")
            yield ProgressBar(total=100, show_eta=False, id="progress")
            yield Label("", id="stage")
        yield StableFooter()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="load")
    def load(self) -> None:
        worker = get_current_worker()
        traces = []
        n = len(self.paths)

        shown = [-float("inf")]  # when the screen last took an update
        for i, p in enumerate(self.paths):
            def progress(stage: str, frac: float, i=i, p=p) -> None:
                if worker.is_cancelled:
                    raise Cancelled()
                now = time.monotonic()
                if now - shown[0] < PROGRESS_EVERY_S:
                    return
                shown[0] = now
                self.app.call_from_thread(self._progress, f"{p.name}: {stage}", 100 * (i + frac) / n)

            try:
                traces.append(load_trace(p, progress=progress, early=self.early if i == 0 else None,
                                         **self.load_opts))
            except Cancelled:
                return
            except TraceError as e:
                self.app.call_from_thread(self._failed, str(e))
                return
        if not worker.is_cancelled:
            keep_out_of_gc()
            self.app.call_from_thread(self.on_done, traces)

    def _progress(self, stage: str, pct: float) -> None:
        self.query_one("#progress", ProgressBar).update(progress=pct)
        self.query_one("#stage", Label).update(Text(visible(stage)))

    def _failed(self, msg: str) -> None:
        if not self.app.traces:  # the traces it was started on: quitting now exits 2, as the CLI does
            self.app.failure = msg
        self.query_one("#stage", Label).update(Text(visible(msg), style="bold red"))
        self.app.notify(visible(msg), severity="error", timeout=10, markup=False)

    def action_cancel(self) -> None:
        self.workers.cancel_group(self, "load")
        if self.early is not None:  # the worker may not have started: the head-start child goes too
            self.early.cancel()
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit(message="loading cancelled")
