"""`?` builds the help once per section order and shows the same screen again: the Markdown layout
cost ~300 ms CPU on every press (measured on the H100 MLP trace at 160x48), a visible pause each
time a user looked up a key. The job view's help, which puts its own section first, is its own."""
from __future__ import annotations

import asyncio

from textual.widgets import Markdown

from tracetui.ui.app import TraceApp
from tracetui.ui.modals import HelpScreen, help_text

from tests.conftest import TRACES
from tests.ui.test_app import explorer


def test_help_is_built_once_and_shown_again():
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            await explorer(pilot)
            await pilot.press("question_mark")
            await pilot.pause()
            first = app.screen
            assert isinstance(first, HelpScreen)
            assert first.query_one(Markdown).source == help_text(None)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("question_mark")
            await pilot.pause()
            assert app.screen is first  # not rebuilt
            await pilot.press("question_mark")  # `?` on the help closes it, as before
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen) and app.is_running
    asyncio.run(run())
