"""The App: navigation only. It starts on the loading screen (or the job view), then pushes the
screen each request names: the explorer, the diff, the ladder, a rank's trace. Screens never import
each other; they post a message from ui/navigate.py and the App answers it here."""
from __future__ import annotations

import asyncio
from pathlib import Path

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from tracetui.model import Trace, TraceError
from tracetui.shorten import file_labels
from tracetui.textsafe import visible
from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.idle_gc import IdleCollector
from tracetui.ui.loading import LoadingScreen
from tracetui.ui.modals import HelpScreen, OpenScreen
from tracetui.ui.navigate import OpenDiff, OpenOpportunities, OpenRank, OpenRanksTimeline, OpenTrace
from tracetui.ui.threads import DaemonExecutor


class TraceApp(App):
    """tracetui: PyTorch profiler traces in the terminal."""

    CSS_PATH = "app.tcss"
    TITLE = "tracetui"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark,f1", "help", "Help"),
        Binding("ctrl+o", "open", "Open file"),
    ]

    def __init__(self, paths: list[Path], diff: bool = False, early=None, load_opts: dict | None = None,
                 job: bool = False):
        super().__init__()
        self.paths = [Path(p) for p in paths]
        self.job = job  # the ranks of one job (or an index): the job view comes first
        self.diff = diff and len(self.paths) >= 2  # two: a diff; more: a ladder
        self.traces: list[Trace] = []
        self.early = early
        self.load_opts = load_opts or {}
        self.failure: str | None = None  # why the traces it was started on did not load
        self.idle_gc = IdleCollector(self)  # full GC collections while the user pauses (idle_gc.py)

    def exit(self, result=None, return_code: int = 0, message=None) -> None:
        """Quit; once the traces it was started on failed to load, with the CLI's code for bad input."""
        if return_code == 0 and self.failure is not None:
            return_code = 2
        super().exit(result, return_code, message)

    def on_mount(self) -> None:
        # before any worker starts: quitting must not wait for a load that is still decoding
        asyncio.get_running_loop().set_default_executor(DaemonExecutor())
        self.idle_gc.install()
        early, self.early = self.early, None
        if self.job:
            from tracetui.ui.job_view import JobScreen
            self.push_screen(JobScreen(self.paths, self.load_opts))
            return
        self.push_screen(LoadingScreen(self.paths if self.diff else self.paths[:1], self._loaded, early,
                                       self.load_opts))

    def on_unmount(self) -> None:
        self.idle_gc.remove()

    async def on_event(self, event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)) and not event.is_forwarded:
            self.idle_gc.input()
        await super().on_event(event)

    def _loaded(self, traces: list[Trace]) -> None:
        self.traces = traces
        # the trace replaces its loading screen, not a help screen opened over it while it loaded
        # (that left the finished loading screen under the explorer, where Esc went back to it)
        while len(self.screen_stack) > 1 and not isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        if self.diff and len(traces) == 2:
            from tracetui.ui.diff_view import DiffScreen
            self.switch_screen(DiffScreen(traces[0], traces[1]))
        elif self.diff and len(traces) > 2:
            from tracetui.ui.diff_view import LadderScreen
            self.switch_screen(LadderScreen(traces))
        else:
            self.switch_screen(ExplorerScreen(traces[0]))
        self.sub_title = " vs ".join(visible(label) for label in file_labels([t.path for t in traces]))

    # ---- navigation requests from the screens (ui/navigate.py)
    @on(OpenTrace)
    def open_trace(self, message: OpenTrace) -> None:
        screen = ExplorerScreen(message.trace)
        self.push_screen(screen)
        if message.node is not None:
            screen.call_after_refresh(screen.jump, message.node)

    @on(OpenDiff)
    def open_diff(self, message: OpenDiff) -> None:
        from tracetui.ui.diff_view import DiffScreen
        self.push_screen(DiffScreen(message.a, message.b))

    @on(OpenOpportunities)
    def open_opportunities(self, message: OpenOpportunities) -> None:
        """Chains of kernels a fusion could merge, ranked by projected saving."""
        from tracetui.ui.opportunities_view import OpportunitiesScreen
        self.push_screen(OpportunitiesScreen(message.trace, on_jump=message.on_jump))

    @on(OpenRanksTimeline)
    def open_ranks_timeline(self, message: OpenRanksTimeline) -> None:
        """The job's ranks as lanes of one timeline, over the job view."""
        from tracetui.ui.ranks_timeline import RanksTimelineScreen
        self.push_screen(RanksTimelineScreen(message.doc, message.lanes))

    @on(OpenRank)
    def open_rank(self, message: OpenRank) -> None:
        """A rank's trace over the job view, at the step the job view had selected."""
        def done(traces: list[Trace]) -> None:
            self._loaded(traces)
            screen = self.screen
            tr = traces[0]
            step = next((s for s in tr.steps if tr.name(s) == message.step), None) if message.step else None
            if step is not None:
                self.call_after_refresh(screen.jump, step)

        self.push_screen(LoadingScreen([message.path], done, load_opts=message.load_opts))

    def action_help(self) -> None:
        """The help, built once per section order and kept installed: laying out help.md's Markdown
        took ~300 ms CPU on every `?`; shown again, it takes ~50 ms (docs/perf.md)."""
        if not isinstance(self.screen, HelpScreen):
            first = getattr(self.screen, "help_section", None)
            name = f"help:{first or ''}"
            if not self.is_screen_installed(name):
                self.install_screen(HelpScreen(first), name)
            self.push_screen(name)

    def action_open(self) -> None:
        def opened(path: str | None) -> None:
            if path:
                self._route_open(Path(path).expanduser())

        self.push_screen(OpenScreen(), opened)

    @work(thread=True, group="open")
    def _route_open(self, path: Path) -> None:
        """What ctrl+o opens, decided as the command line decides (``jobs.route.opens_job``): a
        folder of ranks of one job or an index opens the job view, anything else one trace. In a
        worker: deciding reads the head of every file in the folder."""
        from tracetui.jobs.route import opens_job
        try:
            job = opens_job([path])
        except OSError:  # a folder it may not list: opening it as a trace says why
            job = False
        self.call_from_thread(self._open_routed, path, job)

    def _open_routed(self, path: Path, job: bool) -> None:
        if job:
            from tracetui.ui.job_view import JobScreen
            self.push_screen(JobScreen([path], self.load_opts, back=True))
            return
        from tracetui.read.load import resolve_input
        try:
            p = resolve_input(path)
        except TraceError as e:
            self.notify(visible(str(e)), severity="error", markup=False)
            return
        self.diff = False
        self.push_screen(LoadingScreen([p], self._loaded, load_opts=self.load_opts))

    def get_system_commands(self, screen: Screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help: key map", "Every key tracetui answers", self.action_help)
        yield SystemCommand("Open trace file", "Load another trace (ctrl+o)", self.action_open)
        for title, help_, action in getattr(screen, "system_commands", lambda: [])():  # the screen's own
            yield SystemCommand(title, help_, action)
