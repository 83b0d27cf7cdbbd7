"""The job view: a rank × step heatmap of a generated job (made from a bundled gloo rank), at
80x24 and 160x48; every number it shows is in `tracetui ranks --json`; Enter opens the rank."""
from __future__ import annotations

import asyncio
import json
import os
import re

import pytest

from tracetui.cli.main import main
from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.job_view import METRICS, JobScreen, fmt

from tests.conftest import DATA

SIZES = [(80, 24), (160, 48)]
NUM = re.compile(r"(?<![\w#.])-?\d[\d,]*(?:\.\d+)?")
"""A number as text (not the digits of a name such as ProfilerStep#2 or node1)."""


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    from tracetui.workloads.replicate import replicate
    out = tmp_path_factory.mktemp("ui_job")
    replicate(DATA / "gloo_rank0.pt.trace.json.gz", out, 4, per_host=2, straggler=2, delay_ns=250_000, seed=3)
    return out


@pytest.fixture(scope="module")
def job_json(job_dir):
    import contextlib
    import io
    buf = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(buf):
        assert main(["ranks", str(job_dir), "--json", "--workers", "1"]) == 0
    buf.flush()
    return json.loads(buf.buffer.getvalue())


def rounded(doc: dict) -> dict:
    """The view's document as ``ranks --json`` writes it: µs rounded to the ns (issue 43)."""
    import copy
    from tracetui.report.output import round_us
    return round_us(copy.deepcopy(doc))


async def _ready(pilot):
    for _ in range(1500):
        s = pilot.app.screen
        if isinstance(s, JobScreen) and s.doc is not None:
            break
        await pilot.pause(0.02)
    for _ in range(20):
        await pilot.pause()


def _numbers(doc) -> set:
    """Every number in the document as the job view formats it."""
    out = set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):  # the straggler's evidence is a sentence in the JSON
            out.update(NUM.findall(v))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(fmt(v))
            out.add(str(v))
            if isinstance(v, float):
                out.add(f"{100 * v:.0f}")  # ratios shown as percentages
    walk(doc)
    return out


def test_every_number_shown_is_in_ranks_json(job_dir, job_json):
    asyncio.run(_every_number(job_dir, job_json))


async def _every_number(job_dir, job_json):
    app = TraceApp([job_dir], job=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot)
        screen = app.screen
        assert isinstance(screen, JobScreen)
        table = screen.query_one("#heatmap")
        ranks = [p["rank"] for p in job_json["per_rank"]]
        steps = sorted({(r["step"], r["name"]) for r in job_json["steps"]})
        assert table.row_count == len(ranks) == 4
        assert len(table.columns) == len(steps) + 1
        known = _numbers(job_json)
        by = {(r["rank"], r["name"]): r for r in job_json["steps"]}
        # m cycles the metrics some cell has (a CPU-only job has no exposed communication: QA saw a
        # map of "-"), back to the first
        shown = [m for m, (key, _, _) in enumerate(METRICS) if any(r[key] is not None for r in job_json["steps"])]
        assert shown and len(shown) < len(METRICS)  # the gloo job runs on CPU only
        for m in shown:
            key = METRICS[m][0]
            assert screen.metric == m
            for i, r in enumerate(ranks):
                for j, (_, name) in enumerate(steps):
                    assert table.get_cell_at((i, j + 1)).plain.strip() == fmt(by[(r, name)][key])
            await pilot.press("m")
        assert screen.metric == shown[0]
        head = str(screen.query_one("#job-head").render())
        assert f"straggler: rank {job_json['straggler']['rank']}" in head
        for _ in range(3):  # every detail line, on several cells
            detail = str(screen.query_one("#job-detail").render())
            nums = re.findall(r"(?<![\w#.])-?\d[\d,]*(?:\.\d+)?", detail)
            assert nums
            assert all(n in known for n in nums), [n for n in nums if n not in known]
            await pilot.press("down", "right")


def test_enter_opens_the_rank_and_esc_comes_back(job_dir, job_json):
    asyncio.run(_enter_and_back(job_dir, job_json))


async def _enter_and_back(job_dir, job_json):
    app = TraceApp([job_dir], job=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot)
        await pilot.press("down", "down", "right")   # rank 2, first step
        await pilot.press("enter")
        for _ in range(500):
            if isinstance(app.screen, ExplorerScreen):
                break
            await pilot.pause(0.02)
        assert isinstance(app.screen, ExplorerScreen)
        assert app.screen.trace.path.name == "gen_rank-2.pt.trace.json"
        for _ in range(10):
            await pilot.pause()
        node = app.screen.current
        assert app.screen.trace.name(node) == sorted({r["name"] for r in job_json["steps"]},
                                                     key=lambda n: int(n.split("#")[1]))[0]
        await pilot.press("escape")
        assert isinstance(app.screen, JobScreen)


def test_folder_of_ranks_opens_the_job_view(job_dir):
    from tracetui.jobs.route import opens_job
    files = sorted(job_dir.iterdir())
    assert opens_job([job_dir]) and opens_job(files[:2]) and opens_job([job_dir / "gen_rank-*.json"])
    assert not opens_job(files[:1])
    assert not opens_job([DATA / "h200_mlp_eager.json.gz", DATA / "h200_mlp_compile.json.gz"])  # a diff


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_job_view_snapshot(snap_compare, job_dir, size):
    app = TraceApp([job_dir], job=True)
    assert snap_compare(app, terminal_size=size, run_before=_ready, press=["down", "down", "right"])


def test_an_index_opens_the_job_view_with_the_same_numbers(job_dir, job_json, tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    idx = tmp_path / "job.idx"
    assert main(["index", str(job_dir), "-o", str(idx), "--workers", "1"]) == 0
    from tracetui.jobs.route import opens_job
    assert opens_job([idx])

    async def run():
        app = TraceApp([idx], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            assert rounded(app.screen.doc) == job_json
    asyncio.run(run())


def _children() -> set[int]:
    """This process's live children, zombies included (/proc: the pool forks with os.fork,
    which multiprocessing.active_children() never lists)."""
    import glob
    out: set[int] = set()
    for f in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            out |= {int(x) for x in open(f).read().split()}
        except OSError:
            pass
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads children from /proc")
def test_quitting_mid_load_ends_the_pool(tmp_path, monkeypatch):
    """q while 24 ranks load: the app ends at once and no pool process outlives it."""
    import time
    from tracetui.jobs import pool
    from tracetui.workloads.replicate import replicate
    replicate(DATA / "cpu_transformer_eager.json.gz", tmp_path, 24, seed=5)
    forked, real = [], os.fork

    def fork():  # the pool's children, to look for them afterwards
        pid = real()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(pool.os, "fork", fork)

    async def run():
        app = TraceApp([tmp_path], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(200):  # until the first rank is in, so the pool is running
                if "of 24 ranks loaded" in str(app.screen.query_one("#job-stage").render()):
                    break
                await pilot.pause(0.05)
            assert app.screen.doc is None  # still loading
            assert set(forked) & _children()  # its workers are running
            t = time.perf_counter()
            await pilot.press("q")
        return time.perf_counter() - t
    took = asyncio.run(run())
    assert took < 3
    assert forked
    for _ in range(50):
        if not set(forked) & _children():
            break
        time.sleep(0.05)
    assert not set(forked) & _children()


async def _until(pilot, cond, tries=1500):
    for _ in range(tries):
        if cond():
            return
        await pilot.pause(0.02)
    raise AssertionError("timed out waiting")


def test_ctrl_o_on_a_folder_of_ranks_opens_the_job_view(job_dir, job_json):
    """ctrl+o routes a folder as `tracetui DIR` does: ranks of one job open the job view (not the
    folder's newest file), Esc comes back to the trace it was opened over; a file opens the explorer."""
    want = sorted(json.loads(p.read_text())["distributedInfo"]["rank"] for p in job_dir.iterdir())

    async def run():
        app = TraceApp([DATA / "gloo_rank0.pt.trace.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, ExplorerScreen))
            first = app.screen
            await pilot.press("ctrl+o")
            app.screen.query_one("#open-path").value = str(job_dir)
            await pilot.press("enter")
            await _ready(pilot)
            assert isinstance(app.screen, JobScreen)
            assert [p["rank"] for p in app.screen.doc["per_rank"]] == want
            assert rounded(app.screen.doc) == job_json
            await pilot.press("escape")
            assert app.screen is first
            await pilot.press("ctrl+o")
            app.screen.query_one("#open-path").value = str(job_dir / "gen_rank-1.pt.trace.json")
            await pilot.press("enter")
            await _until(pilot, lambda: isinstance(app.screen, ExplorerScreen) and app.screen is not first)
            assert app.screen.trace.path.name == "gen_rank-1.pt.trace.json"
        assert app.return_code in (0, None)
    asyncio.run(run())


def test_skipped_ranks_are_listed_under_d(job_dir, tmp_path, capsys):
    """A folder whose ranks include unreadable files still opens the job view (as `tracetui DIR`
    routes it); the header counts the diagnostics of `ranks --json` and D lists each skipped rank."""
    import shutil
    from tracetui.jobs.route import opens_job
    d = tmp_path / "job"
    shutil.copytree(job_dir, d)
    (d / "gen_rank-1.pt.trace.json").write_text("not a trace")
    (d / "gen_rank-3.pt.trace.json").write_bytes(b"")
    assert opens_job([d])
    capsys.readouterr()
    assert main(["ranks", str(d), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    skipped = [x for x in doc["diagnostics"] if ": skipped: " in x]
    assert sorted(x.split(" (")[0] for x in skipped) == ["rank 1", "rank 3"]

    async def run():
        app = TraceApp([d], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            assert [p["rank"] for p in app.screen.doc["per_rank"]] == [0, 2]
            assert rounded(app.screen.doc) == doc
            head = str(app.screen.query_one("#job-head").render())
            assert f"{len(doc['diagnostics'])} diagnostics (D)" in head
            await pilot.press("D")
            text = str(app.screen.query_one("#job-diag-text").render())
            for line in skipped:
                assert f"• {line}" in text
    asyncio.run(run())


def test_help_scroll_and_no_steps(job_dir, job_json, tmp_path, monkeypatch):
    """From the QA run: `?` on the job view opens on the job view's keys (they were last, after the
    explorer's and the timeline's); scrolling right at 80 columns keeps the rank column in view;
    a job whose ranks have no steps says how to name them instead of an empty map."""
    from textual.widgets import DataTable, Markdown, Static
    from tracetui.ui import job_view
    from tracetui.ui.modals import HelpScreen
    monkeypatch.setattr(job_view, "CELL_W", 40)  # 3 steps wider than 80 columns: the map scrolls

    async def run():
        app = TraceApp([job_dir], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            table = app.screen.query_one("#heatmap", DataTable)
            for _ in range(30):
                await pilot.press("right")
            await pilot.pause()
            assert table.virtual_size.width > table.size.width and table.scroll_x > 0
            ranks_shown = [str(p["rank"]) for p in job_json["per_rank"]]
            assert all(any(line.lstrip().startswith(r) for line in _rows(table)) for r in ranks_shown)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            md = app.screen.query_one(Markdown)
            lines = md.source.splitlines()
            assert next(ln for ln in lines if ln.startswith("## ")).startswith("## Job view")
            first_table = next(i for i, ln in enumerate(lines) if ln.startswith("| key"))
            assert any(ln.startswith("## Job view") for ln in lines[:first_table])  # no other keys before its own
        # the same ranks with their step annotations renamed: no step in them
        for f in job_dir.iterdir():
            doc = json.loads(f.read_text())
            for e in doc["traceEvents"]:
                if str(e.get("name", "")).startswith("ProfilerStep#"):
                    e["name"] = "warmup phase"
            (tmp_path / f.name).write_text(json.dumps(doc))
        app = TraceApp([tmp_path], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            text = str(app.screen.query_one("#job-detail", Static).render())
            assert "no steps in these ranks" in text and "--steps REGEX" in text

    asyncio.run(run())


def _rows(table) -> list[str]:
    """The heatmap's rows as drawn on screen (after any horizontal scroll)."""
    return [table.render_line(y).text for y in range(1, table.size.height)]


def test_a_job_with_no_readable_rank_exits_2_with_its_line(tmp_path, capsys, monkeypatch):
    """QA: `tracetui DIR` on ranks none of which could be read showed the error, but quitting
    exited 0 with nothing on stderr (`tracetui ranks DIR` exits 2 with the line)."""
    (tmp_path / "rank-0.json").write_bytes(b"\x9b\x01 not json")
    (tmp_path / "rank-1.json").write_text("{not json either")
    real_run = TraceApp.run

    async def quit_after_load(pilot):
        for _ in range(300):
            await pilot.pause(0.05)
            if pilot.app.failure:
                break
        await pilot.press("q")

    monkeypatch.setattr(TraceApp, "run", lambda self, **k: real_run(self, headless=True, size=(80, 24),
                                                                   auto_pilot=quit_after_load))
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank-0.json: not JSON" in err and "no rank of the job could be read" in err


def test_e_exports_the_heatmap_as_ranks_json_has_it(job_dir, job_json, tmp_path, monkeypatch):
    """`e` did nothing on the job view (issue 36): it writes the heatmap, one row per rank and one
    column per step, the metric shown (`m` moves to the next), numbers as `ranks --json` has them."""
    import csv
    monkeypatch.chdir(tmp_path)

    async def run():
        app = TraceApp([job_dir], job=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await _ready(pilot)
            s = app.screen
            for key in ("step_us", "wait_us"):
                while METRICS[s.metric][0] != key:
                    await pilot.press("m")
                s.last_export = None
                await pilot.press("e")
                for _ in range(200):
                    if s.last_export is not None:
                        break
                    await pilot.pause(0.02)
                rows = list(csv.reader(s.last_export.open(encoding="utf-8", newline="")))
                steps = sorted({(r["step"], r["name"]) for r in job_json["steps"]})
                assert rows[0] == ["rank"] + [f"{n} {METRICS[s.metric][1]}" for _, n in steps]
                want = {(r["rank"], r["name"]): r.get(key) for r in job_json["steps"]}
                assert [int(r[0]) for r in rows[1:]] == [p["rank"] for p in job_json["per_rank"]]
                for r in rows[1:]:
                    for (_, n), cell in zip(steps, r[1:]):
                        v = want.get((int(r[0]), n))
                        assert (cell == "") if v is None else float(cell) == pytest.approx(v)
def test_c_lists_the_collectives(job_dir, job_json):
    """``c``: a table of every collective matched across ranks (issue 36: the job view had no list
    of them). Its rows are the recorded gloo annotations of a rank, in start order (raw JSON); every
    cell is the ``ranks --json`` figure; the detail line gives each rank's start and wait."""
    import gzip
    from tracetui.ui.job_view import JobCollectivesScreen
    rank0 = json.loads(gzip.decompress((DATA / "gloo_rank0.pt.trace.json.gz").read_bytes()))["traceEvents"]
    anns = sorted((e for e in rank0 if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and e["name"].startswith("gloo:")), key=lambda e: e["ts"])

    async def run():
        app = TraceApp([job_dir], job=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await _ready(pilot)
            await pilot.press("c")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, JobCollectivesScreen)
            table = screen.query_one("#coll-table")
            assert table.row_count == len(anns) == len(job_json["collectives"])
            assert sorted(table.get_cell_at((j, 2)).plain for j in range(table.row_count)) == \
                sorted(a["name"] for a in anns)
            for j, c in enumerate(job_json["collectives"]):
                assert table.get_cell_at((j, 6)) == fmt(c["latency_us"])
                assert table.get_cell_at((j, 7)) == fmt(max(p["wait_us"] for p in c["per_rank"]))
                assert table.get_cell_at((j, 8)) == str(c["last_rank"])
            await pilot.press("down", "down")
            detail = str(screen.query_one("#coll-detail").render())
            c = job_json["collectives"][2]
            first = min(p["start_us"] for p in c["per_rank"])  # arrivals after the first rank's, not epoch µs
            for p in c["per_rank"]:
                assert f"rank {p['rank']} arrived +{fmt(p['start_us'] - first)} µs, waited {fmt(p['wait_us'])} µs" in detail
            assert "+0 µs" in detail or "+0.0 µs" in detail
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, JobScreen)

    asyncio.run(run())
