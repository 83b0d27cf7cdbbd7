"""Memory view latency, driven by Pilot on a large generated trace with [memory] events.

    python benchmarks/bench_memory.py [--events 270000] [--src RECORDING]

The input replicates a recording made with profile_memory=True (default: the bundled CPU
transformer training recording tests/data/cpu_transformer_eager_memory.json.gz, backward on a
second thread; HTA's GPU peer trace
df_index_resolver_df_index_resolver.json.gz is a heavier source: 13% of its events are
[memory] instants). Reported: the model's build time (in the app's worker, off every key), and
per key the CPU time the process spent (handler + layout + render) and Pilot's wall time, as
median and worst. The baseline, measured in the same run on the same trace, is the tree's
cursor key (the explorer's cheapest, most frequent key); the memory keys are reported as a
ratio to it. Showing and leaving a view is compared with doing the same with the op table (3). Target: <= 50 ms per key.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_SRC = ROOT / "tests" / "data" / "cpu_transformer_eager_memory.json.gz"


async def run(path: Path) -> dict:
    from tracetui.ui.app import ExplorerScreen, TraceApp
    app = TraceApp([path])
    out: dict = {}
    async with app.run_test(size=(160, 48)) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.005)
        screen = app.screen
        t0 = time.perf_counter()
        while not screen.trace.memory_ready:  # built by the args worker after the first screen
            await pilot.pause(0.01)
        out["build_s"] = time.perf_counter() - t0
        mem = screen.trace.memory
        out["instants"], out["devices"], out["steps"] = len(mem), len(mem.devices), screen.trace.n_steps
        await pilot.pause()

        async def timed(*keys) -> list[tuple[float, float]]:
            res = []
            for k in keys:
                a, c = time.perf_counter(), time.process_time()
                await pilot.press(k)
                await pilot.pause()
                res.append(((time.perf_counter() - a) * 1e3, (time.process_time() - c) * 1e3))
            return res

        out["baseline tree cursor"] = await timed(*(["down"] * 20 + ["up"] * 10))
        # the same view switch to another tab: what any view costs to show and to leave
        out["baseline op table (3)"] = []
        out["baseline back to tree (1)"] = []
        for _ in range(5):
            out["baseline op table (3)"] += await timed("3")
            out["baseline back to tree (1)"] += await timed("1")
        out["open view (5)"] = []
        out["back to tree (1)"] = []
        for _ in range(5):
            out["open view (5)"] += await timed("5")
            out["back to tree (1)"] += await timed("1")
        out["open view (5)"] += await timed("5")
        out["next/prev step (. ,)"] = await timed(*([".", "."] * 5 + [","] * 5))
        out["next device (v)"] = await timed(*(["v"] * 4))
        out["table rows (down)"] = await timed(*(["down"] * 20))
        out["jump to op (enter)"] = []
        for _ in range(5):
            out["jump to op (enter)"] += await timed("enter")
            await timed("5")
        out["tree cursor, memory in details"] = await timed(*(["down"] * 20))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "big_memory.json"
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"),
                        str(args.src), str(p), "--events", str(args.events)], check=True, capture_output=True)
        size = p.stat().st_size / 1e6
        r = asyncio.run(run(p))
    print(f"input: {args.events:,} events, {size:.1f} MB (replicated from {args.src.name}): "
          f"{r.pop('instants'):,} memory instants, {r.pop('devices')} device(s), {r.pop('steps')} steps")
    print(f"model build (args worker, off the keys): {r.pop('build_s'):.2f} s after the first screen")
    base = statistics.median(c for _, c in r["baseline tree cursor"])
    worst_key = 0.0
    for k, v in r.items():
        cpu, wall = [c for _, c in v], [w for w, _ in v]
        med = statistics.median(cpu)
        if not k.startswith("baseline"):
            worst_key = max(worst_key, max(cpu))
        print(f"{k:32s} CPU per key: median {med:6.1f} ms ({med / base:4.1f}x baseline), worst {max(cpu):6.1f} ms"
              f" | Pilot wall: median {statistics.median(wall):6.1f} ms, worst {max(wall):6.1f} ms  (n={len(cpu)})")
    print(f"worst memory-view key: {worst_key:.1f} ms CPU (target <= 50 ms)")


if __name__ == "__main__":
    main()
