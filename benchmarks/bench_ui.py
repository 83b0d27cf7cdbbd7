"""UI latency benchmark driven by Pilot: first screen, cursor moves, expands, search keystrokes,
timeline keys (on a step, and on the whole trace from the root row), the help (`?`) first and again.

    python benchmarks/bench_ui.py [--events 270000] [--src RECORDING] [--input TRACE]

Each key is timed two ways (benchmarks/keytiming.py): wall time from press until Pilot finds the
app idle again, and the CPU time the process spent on the key. The input is a replicated real
recording generated here. Reported as median and worst case, and the median as a ratio to the
tree's cursor key measured in the same run.
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
from benchmarks.keytiming import cpu_median, key_timer, line, settle  # noqa: E402


async def run(path: Path) -> dict:
    from tracetui.ui.app import TraceApp
    from tracetui.ui.explorer import ExplorerScreen
    t0 = time.perf_counter()
    app = TraceApp([path])
    out: dict = {}
    async with app.run_test(size=(120, 40)) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.005)
        await pilot.pause()
        out["first_screen_s"] = time.perf_counter() - t0
        await settle(app, pilot)  # the prefetch (args, the timeline's lanes): no worker's CPU counts as a key's

        timed = key_timer(pilot)
        out["cursor_ms"] = await timed(*(["down"] * 30 + ["up"] * 10))
        out["expand_ms"] = []
        for _ in range(10):
            out["expand_ms"] += await timed("right")
            out["expand_ms"] += await timed("down")
        from tracetui.ui.explorer import SEARCH_SETTLE_S
        out["search_open_ms"] = await timed("slash")  # the box appears and takes the focus
        out["search_ms"] = await timed(*"aten::mm")
        # the jump to the first match once typing pauses (the cursor moves then, not per key)
        a, c = time.perf_counter(), time.process_time()
        await pilot.pause(SEARCH_SETTLE_S + 0.05)
        await pilot.pause()
        out["search_settle_ms"] = [((time.perf_counter() - a) * 1e3, (time.process_time() - c) * 1e3, 0.0)]
        out["search_close_ms"] = await timed("enter")  # back to the tree
        out["next_match_ms"] = await timed(*(["n"] * 10))
        for _ in range(4):  # open and close a few more times for a median
            out["search_open_ms"] += await timed("slash")
            out["search_close_ms"] += await timed("escape")
        # the timeline of the step around the cursor, then of the whole trace (cursor on the root)
        out["timeline_step_ms"] = await timed("4", "plus", "plus", "right_square_bracket", "minus", "1")
        out["timeline_all_ms"] = await timed("g", "4", "plus", "minus", "1")
        # timeline navigation (issue 23) at three zooms: the step, deep inside it, the whole trace
        from tracetui.ui.timeline import Timeline
        tl = app.screen.query_one(Timeline)
        await timed("down", "4")  # the first step again
        out["tl_step_ms"] = await timed(*(["right"] * 8 + ["down"] * 6 + ["up"] * 3 + ["tab", "shift+tab", "left"]))
        out["tl_deep_ms"] = await timed(*(["plus"] * 8 + ["right"] * 8 + ["down", "up", "f", "f"]
                                          + ["right_square_bracket", "left_square_bracket"]))
        out["tl_whole_ms"] = await timed(*(["w"] + ["right"] * 6 + ["down"] * 4 + ["up"] * 4
                                           + ["minus", "plus", "right_square_bracket"]))
        out["tl_range_ms"] = await timed("4", "m", "right", "right", "right", "m", "z", "M")
        # `?`: the first open builds help.md's Markdown; later opens show the screen kept (app.action_help)
        await timed("1")
        out["help_first_ms"] = await timed("question_mark")
        out["help_close_ms"] = await timed("escape")
        out["help_again_ms"] = []
        for _ in range(5):
            out["help_again_ms"] += await timed("question_mark")
            out["help_close_ms"] += await timed("escape")

    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", type=Path, default=ROOT / "traces" / "mlp_eager.json.gz",
                    help="the recording to replicate (HTA's control trace is op-heavy, mlp_eager frame-heavy)")
    ap.add_argument("--input", type=Path, help="a trace file to use as it is (no replication)")
    ap.add_argument("-v", action="store_true", help="print every key's CPU time")
    args = ap.parse_args()
    if args.input:  # a trace made before (the 1 GB replica takes minutes to write)
        size = args.input.stat().st_size / 1e6
        r = asyncio.run(run(args.input))
        print(f"input: {args.input.name}, {size:.1f} MB")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "big.json"
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"),
                            str(args.src), str(p), "--events", str(args.events)],
                           check=True, capture_output=True)
            size = p.stat().st_size / 1e6
            r = asyncio.run(run(p))
        print(f"input: {args.events:,} events, {size:.1f} MB (replicated from {args.src.name})")
    if args.v:
        print({k: [round(s[1], 1) for s in v] for k, v in r.items() if k.endswith("_ms")})
    print(f"first screen (app start -> explorer shown): {r['first_screen_s']:.2f} s")
    base = cpu_median(r["cursor_ms"])  # the baseline: the tree's cursor key, in the same run
    for k in ("cursor_ms", "expand_ms", "search_open_ms", "search_ms", "search_settle_ms", "search_close_ms",
              "next_match_ms", "timeline_step_ms", "timeline_all_ms", "tl_step_ms", "tl_deep_ms", "tl_whole_ms",
              "tl_range_ms", "help_first_ms", "help_again_ms", "help_close_ms"):
        cpu = [s[1] for s in r[k]]
        print(line(k[:-3], r[k], base)
              + (f"  {'meets' if statistics.median(cpu) <= 50 and max(cpu) <= 150 else 'MISSES'} "
                 "the 50/150 ms target" if k.startswith("tl_") else ""))


if __name__ == "__main__":
    main()
