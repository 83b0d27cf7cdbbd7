"""A closed screen frees its trace: the app freezes loaded data out of the cyclic GC's scans,
and a screen's widgets hold each other in cycles, so a popped screen (a rank opened from the job
view and closed, a diff's `a`/`b`) stayed alive with its whole trace until this was fixed."""
from __future__ import annotations

import asyncio
import gc
import weakref

from tracetui.model.trace import load_trace
from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen

from tests.conftest import DATA

TRACE = DATA / "cpu_transformer_eager_memory.json.gz"  # the memory view freezes its first layout too


def test_a_closed_explorer_frees_its_trace():
    async def run():
        app = TraceApp([TRACE])
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, ExplorerScreen):
                await pilot.pause(0.05)
            await app.workers.wait_for_complete()
            t2 = load_trace(TRACE)
            screen = ExplorerScreen(t2)
            app.push_screen(screen)
            await pilot.pause(0.2)
            await app.workers.wait_for_complete()
            for _ in range(10):  # the memory view's off-screen first layout, then its freeze
                await pilot.pause(0.05)
            refs = weakref.ref(t2), weakref.ref(screen)
            app.pop_screen()
            del t2, screen
            await pilot.pause(0.3)
            gc.collect()
            assert [r() is None for r in refs] == [True, True]
            assert isinstance(app.screen, ExplorerScreen)  # the first one is still there, working
            await pilot.press("down")
    asyncio.run(run())
