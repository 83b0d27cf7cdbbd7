"""Key timing shared by the Pilot benchmarks (bench_ui.py, bench_memory.py).

Each key is timed two ways: wall time from press until Pilot finds the app idle again (an upper
bound: Pilot polls for idleness in 20 ms sleeps), and the CPU time the process spent on the key
(handler + layout + render: what a user waits for, since the app is otherwise idle; run the
benchmark once the app's workers are done, or their CPU time counts as the key's).
"""
from __future__ import annotations

import gc
import statistics
import time

Sample = tuple[float, float, float]
"""One key: (Pilot wall ms, process CPU ms, ms of it in the cyclic GC's collections)."""


class _GCClock:
    """Wall time spent in the cyclic GC (gc.callbacks), summed since the last ``take``."""

    def __init__(self) -> None:
        self.total, self._t0 = 0.0, 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t0

    def take(self) -> float:
        t, self.total = self.total, 0.0
        return t * 1e3


def key_timer(pilot):
    """An async ``timed(*keys) -> [Sample, ...]`` that presses each key and waits for idle."""
    clock = _GCClock()

    async def timed(*keys) -> list[Sample]:
        res = []
        for k in keys:
            clock.take()
            a, c = time.perf_counter(), time.process_time()
            await pilot.press(k)
            await pilot.pause()
            res.append(((time.perf_counter() - a) * 1e3, (time.process_time() - c) * 1e3, clock.take()))
        return res
    return timed


async def settle(app, pilot) -> None:
    """Wait until every worker of the app is done (the explorer's prefetch after the first screen)."""
    await app.workers.wait_for_complete()
    await pilot.pause()


def line(label: str, samples: list[Sample], base: float | None = None, width: int = 14) -> str:
    """``label``'s median and worst CPU per key (and its median as a ratio to ``base``, the
    baseline key's median measured in the same run), the GC's share of the worst key, then
    Pilot's wall times."""
    cpu, wall = [s[1] for s in samples], [s[0] for s in samples]
    med = statistics.median(cpu)
    worst = max(samples, key=lambda s: s[1])
    ratio = f" ({med / base:4.1f}x baseline)" if base else ""
    return (f"{label:{width}s} CPU per key: median {med:6.1f} ms{ratio}, worst {worst[1]:6.1f} ms "
            f"(GC {worst[2]:4.1f}) | Pilot wall: median {statistics.median(wall):6.1f} ms, "
            f"worst {max(wall):6.1f} ms  (n={len(cpu)})")


def cpu_median(samples: list[Sample]) -> float:
    return statistics.median(s[1] for s in samples)
