"""What a new user hit on traces the authors did not write (the QA pass), each with its test.

Pilot's ``run_test`` hides notifications unless asked (``notifications=True``), so a toast that
cannot render never failed a test while it crashed the real app: these tests turn them on.
"""
from __future__ import annotations

import asyncio
import csv
import shutil

from textual.widgets._toast import Toast

from tracetui.ui.app import TraceApp

from tests.conftest import TRACES
from tests.ui.test_app import explorer, search, wait_for


def _toasts(app) -> list[str]:
    return [t.render().plain for t in app.screen.query(Toast)]


def test_y_e_and_E_show_their_toasts_without_crashing_and_as_plain_text(tmp_path, monkeypatch):
    """`e` in the real app died with AttributeError ('Text' has no 'translate'): the toast got a
    rich Text, which Textual 8 parses as markup. The path and the name are shown verbatim, `[b]`
    included (a folder and a kernel name may hold brackets)."""
    cwd = tmp_path / "[b]exports"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    trace = tmp_path / "mlp_eager.json.gz"
    shutil.copyfile(TRACES / "mlp_eager.json.gz", trace)

    async def run():
        app = TraceApp([trace])
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            s = await explorer(pilot)
            await search(pilot, "Linear_0")
            await pilot.press("y")
            await wait_for(pilot, lambda: any(m.startswith("copied: ") for m in _toasts(app)))
            assert any(m == "copied: nn.Module: Linear_0" for m in _toasts(app))
            await pilot.press("e")
            await wait_for(pilot, lambda: s.last_export is not None and any(str(s.last_export) in m for m in _toasts(app)))
            assert "[b]exports" in str(s.last_export)
            rows = list(csv.reader(s.last_export.open(encoding="utf-8", newline="")))
            assert rows[1][2] == "nn.Module: Linear_0"
            first = s.last_export
            await pilot.press("2", "E")
            await wait_for(pilot, lambda: s.last_export != first and any(str(s.last_export) in m for m in _toasts(app)))
            await pilot.pause()
        assert app._exception is None
    asyncio.run(run())


def test_job_view_D_lists_the_diagnostics_its_header_counts(peer_dir, tmp_path):
    """A folder of 2 ranks of a 128-rank job: the header said "7 diagnostics" and no key showed
    them, so the 126 missing ranks and the collectives the ranks disagree on stayed hidden.
    The missing ranks are computed here from each file's own distributedInfo."""
    import gzip
    import json

    from tracetui.ui.job_view import JobDiagnosticsScreen, JobScreen
    from tests.ui.test_job_view import _ready

    ranks, world = set(), set()
    for r in (0, 1):
        src = peer_dir / f"trace_filter_sampled_rank-{r}.json.gz"
        shutil.copyfile(src, tmp_path / src.name)
        info = json.loads(gzip.decompress(src.read_bytes()))["distributedInfo"]
        ranks.add(info["rank"])
        world.add(info["world_size"])
    (w,) = world
    missing = sorted(set(range(w)) - ranks)
    want = f"{len(missing)} of {w} ranks missing: {missing[0]}-{missing[-1]}"

    async def run():
        app = TraceApp([tmp_path], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            job = app.screen
            assert isinstance(job, JobScreen)
            head = str(job.query_one("#job-head").render())
            # D lists the job's diagnostics, after why the straggler was withheld where it was
            # (these two sampled ranks pair unlike collectives when matched by order)
            s = job.doc["straggler"]
            withheld = [s["evidence"]] if s["rank"] is None and s.get("unreliable") else []
            n = len(withheld) + len(job.doc["diagnostics"])
            assert f"{n} diagnostics (D)" in head and n >= 1
            await pilot.press("D")
            await wait_for(pilot, lambda: isinstance(app.screen, JobDiagnosticsScreen))
            text = str(app.screen.query_one("#job-diag-text").render())
            assert want in text
            assert all(line in text for line in withheld + job.doc["diagnostics"])
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is job)
    asyncio.run(run())


def test_stacked_aligned_list_at_80x24_shows_both_panes(peer_dir):
    """Under 120 columns the aligned list stacks A over B; A's pane took the whole height and
    B's (the side with the names of added kernels) was below the screen: on HTA's pair a page of
    '+' rows with nothing in them. Each pane now gets half."""
    from tracetui.ui.diff_view import DiffPane
    from tests.ui.test_app import diff_screen

    async def run():
        pair = [peer_dir / "trace_diff_control_control.json.gz", peer_dir / "trace_diff_test_test.json.gz"]
        app = TraceApp(pair, diff=True)
        async with app.run_test(size=(80, 24)) as pilot:
            s = await diff_screen(pilot)
            await pilot.press("l")
            await pilot.pause()
            panes = list(s.query(DiffPane))
            assert len(panes) == 2 and s.query_one("#diffmain").has_class("stacked")
            for p in panes:
                r = p.region
                assert r.height >= 5 and r.y + r.height <= 24, (p.side, r)
            assert panes[0].region.y + panes[0].region.height <= panes[1].region.y
    asyncio.run(run())


def test_keys_typed_right_after_slash_never_reach_the_tree_bindings(tmp_path, monkeypatch):
    """`/` then `E` in one burst (a paste, tmux send-keys, a fast typist) exported the subtree
    to a Markdown file: the search box took focus at the next idle, so `E` was still the tree's.
    The box now takes focus at once."""
    from textual import events
    from textual.widgets import Input

    monkeypatch.chdir(tmp_path)

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            for key, ch in (("slash", "/"), ("E", "E"), ("e", "e"), ("x", "x")):
                app.post_message(events.Key(key, ch))
            await pilot.pause(0.3)
            assert app.focused is s.query_one("#search", Input)
            assert getattr(s, "last_export", None) is None and not list(tmp_path.iterdir())
    asyncio.run(run())


def test_table_export_writes_plain_numbers_and_says_per_step(tmp_path, monkeypatch):
    """The op table's CSV held display text ("18,374.0", quoted) and, after `t`, per-step
    figures under the totals' headers ("count" = 5,154.60). Checked against the raw JSON:
    cudaLaunchKernel's calls divided by the ProfilerSteps."""
    import gzip
    import json

    monkeypatch.chdir(tmp_path)
    raw = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))["traceEvents"]
    xs = [e for e in raw if e.get("ph") == "X"]
    steps = sum(1 for e in xs if str(e.get("name", "")).startswith("ProfilerStep#"))
    launches = sum(1 for e in xs if e.get("name") == "cudaLaunchKernel")
    assert steps > 1 and launches

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            await pilot.press("3", "e")
            await wait_for(pilot, lambda: getattr(s, "last_export", None) is not None)
            rows = list(csv.DictReader(s.last_export.open(encoding="utf-8", newline="")))
            row = next(r for r in rows if r["name"] == "cudaLaunchKernel")
            assert int(row["count"]) == launches
            assert all("," not in r["CPU total µs"] for r in rows)
            first = s.last_export
            await pilot.press("t", "e")
            await wait_for(pilot, lambda: s.last_export != first)
            rows = list(csv.DictReader(s.last_export.open(encoding="utf-8", newline="")))
            row = next(r for r in rows if r["name"] == "cudaLaunchKernel")
            assert abs(float(row["count/step"]) - launches / steps) < 1e-3
    asyncio.run(run())


def test_range_export_writes_times_in_one_unit(tmp_path, monkeypatch):
    """The marked range's CSV wrote its time column as display text in mixed units ("120.0µs",
    "0ns", "1.2ms"); it now writes µs as numbers. Busy time per stream checked against the raw
    kernels (synthetic trace of tests/ui/synth.py)."""
    from tests.ui.synth import S_FWD, make
    from tests.ui.test_timeline import _event, _ns, _timeline

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "synth.json"
    raw = make(path)["traceEvents"]

    async def run():
        app = TraceApp([path])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            tl = await _timeline(pilot, s)
            await pilot.press("down", "down", "m", "right", "right", "m")
            await pilot.pause()
            lo, hi = tl.range
            await pilot.press("e")
            await wait_for(pilot, lambda: getattr(s, "last_export", None) is not None)
            rows = list(csv.DictReader(s.last_export.open(encoding="utf-8", newline="")))
            busy = set()
            for e in raw:
                if e.get("cat") == "kernel" and e["args"]["stream"] == S_FWD:
                    p, q = _ns(e)
                    busy.update(range(max(p, lo), min(q, hi)))
            row = next(r for r in rows if r["what"] == "busy" and r["name"].endswith(f"stream {S_FWD}"))
            assert abs(float(row["time µs"]) - len(busy) / 1e3) < 1e-3
            assert all(float(r["time µs"]) >= 0 for r in rows)
    asyncio.run(run())


def test_a_job_that_fails_to_load_exits_2_with_the_whole_error(tmp_path):
    """A folder of ranks with a truncated rank file: the job view showed the error cut at the
    box's edge ("trace ends before its first compl") and q exited 0; the explorer's loader and
    `tracetui ranks` exit 2 on the same input."""
    from tracetui.ui.job_view import JobScreen

    for r in (0, 1):
        (tmp_path / f"job_rank-{r}.json").write_text(
            '{"distributedInfo": {"rank": %d, "world_size": 2, "backend": "nccl"}, "traceEvents": [' % r)

    async def run():
        app = TraceApp([tmp_path], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen) and app.failure is not None)
            await pilot.pause()
            stage = app.screen.query_one("#job-stage")
            text = str(stage.render())
            assert "truncated" in app.failure and app.failure.split(": ", 1)[1] in "".join(text.split("\n"))
            assert stage.region.width > 0 and stage.region.height >= 2  # wrapped, not cut
            await pilot.press("q")
        return app
    app = asyncio.run(run())
    assert app.return_code == 2


def test_a_cpu_only_step_says_cpu_only_not_gpu_idle(peer_dir):
    """HTA's CPU-only rank (gloo, no GPU activity in the file): the step's detail pane said
    "GPU busy - (0%), GPU idle 210.1ms (100%): host wait 210.1ms", of a GPU that is not there."""
    import gzip
    import json

    from tracetui.model import load_trace
    from tracetui.ui.details import describe

    path = peer_dir / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert not any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime") for e in raw)
    step = next(e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    t = load_trace(path)
    text = describe(t, t.steps[0]).plain
    assert "GPU idle" not in text and "host wait" not in text and "none in this trace (CPU only)" in text
    assert f"{step['dur'] / 1e3:.1f}ms" in text  # the window is the step's host interval


def test_help_names_every_job_view_key():
    """`?` in the job view showed only the explorer's keys: m, Enter and D were nowhere."""
    from pathlib import Path

    import tracetui.ui as ui
    from tracetui.ui.job_view import JobScreen

    help_md = (Path(ui.__file__).parent / "help.md").read_text(encoding="utf-8")
    job = help_md[help_md.index("## Job view"):]
    job = job[:job.index("\n## ", 1)] if "\n## " in job[1:] else job
    keys = {"enter": "`Enter`"}
    for b in JobScreen.BINDINGS:
        if b.show:
            assert keys.get(b.key, f"`{b.key}`") in job, b.key
