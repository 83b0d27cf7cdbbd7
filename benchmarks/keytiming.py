"""Key timing shared by the Pilot benchmarks (bench_ui.py, bench_memory.py).

Each key is timed two ways: wall time from press until Pilot finds the app idle again (an upper
bound: Pilot polls for idleness in 20 ms sleeps), and the CPU time the process spent on the key
(handler + layout + render: what a user waits for, since the app is otherwise idle; run the
benchmark once the app's workers are done, or their CPU time counts as the key's).
"""
from __future__ import annotations

import statistics
import time

Sample = tuple[float, float]
"""One key: (Pilot wall ms, process CPU ms)."""


def key_timer(pilot):
    """An async ``timed(*keys) -> [Sample, ...]`` that presses each key and waits for idle."""
    async def timed(*keys) -> list[Sample]:
        res = []
        for k in keys:
            a, c = time.perf_counter(), time.process_time()
            await pilot.press(k)
            await pilot.pause()
            res.append(((time.perf_counter() - a) * 1e3, (time.process_time() - c) * 1e3))
        return res
    return timed


async def settle(app, pilot) -> None:
    """Wait until every worker of the app is done (the explorer's prefetch after the first screen)."""
    await app.workers.wait_for_complete()
    await pilot.pause()


def line(label: str, samples: list[Sample], base: float | None = None, width: int = 14) -> str:
    """``label``'s median and worst CPU per key (and its median as a ratio to ``base``, the
    baseline key's median measured in the same run), then Pilot's wall times."""
    cpu, wall = [c for _, c in samples], [w for w, _ in samples]
    med = statistics.median(cpu)
    ratio = f" ({med / base:4.1f}x baseline)" if base else ""
    return (f"{label:{width}s} CPU per key: median {med:6.1f} ms{ratio}, worst {max(cpu):6.1f} ms | "
            f"Pilot wall: median {statistics.median(wall):6.1f} ms, worst {max(wall):6.1f} ms  (n={len(cpu)})")


def cpu_median(samples: list[Sample]) -> float:
    return statistics.median(c for _, c in samples)
