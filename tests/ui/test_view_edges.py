"""Smaller edges a new user hit (issue 36, item 7) in the app: a status message that followed every
view, `F` dropping the search's `match i/N`, and `e`/`E` doing nothing, without a word, on the
diff and ladder screens. Figures checked against `diff --json` and the raw trace."""
from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json

import pytest

from tracetui.cli.main import main
from tracetui.ui.app import TraceApp
from tracetui.ui.diff_view import DiffScreen, LadderScreen
from tracetui.ui.tables import AggTable

from tests.conftest import TRACES
from tests.ui.test_app import explorer, wait_for

A, B, C = (TRACES / f"mlp_{x}.json.gz" for x in ("eager", "compile", "fused"))


def _status(s) -> str:
    return str(s.query_one("#status").render())


def test_a_views_status_message_does_not_follow_to_the_next_view():
    """Enter on a kernel-table row said "…: occurrence 1/N (n/N for more)" and the line stayed on
    the timeline, the memory view and every other tab."""
    async def run():
        app = TraceApp([A])
        async with app.run_test(size=(160, 48)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            table = s.query_one("#kernel-table", AggTable)
            await wait_for(pilot, lambda: table.is_mounted and table.row_count > 0)
            table.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert "occurrence 1/" in _status(s)
            for key in ("4", "2", "3", "5", "1"):
                await pilot.press(key)
                await pilot.pause()
                assert "occurrence" not in _status(s), key
            assert s.trace.path.name in _status(s)  # the line itself is still there
            await pilot.press("o", "x")  # a message of the tree's own still shows in the tree
            await pilot.pause()
            assert "kernel 1/" in _status(s)
    asyncio.run(run())


def test_F_keeps_the_match_count_of_the_search():
    """After `/` and `n` the status said `match i/N`; `F` (the kind filter) dropped it, leaving no
    count. Now it says where the cursor is among the filtered matches; N from the raw trace."""
    import gzip
    raw = json.load(gzip.open(A))["traceEvents"]
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "linear" in e["name"].lower()]
    assert ops

    async def run():
        app = TraceApp([A])
        async with app.run_test(size=(160, 48)) as pilot:
            s = await explorer(pilot)
            await pilot.press("slash", *"linear", "enter")
            await pilot.pause(0.3)
            await pilot.press("n")
            await pilot.pause()
            assert "match 2/" in _status(s)
            await pilot.press("F", "F")  # None -> module -> op
            await pilot.pause()
            assert s.kind_filter == "op"
            n = s.matches.size
            assert n == len(ops)  # every op whose name has "linear", from the raw JSON
            text = _status(s)
            assert (f"match {s.match_i + 1}/{n}" in text) if s.match_i >= 0 else (f"{n} matches" in text)
            await pilot.press("n")
            await pilot.pause()
            assert f"match {s.match_i + 1}/{n}" in _status(s)
            assert s.trace.kind(s.current) == "op" and "linear" in s.trace.name(s.current).lower()
    asyncio.run(run())


def _cli_json(*argv) -> dict:
    buf = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(buf):
        assert main([str(a) for a in argv]) == 0
    buf.flush()
    return json.loads(buf.buffer.getvalue())


async def _export(pilot, s, key="e"):
    s.last_export = None
    await pilot.press(key)
    await wait_for(pilot, lambda: s.last_export is not None)
    return s.last_export


def test_e_and_E_export_the_diffs_aligned_list_as_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = _cli_json("diff", A, B, "--json")["kernels"]

    async def run():
        app = TraceApp([A, B], diff=True)
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            s = app.screen
            rows = list(csv.DictReader((await _export(pilot, s)).open(encoding="utf-8", newline="")))
            assert [(r["name"], r["status"]) for r in rows] == [(k["name"], k["status"]) for k in want]
            assert [float(r["delta_us"]) for r in rows] == pytest.approx([k["delta_us"] for k in want])
            await pilot.press("l", "f")  # the list, filtered to the rows that differ
            await pilot.pause()
            rows = list(csv.DictReader((await _export(pilot, s)).open(encoding="utf-8", newline="")))
            assert [r["name"] for r in rows] == [k["name"] for k in want if k["status"] != "same"]
            md = (await _export(pilot, s, "E")).read_text(encoding="utf-8")
            assert len([ln for ln in md.splitlines() if ln.startswith("| ")]) == len(rows) + 1 and md.startswith("| name |")
    asyncio.run(run())


def test_e_exports_the_ladders_rungs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = _cli_json("diff", A, B, C, "--json")["rungs"]

    async def run():
        app = TraceApp([A, B, C], diff=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LadderScreen) and app.screen.ladder is not None)
            s = app.screen
            rows = list(csv.DictReader((await _export(pilot, s)).open(encoding="utf-8", newline="")))
            assert [r["name"] for r in rows] == ["mlp_eager", "mlp_compile", "mlp_fused"]
            assert [float(r["device_us_per_step"]) for r in rows] == pytest.approx([w["device_us_per_step"] for w in want])
    asyncio.run(run())


def test_e_before_the_diff_is_ready_says_why(monkeypatch, tmp_path):
    """Pressed while the diff still aligns, `e` says so instead of nothing."""
    monkeypatch.chdir(tmp_path)
    from textual.widgets._toast import Toast

    async def run():
        app = TraceApp([A, B], diff=True)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            s = app.screen
            s.result = None  # as before the worker's answer
            await pilot.press("e")
            await wait_for(pilot, lambda: any("nothing to export yet" in t.render().plain
                                              for t in app.screen.query(Toast)))
            assert list(tmp_path.iterdir()) == []
    asyncio.run(run())
