"""The job view: every rank of a job as a rank × step heatmap, the straggler named (and why: start
skew or work imbalance), any rank opened in the explorer, every rank on one timeline (``t``). Ranks load in a worker (on a local process pool) with progress; every
number shown comes from the ``tracetui ranks --json`` document (``model.ranks.analyze``)."""
from __future__ import annotations

from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Label, ProgressBar, Static
from textual.worker import get_current_worker

from tracetui.model import TraceError
from tracetui.textsafe import visible

from tracetui.ui.exporting import EXPORT_BINDINGS, ExportsView
from tracetui.ui.footer import StableFooter
from tracetui.ui.navigate import OpenRank, OpenRanksTimeline

METRICS = (
    ("step_us", "step time µs", "the step's host interval on that rank"),
    ("comm_exposed_us", "exposed comm µs", "communication not overlapped by compute (GPU ranks)"),
    ("wait_us", "wait µs", "waiting for later ranks in the step's collectives"),
    ("comm_us", "comm µs", "communication time in the step (union of its collectives)"),
)
"""What the heatmap can be coloured by (``m`` cycles): the steps row key, its title, its meaning."""

CELL_W = 9
"""Heatmap column width: ``123,456`` µs and a space either side."""


def fmt(v) -> str:
    """A number as the job view shows it (µs to the unit): the same rounding the tests apply."""
    return "-" if v is None else f"{v:,.0f}"


def _blank(v):
    """None (no such step on that rank, or a metric it lacks) as an empty cell."""
    return "" if v is None else v


def heat(frac: float) -> Style:
    """Green (low) through yellow to red (high) for a value's place between the job's min and max."""
    f = min(max(frac, 0.0), 1.0)
    r, g = (int(510 * f), 200) if f < 0.5 else (255, int(200 * (2 - 2 * f)))
    return Style(bgcolor=f"rgb({min(r, 255)},{g},60)", color="black")


def _withheld(straggler: dict) -> bool:
    """Whether ``ranks`` withheld the straggler because the matching is not reliable
    (``jobs.metrics.straggler`` lists why under ``unreliable``)."""
    return straggler["rank"] is None and bool(straggler.get("unreliable"))


class JobDiagnosticsScreen(ModalScreen):
    """The job's diagnostics (``ranks`` text's last section): files left out, ranks missing,
    collectives the ranks disagree on. The header counts them; ``D`` shows them."""

    BINDINGS = [Binding("escape,q,D", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    JobDiagnosticsScreen { align: center middle; }
    #job-diag-box { width: 90%; height: 80%; border: round $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="job-diag-box"):
            t = Text(f"{len(self.lines)} diagnostics (Esc: back)\n", style="bold")
            for line in self.lines:
                t.append(f"• {visible(line)}\n")
            yield Static(t, id="job-diag-text")


COLLECTIVE_COLUMNS = (
    ("#", "index in start order"), ("group", "process group (default: the world)"), ("name", "collective"),
    ("dtype", "element type"), ("bytes", "message size"), ("ranks", "ranks that hold it"),
    ("latency µs", "shortest duration across ranks"), ("max wait µs", "longest wait for the last rank"),
    ("last", "the rank that arrived last"), ("busbw GB/s", "bus bandwidth (nccl-tests' rule)"),
)
"""The collectives table's columns (``c`` in the job view) and what each holds: one row per
collective matched across ranks, as ``ranks --json``'s ``collectives``."""


class JobCollectivesScreen(Screen):
    """Every collective of the job matched across ranks, in start order; the selected one's per-rank
    start and wait below the table. Read from the ``ranks`` document, nothing recomputed."""

    CSS_PATH = "job_view.tcss"
    help_section = "Job view"
    BINDINGS = [Binding("escape,q,c", "app.pop_screen", "Back to the heatmap")]

    def __init__(self, collectives: list[dict]):
        super().__init__()
        self.collectives = collectives

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{len(self.collectives)} collectives matched across ranks, in start order "
                          f"(Esc: back)", style="bold"), id="coll-head")
        yield DataTable(id="coll-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="coll-detail")
        yield StableFooter()

    def on_mount(self) -> None:
        table = self.query_one("#coll-table", DataTable)
        for title, _ in COLLECTIVE_COLUMNS:
            table.add_column(title, key=title)
        for j, c in enumerate(self.collectives):
            waits = [p["wait_us"] for p in c["per_rank"]]
            table.add_row(str(j), Text(visible(str(c["group"]))), Text(visible(str(c["name"]))),
                          Text(visible(str(c["dtype"] or "-"))),
                          "-" if c["msg_bytes"] is None else f"{c['msg_bytes']:,}", str(c["ranks"]),
                          fmt(c["latency_us"]), fmt(max(waits) if waits else None), str(c["last_rank"]),
                          "-" if c["busbw_gbps"] is None else f"{c['busbw_gbps']:.2f}", key=str(j))
        table.focus()
        self._detail(0)

    @on(DataTable.RowHighlighted)
    def _moved(self, event) -> None:
        self._detail(event.cursor_row)

    def _detail(self, j: int) -> None:
        if not 0 <= j < len(self.collectives):
            self.query_one("#coll-detail", Static).update("no collective in this job")
            return
        c = self.collectives[j]
        t = Text(f"{visible(str(c['name']))} ({visible(str(c['group']))} {c['match']} {c['index']}): ", style="bold")
        first = min((p["start_us"] for p in c["per_rank"]), default=0.0)  # epoch µs: 16 digits nobody reads
        t.append(" · ".join(f"rank {p['rank']} arrived +{fmt(p['start_us'] - first)} µs, waited {fmt(p['wait_us'])} µs"
                            for p in c["per_rank"]))
        self.query_one("#coll-detail", Static).update(t)


class JobScreen(ExportsView, Screen):
    """Rank × step heatmap over the job's ``ranks`` document; Enter opens the rank in the explorer."""

    CSS_PATH = "job_view.tcss"
    help_section = "Job view"
    """``?`` shows this screen's keys first (help.md's section of that name)."""
    BINDINGS = [
        Binding("m", "metric", "Metric"),
        Binding("enter", "open_rank", "Open rank"),
        Binding("D", "diagnostics", "Diagnostics"),
        Binding("c", "collectives", "Collectives"),
        Binding("t", "timeline", "Ranks timeline"),
        Binding("escape", "cancel", "Cancel loading / back", show=False),
        *EXPORT_BINDINGS,
    ]

    def __init__(self, paths: list[Path], load_opts: dict | None = None, workers: int | None = None,
                 back: bool = False):
        super().__init__()
        self.back = back  # opened over another screen (ctrl+o): Esc returns there, its failure is not the app's
        self.paths = [Path(p) for p in paths]
        self.load_opts = load_opts or {}
        self.n_workers = workers
        self.doc: dict | None = None
        self.lanes = None          # the ranks timeline's lanes (jobs.lanes), built with the doc
        self.files: dict = {}      # rank -> file
        self.metric = 0

    def compose(self) -> ComposeResult:
        yield Static(id="job-head")
        with Vertical(id="job-loading"):
            yield Label(Text(f"loading the ranks of {', '.join(visible(p.name) for p in self.paths[:3])}"
                             + (" …" if len(self.paths) > 3 else "")))
            yield ProgressBar(total=100, show_eta=False, id="job-progress")
            yield Label("", id="job-stage")
        yield DataTable(id="heatmap", cursor_type="cell", zebra_stripes=False)
        yield Static(id="job-detail")
        yield StableFooter()

    def on_mount(self) -> None:
        self.query_one("#heatmap").display = False
        self.query_one("#job-detail").display = False
        self.load()

    # ---- loading
    @work(thread=True, exclusive=True, group="job")
    def load(self) -> None:
        worker = get_current_worker()
        try:
            doc = self._analyze(worker)
        except TraceError as e:
            self.app.call_from_thread(self._failed, str(e))
            return
        except Exception as e:  # noqa: BLE001 - an index without the dist extra, a pool that died
            self.app.call_from_thread(self._failed, f"{type(e).__name__}: {e}")
            return
        if doc is not None and not worker.is_cancelled:
            self.app.call_from_thread(self._ready, doc)

    def _analyze(self, worker) -> dict | None:
        from tracetui.jobs.index import MANIFEST
        if len(self.paths) == 1 and (self.paths[0] / MANIFEST).exists():
            from tracetui.jobs.index import analyze_index, read_manifest
            self.files = {r["rank"]: Path(r["file"]) for r in read_manifest(self.paths[0])["ranks"]}
            doc = analyze_index(self.paths[0])
            from tracetui.jobs.lanes import from_index, offsets_of
            self.lanes = from_index(self.paths[0], offsets_of(doc))
            return doc
        from tracetui.jobs.pool import Stopped, run_map
        from tracetui.jobs.ranks import analyze_tables, discover, load_rank, require_ranks

        job = require_ranks(discover(self.paths), self.paths)
        self.files = {rf.rank: rf.path for rf in job.ranks}

        def progress(done: int, total: int) -> None:
            if not worker.is_cancelled:
                self.app.call_from_thread(self._progress, done, total)

        # fork, as the CLI does: spawn fails under Textual ("bad value(s) in fds_to_keep": the
        # app's replaced stdio), and the forked workers run only model code, never the UI's
        try:  # quitting or Esc ends the pool's processes at once, not after the rank they are on
            tables = run_map(load_rank, [(rf, job.world, self.load_opts) for rf in job.ranks], self.n_workers,
                             progress, should_stop=lambda: worker.is_cancelled)
        except Stopped:
            return None
        if worker.is_cancelled:
            return None
        doc = analyze_tables(job, tables)
        from tracetui.jobs.lanes import from_tables, offsets_of
        self.lanes = from_tables(tables, offsets_of(doc))
        return doc

    def _progress(self, done: int, total: int) -> None:
        self.query_one("#job-progress", ProgressBar).update(progress=100 * done / max(total, 1))
        self.query_one("#job-stage", Label).update(f"{done} of {total} ranks loaded")

    def _failed(self, msg: str) -> None:
        if not self.app.traces and not self.back:  # the job it was started on: quitting exits 2, as `tracetui ranks` does
            self.app.failure = msg
        self.query_one("#job-stage", Label).update(Text(visible(msg), style="bold red"))
        self.app.notify(visible(msg), severity="error", timeout=10, markup=False)

    def action_cancel(self) -> None:
        if self.doc is None:
            self.workers.cancel_group(self, "job")
        if self.back:
            self.app.pop_screen()
        elif self.doc is None:
            self.app.exit(message="loading cancelled")

    def _ready(self, doc: dict) -> None:
        self.doc = doc
        self.query_one("#job-loading").display = False
        self.query_one("#heatmap").display = True
        self.query_one("#job-detail").display = True
        self._head()
        self._fill()
        self.query_one("#heatmap").focus()

    # ---- drawing
    def _head(self) -> None:
        d = self.doc
        s = d["straggler"]
        t = Text()
        t.append(f"{d['ranks']} ranks", style="bold")
        t.append(f" of {d['world_size'] or '?'} · {len(d['collectives'])} collectives · ")
        if s["rank"] is not None:
            t.append(f"straggler: rank {s['rank']}", style="bold red")
        elif _withheld(s):  # the ranks were not matched reliably: not "no clear straggler", which reads as balanced
            t.append("straggler not named: matching unreliable (D)", style="bold yellow")
        else:
            t.append("no clear straggler", style="bold")
        if self._diag_lines():
            t.append(f" · {len(self._diag_lines())} diagnostics (D)", style="yellow")
        t.append("\n" + METRICS[self.metric][1] + " by rank × step (m: metric, Enter: open rank)", style="cyan")
        self.query_one("#job-head", Static).update(t)

    def _grid(self) -> tuple[list, list, dict]:
        """Ranks, step names (in step order), and (rank, step) -> the steps row."""
        rows = self.doc["steps"]
        ranks = [p["rank"] for p in self.doc["per_rank"]]
        names, seen = [], set()
        for r in sorted(rows, key=lambda r: (r["step"], r["rank"])):
            if r["name"] not in seen:
                seen.add(r["name"])
                names.append(r["name"])
        return ranks, names, {(r["rank"], r["name"]): r for r in rows}

    def _fill(self) -> None:
        table = self.query_one("#heatmap", DataTable)
        cur = table.cursor_coordinate
        table.clear(columns=True)
        key = METRICS[self.metric][0]
        ranks, names, cell = self._grid()
        vals = [c[key] for c in cell.values() if c.get(key) is not None]
        lo, hi = (min(vals), max(vals)) if vals else (0, 0)
        table.add_column("rank", key="rank", width=6)
        table.fixed_columns = 1  # scrolling right keeps the rank in view
        for n in names:
            table.add_column(Text(visible(n.replace("ProfilerStep", "step"))[:CELL_W], justify="right"), key=n,
                             width=CELL_W)
        strag = self.doc["straggler"]["rank"]
        for r in ranks:
            row = [Text(f"{r}{'!' if r == strag else ''}", style="bold red" if r == strag else "")]
            for n in names:
                c = cell.get((r, n))
                v = None if c is None else c.get(key)
                style = heat((v - lo) / (hi - lo) if hi > lo else 0.0) if v is not None else Style()
                row.append(Text(fmt(v).rjust(CELL_W - 1), style=style))
            table.add_row(*row, key=str(r))
        if cur.row < len(ranks) and cur.column <= len(names):  # m keeps the cursor on its cell
            table.cursor_coordinate = cur
        self._detail()

    def _selected(self) -> tuple[int | None, str | None]:
        table = self.query_one("#heatmap", DataTable)
        ranks, names, _ = self._grid()
        if not ranks:
            return None, None
        r = ranks[min(table.cursor_row, len(ranks) - 1)]
        col = table.cursor_column - 1
        return r, (names[col] if 0 <= col < len(names) else None)

    def _detail(self) -> None:
        r, n = self._selected()
        if r is None:
            self.query_one("#job-detail", Static).update("no ranks")
            return
        p = next(x for x in self.doc["per_rank"] if x["rank"] == r)
        t = Text()
        t.append(f"rank {r}", style="bold")
        t.append(f"  clock {visible(p['clock'])} offset {fmt(p['offset_us'])} µs · waited {fmt(p['wait_total_us'])} µs "
                 f"(mean {fmt(p['wait_mean_us'])}) · last at {p['last_count']}/{p['collectives']} · "
                 f"caused {fmt(p['caused_wait_us'])} µs · HTA {p['hta_straggler_count']} · start skew "
                 f"{fmt(p.get('start_skew_us'))} µs · work imbalance {fmt(p.get('work_imbalance_us'))} µs a step")
        _, names, cell = self._grid()
        if not names:  # a heatmap with no columns, and no word why
            t.append("\nno steps in these ranks (ProfilerStep#N, or a numbered step annotation): the map has no "
                     "columns; pass --steps REGEX to name the annotations that are the steps", style="yellow")
        c = cell.get((r, n)) if n else None
        if c is not None:
            ov = "-" if c["overlap_ratio"] is None else f"{100 * c['overlap_ratio']:.0f}%"
            t.append(f"\n{visible(c['name'])}: step {fmt(c['step_us'])} µs · comm {fmt(c['comm_us'])} · exposed "
                     f"{fmt(c['comm_exposed_us'])} · overlap {ov} · wait {fmt(c['wait_us'])} µs in "
                     f"{c['collectives']} collective{'' if c['collectives'] == 1 else 's'} · compute {fmt(c['compute_us'])} · idle {fmt(c['idle_us'])} "
                     f"· {c['verdict']}")
        s = self.doc["straggler"]
        if s["rank"] is not None:
            if s.get("cause"):
                t.append(f"\nrank {s['rank']} is late by {s['cause']}: start skew {fmt(s['start_skew_us'])} µs, "
                         f"work imbalance {fmt(s['work_imbalance_us'])} µs a step", style="bold")
            t.append("\n" + visible(s["evidence"]), style="dim")
        self.query_one("#job-detail", Static).update(t)

    @on(DataTable.CellHighlighted)
    def _moved(self, _event) -> None:
        if self.doc is not None:
            self._detail()

    @on(DataTable.CellSelected)
    def _chosen(self, _event) -> None:
        self.action_open_rank()

    # ---- actions
    def action_metric(self) -> None:
        if self.doc is None:
            return
        for step in range(1, len(METRICS) + 1):  # skip a metric no cell has (exposed comm on CPU ranks)
            m = (self.metric + step) % len(METRICS)
            if any(r.get(METRICS[m][0]) is not None for r in self.doc["steps"]):
                break
        self.metric = m
        self._head()
        self._fill()

    def action_collectives(self) -> None:
        """The job's collectives as a table (``JobCollectivesScreen``)."""
        if self.doc is not None:
            self.app.push_screen(JobCollectivesScreen(list(self.doc["collectives"])))

    def action_timeline(self) -> None:
        """Every rank as a lane of one timeline, collectives drawn across them (``ranks_timeline``)."""
        if self.doc is not None and self.lanes is not None:
            self.post_message(OpenRanksTimeline(self.doc, self.lanes))

    def action_diagnostics(self) -> None:
        if self.doc is not None:
            self.app.push_screen(JobDiagnosticsScreen(self._diag_lines()))

    def _diag_lines(self) -> list[str]:
        """The job's diagnostics, after why the straggler was withheld where it was."""
        s = self.doc["straggler"]
        return ([s["evidence"]] if _withheld(s) else []) + list(self.doc["diagnostics"])

    def action_open_rank(self) -> None:
        """The selected rank in the explorer, at the selected step; Esc there comes back here."""
        if self.doc is None:
            return
        r, n = self._selected()
        path = self.files.get(r)
        if path is None or not Path(path).exists():
            self.app.notify(f"rank {r}: its trace file is not here", severity="error")
            return
        self.post_message(OpenRank(Path(path), n or None, self.load_opts))

    def export_table(self):
        """The heatmap as shown: one row per rank, one column per step, the metric in µs."""
        if self.doc is None:
            return "the ranks are still loading: nothing to export yet"
        key, title, _ = METRICS[self.metric]
        ranks, names, cell = self._grid()
        rows = [[r] + [_blank((cell.get((r, n)) or {}).get(key)) for n in names] for r in ranks]
        return f"job-{key.removesuffix('_us')}", ["rank"] + [f"{n} {title}" for n in names], rows

    def system_commands(self):
        """For the command palette: (title, help, callback)."""
        return [("Cycle heatmap metric", "step time / exposed comm / wait / comm (m)", self.action_metric),
                ("Open rank in the explorer", "the selected rank at the selected step (Enter)", self.action_open_rank),
                ("Job diagnostics", "files left out, ranks missing, collectives that disagree (D)", self.action_diagnostics),
                ("Job collectives", "every collective matched across ranks: size, latency, waits (c)",
                 self.action_collectives),
                ("Ranks timeline", "every rank as a lane of one timeline, collectives drawn across them (t)",
                 self.action_timeline)]
