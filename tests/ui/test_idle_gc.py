"""Full collections of the cyclic GC while the user pauses (tracetui/ui/idle_gc.py)."""
from __future__ import annotations

import asyncio
import gc

from tracetui.ui import idle_gc
from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen

from tests.conftest import TRACES


def test_full_collections_wait_for_a_pause():
    """While the app runs, Python's automatic full collections come DEFER times later; one runs
    instead when Python would have wanted one, in the pause after a key or right after the frame
    of the key that finds it due; quitting restores the thresholds."""
    before = gc.get_threshold()
    full = []  # the generation of every collection that starts

    def cb(phase, info):
        if phase == "start":
            full.append(info["generation"])

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(100, 30)) as pilot:
            while not isinstance(app.screen, ExplorerScreen):
                await pilot.pause(0.02)
            assert gc.get_threshold() == (before[0], before[1], before[2] * idle_gc.DEFER)
            while not app.screen.trace.store.args_loaded:  # the prefetch freezes the GC (resets its counts)
                await pilot.pause(0.02)
            await app.workers.wait_for_complete()
            await pilot.pause(idle_gc.IDLE_S * 2)
            gc.collect()
            gc.callbacks.append(cb)
            try:
                await pilot.press("down")  # none due: no full collection, nor after the pause
                await pilot.pause(idle_gc.IDLE_S / 4)
                assert 2 not in full
                while gc.get_count()[2] < before[2]:  # due now: threshold2 young collections since
                    gc.collect(1)
                full.clear()
                await pilot.pause(idle_gc.IDLE_S * 2)  # the pause after that key: collected then
                assert full.count(2) == 1 and gc.get_count()[2] < before[2]
                while gc.get_count()[2] < before[2]:  # due when a key comes: right after its frame
                    gc.collect(1)
                full.clear()
                await pilot.press("up")
                await pilot.pause(idle_gc.IDLE_S / 4)
                assert full.count(2) == 1 and gc.get_count()[2] < before[2]
            finally:
                gc.callbacks.remove(cb)
    asyncio.run(run())
    assert gc.get_threshold() == before
