"""Ranks timeline benchmark: CPU per key with 128 synthetic ranks, against 48 ranks of the same shape
measured in the same run (the baseline: as many lanes as fill a 160x48 screen; a view that draws
only the lanes on screen costs the same whatever the job's size), and the one-time build of the lanes from the job's tables.

    python benchmarks/bench_timeline.py [--ranks 128] [--base 48] [--kernels 4000] [--colls 400]

Each rank is a GPU rank of ``--kernels`` kernels on two streams (compute, copies and NCCL
all-reduces) over 5 steps, its clock offset by up to 2 ms, the collectives matched across ranks
by ``analyze`` (the ``ranks`` document the screen reads). Keys are timed by keytiming.py (CPU per
key, Pilot's wall beside it) at 160x48, after the screen has drawn once.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.keytiming import cpu_median, key_timer, line  # noqa: E402

KEYS = ["n", "n", "n", "p", "down", "down", "down", "enter", "down", "pagedown", "pageup", "plus", "plus", "minus",
        "right", "left", "f", "0", "n", "up"]


def rank_tables(rank: int, kernels: int, colls: int, rng) -> dict:
    """One GPU rank's kernels and collectives tables (the columns ``jobs.tables`` writes)."""
    base = 10**18 + int(rng.integers(0, 2_000_000))
    per = kernels // colls
    ks, kd, kc, st = [], [], [], []
    cs, ce = [], []
    t = base
    for c in range(colls):
        for _ in range(per - 1):
            d = int(rng.integers(2_000, 40_000))
            ks.append(t), kd.append(d), kc.append("gemm" if rng.random() < 0.5 else "pointwise"), st.append(7)
            t += d + int(rng.integers(0, 3_000))
        late = int(rng.integers(0, 50_000)) + (400_000 if rank == 3 and c % 7 == 0 else 0)
        d = 80_000
        ks.append(t + late), kd.append(d), kc.append("communication"), st.append(13)
        cs.append(t + late), ce.append(t + late + d)
        t += late + d
    n = len(cs)
    coll = {"rank": [rank] * n, "name": ["nccl:all_reduce"] * n, "kind": ["all_reduce"] * n,
            "raw_name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] * n, "source": ["kernel"] * n,
            "group": ["0"] * n, "seq": list(range(n)), "comms_id": [""] * n, "dtype": ["Float"] * n,
            "msg_bytes": [1 << 20] * n, "group_size": [-1] * n, "algorithm": ["RING_LL"] * n,
            "start_ns": cs, "end_ns": ce, "launch_ns": cs, "stream": [13] * n, "step": [c * 5 // n for c in range(n)]}
    kern = {"start_ns": ks, "dur_ns": kd, "class": kc, "stream": st}
    info = {"rank": [rank], "world": [-1], "backend": ["nccl"], "host": [f"node{rank // 8}"], "file": [""],
            "base_ns": [0], "rank_from": ["distributedInfo"], "device": ["H100"], "events": [len(ks)], "steps": [0],
            "has_gpu": [True], "groups": [[]]}
    return {"info": info, "collectives": coll, "kernels": kern, "ops": {}}


def job(n: int, kernels: int, colls: int):
    from tracetui.jobs.lanes import from_tables, offsets_of
    from tracetui.jobs.ranks import analyze
    from tracetui.jobs.tables import concat
    rng = np.random.default_rng(0)
    tables = [rank_tables(r, kernels, colls, rng) for r in range(n)]
    steps = {c: [] for c in ("rank", "step", "name", "start_ns", "end_ns")}
    doc = analyze(concat([t["info"] for t in tables]), concat([t["collectives"] for t in tables]), steps, [], n)
    t0 = time.perf_counter()
    lanes = from_tables(tables, offsets_of(doc))
    return doc, lanes, time.perf_counter() - t0


async def keys(doc, lanes, size) -> list:
    from textual import events
    from textual.app import App
    from tracetui.ui.idle_gc import IdleCollector
    from tracetui.ui.ranks_timeline import RanksTimelineScreen

    class Bench(App):
        """The timeline pushed as the job view's t does, under the app's GC policy (idle_gc, as TraceApp)."""

        def on_mount(self) -> None:
            self.idle_gc = IdleCollector(self)
            self.idle_gc.install()
            self.push_screen(RanksTimelineScreen(doc, lanes))

        async def on_event(self, event) -> None:
            if isinstance(event, events.Key) and hasattr(self, "idle_gc"):
                self.idle_gc.input()
            await super().on_event(event)

    app = Bench()
    async with app.run_test(size=size) as pilot:
        for _ in range(5):
            await pilot.pause()
        timed = key_timer(pilot)
        await timed("n", "p")  # warm: first draw of each kind of line
        return await timed(*KEYS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--base", type=int, default=48)
    ap.add_argument("--kernels", type=int, default=4000)
    ap.add_argument("--colls", type=int, default=400)
    ap.add_argument("--size", default="160x48")
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
          f", load {os.getloadavg()[0]:.1f}")
    results = {}
    for n in (a.base, a.ranks):
        t0 = time.perf_counter()
        doc, lanes, build = job(n, a.kernels, a.colls)
        print(f"{n:5d} ranks: {n * a.kernels:,} kernels, {len(doc['collectives'])} collectives; analyze "
              f"{time.perf_counter() - t0 - build:.2f} s, lanes built in {build * 1e3:.0f} ms")
        results[n] = asyncio.run(keys(doc, lanes, size))
    base = cpu_median(results[a.base])
    print(line(f"{a.base} ranks", results[a.base]))
    print(line(f"{a.ranks} ranks", results[a.ranks], base))


if __name__ == "__main__":
    main()
