"""`O` finds a trace's fusion chains once: each `O` ran the whole search again in the worker
(~300 ms CPU on HTA's trace_diff_test, competing with the keys for the interpreter), though a
loaded trace's chains never change. The second view shows the very same report."""
from __future__ import annotations

import asyncio

from tracetui.model.opportunities import opportunities
from tracetui.ui.app import TraceApp
from tracetui.ui.opportunities_view import OpportunitiesScreen

from tests.conftest import TRACES
from tests.ui.test_app import explorer


async def _report(pilot):
    for _ in range(500):
        s = pilot.app.screen
        if isinstance(s, OpportunitiesScreen) and s.report is not None:
            return s.report
        await pilot.pause(0.02)
    raise AssertionError("no report")


def test_second_O_shows_the_first_report():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("O")
            first = await _report(pilot)
            assert first["chains"] == opportunities(s.trace)["chains"]  # what the model finds afresh
            await pilot.press("escape")
            await pilot.pause()
            await pilot.press("O")
            assert await _report(pilot) is first
    asyncio.run(run())
