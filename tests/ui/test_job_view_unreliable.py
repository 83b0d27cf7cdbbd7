"""The job view when ``ranks`` withholds the straggler because the matching is not reliable (ranks
matched by order whose collectives pair unlike kinds, as HTA's sampled ranks): the header says the
straggler was not named and why is under ``D``; "no clear straggler" read as "the ranks are
balanced" while the waits below still showed one rank waiting 381 ms. Generated ranks; the reason
is the one ``ranks --json`` gives for the same folder."""
from __future__ import annotations

import asyncio
import json

from tracetui.cli.main import main
from tracetui.ui.app import TraceApp
from tracetui.ui.job_view import JobDiagnosticsScreen, JobScreen

from tests.jobs.test_order_kinds import nccl_rank
from tests.ui.test_job_view import _ready


def test_withheld_straggler_is_said_in_the_header_and_why_under_D(tmp_path, capsys):
    steps = [["allreduce", "all_to_all"]] * 3
    nccl_rank(tmp_path / "rank0.json", 0, 2, steps, 0.0)
    nccl_rank(tmp_path / "rank1.json", 1, 2, [steps[0], steps[1][::-1], steps[2]], 300.0)
    capsys.readouterr()
    assert main(["ranks", str(tmp_path), "--json", "--workers", "1"]) == 0
    want = json.loads(capsys.readouterr().out)["straggler"]
    assert want["rank"] is None and want["unreliable"]

    async def run():
        app = TraceApp([tmp_path], job=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            head = str(app.screen.query_one("#job-head").render())
            assert "straggler not named: matching unreliable (D)" in head and "no clear straggler" not in head
            await pilot.press("D")
            await pilot.pause()
            assert isinstance(app.screen, JobDiagnosticsScreen)
            assert app.screen.lines[0] == want["evidence"]
            n = len(app.screen.lines)
            assert f"{n} diagnostics (D)" in head
    asyncio.run(run())
