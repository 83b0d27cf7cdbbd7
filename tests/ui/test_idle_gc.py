"""Full collections of the cyclic GC while the user pauses (tracetui/ui/idle_gc.py)."""
from __future__ import annotations

import asyncio
import gc

from tracetui.ui import idle_gc
from tracetui.ui.app import ExplorerScreen, TraceApp

from tests.conftest import TRACES


def test_full_collections_wait_for_a_pause():
    """While the app runs, Python's automatic full collections come DEFER times later; once no
    key came for IDLE_S, one runs if Python would have run one by now, and without a pause one
    runs after a key's frame once SOON times overdue; quitting restores the thresholds."""
    before = gc.get_threshold()
    full = []  # (generation, when) of every collection that starts

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
                # make a full collection due: threshold2 young (gen 1) collections since the last
                while gc.get_count()[2] < before[2]:
                    gc.collect(1)
                full.clear()
                for _ in range(3):  # keys faster than IDLE_S apart: no full collection from us
                    await pilot.press("down")
                    await pilot.pause(idle_gc.IDLE_S / 4)
                assert 2 not in full
                await pilot.pause(idle_gc.IDLE_S * 2)  # a pause: the due collection runs
                assert 2 in full and gc.get_count()[2] < before[2]
                # none due: a pause collects nothing in full
                full.clear()
                await pilot.press("up")
                await pilot.pause(idle_gc.IDLE_S * 2)
                assert 2 not in full
                # no pause and SOON times overdue: right after the next key's frame
                while gc.get_count()[2] < before[2] * idle_gc.SOON:
                    gc.collect(1)
                await pilot.press("down")
                await pilot.pause(idle_gc.IDLE_S / 4)
                assert 2 in full and gc.get_count()[2] < before[2]
            finally:
                gc.callbacks.remove(cb)
    asyncio.run(run())
    assert gc.get_threshold() == before
