"""Memory view latency, driven by Pilot on a large generated trace with [memory] events.

    python benchmarks/bench_memory.py [--events 270000] [--src RECORDING] [--input TRACE]

The input replicates a recording made with profile_memory=True (default: the bundled CPU
transformer training recording tests/data/cpu_transformer_eager_memory.json.gz, backward on a
second thread; HTA's GPU peer trace
df_index_resolver_df_index_resolver.json.gz is a heavier source: 13% of its events are
[memory] instants). Reported: the model's build time (in the app's worker, off every key), and
per key the CPU time the process spent (handler + layout + render, and a GC collection run
after the frame) and Pilot's wall time, as median and worst, with the cyclic GC's time in the
worst key (benchmarks/keytiming.py; the keys start once the app's workers are done). The
baseline, measured in the same run on the same trace, is the tree's cursor key (the explorer's
cheapest, most frequent key); the memory keys are reported as a ratio to it. Showing and leaving
a view is compared with doing the same with the op table (3). The first 5 is reported on its own:
it is the view's first layout. Enter is pressed on a new row each time (a node not yet revealed
nor described). Target: <= 50 ms per key.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.keytiming import cpu_median, key_timer, line, settle  # noqa: E402

DEFAULT_SRC = ROOT / "tests" / "data" / "cpu_transformer_eager_memory.json.gz"
ROUNDS = 5
"""Presses of each view switch (and of Enter on a new row) for a median."""


async def run(path: Path) -> dict:
    from tracetui.ui.app import TraceApp
    from tracetui.ui.explorer import ExplorerScreen
    app = TraceApp([path])
    out: dict = {}
    async with app.run_test(size=(160, 48)) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.005)
        screen = app.screen
        view = screen.memory_view
        t0 = time.perf_counter()
        while not screen.trace.memory_ready:  # built by the args worker after the first screen
            await pilot.pause(0.01)
        out["build_s"] = time.perf_counter() - t0
        while not getattr(view, "pages_ready", True):  # then every (device, step) page (absent before: A/B)
            await pilot.pause(0.01)
        out["pages_s"] = time.perf_counter() - t0
        await settle(app, pilot)  # the timeline's lanes too: no worker's CPU time counts as a key's
        mem = screen.trace.memory
        out["instants"], out["devices"], out["steps"] = len(mem), len(mem.devices), screen.trace.n_steps
        timed = key_timer(pilot)

        out["baseline tree cursor"] = await timed(*(["down"] * 20 + ["up"] * 10))
        # the same view switch to another tab: what any view costs to show and to leave
        out["baseline op table (3)"] = []
        out["baseline back to tree (1)"] = []
        for _ in range(ROUNDS):
            out["baseline op table (3)"] += await timed("3")
            out["baseline back to tree (1)"] += await timed("1")
        out["open view (5), first"] = await timed("5")  # the view's first layout
        out["back to tree (1)"] = await timed("1")
        out["open view (5)"] = []
        for _ in range(ROUNDS):
            out["open view (5)"] += await timed("5")
            out["back to tree (1)"] += await timed("1")
        out["open view (5)"] += await timed("5")
        out["next/prev step (. ,)"] = await timed(*([".", "."] * 5 + [","] * 5))
        out["next device (v)"] = await timed(*(["v"] * 4))
        out["table rows (down)"] = await timed(*(["down"] * 20))
        # Enter on a new row each time (a new node to reveal and describe), then 5 back
        out["jump to op (enter), live table"] = []
        out["jump to op (enter), per-op table"] = []
        out["back to memory (5)"] = []
        for table in ("#mem-live", "#mem-ops"):
            for _ in range(ROUNDS):
                view.query_one(table).focus()
                await timed("down")
                out[f"jump to op (enter), {'live' if table == '#mem-live' else 'per-op'} table"] += await timed("enter")
                out["back to memory (5)"] += await timed("5")
        await timed("1")
        out["tree cursor, memory in details"] = await timed(*(["down"] * 20))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--input", type=Path, help="a trace with [memory] events to use as it is (no replication)")
    args = ap.parse_args()
    if args.input:
        r = asyncio.run(run(args.input))
        print(f"input: {args.input.name}, {args.input.stat().st_size / 1e6:.1f} MB: {r.pop('instants'):,} memory "
              f"instants, {r.pop('devices')} device(s), {r.pop('steps')} steps")
        report(r)
        return
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "big_memory.json"
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"),
                        str(args.src), str(p), "--events", str(args.events)], check=True, capture_output=True)
        size = p.stat().st_size / 1e6
        r = asyncio.run(run(p))
    print(f"input: {args.events:,} events, {size:.1f} MB (replicated from {args.src.name}): "
          f"{r.pop('instants'):,} memory instants, {r.pop('devices')} device(s), {r.pop('steps')} steps")
    report(r)


def report(r: dict) -> None:
    print(f"model build (args worker, off the keys): {r.pop('build_s'):.2f} s after the first screen, "
          f"every page of the view {r.pop('pages_s'):.2f} s")
    base = cpu_median(r["baseline tree cursor"])
    worst, worst_med = (0.0, 0.0, 0.0), 0.0
    for k, v in r.items():
        if not k.startswith("baseline"):
            worst = max(worst, *v, key=lambda s: s[1])
            worst_med = max(worst_med, cpu_median(v))
        print(line(k, v, base, width=34))
    print(f"memory-view keys: worst median {worst_med:.1f} ms, worst single key {worst[1]:.1f} ms CPU "
          f"({worst[2]:.1f} ms of it in the cyclic GC) (target <= 50 ms)")

if __name__ == "__main__":
    main()
