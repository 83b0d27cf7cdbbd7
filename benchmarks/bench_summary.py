"""`tracetui summary` against `load_trace` alone, same run, interleaved (issue 39.3: summary ≤ 1.15× load).

    python benchmarks/bench_summary.py [--input FILE | --src TRACE --events 270000] [--repeat 3]

Each contender is a fresh process (imports included in both): ``load`` runs ``load_trace(FILE)``,
``summary`` runs ``python -m tracetui summary FILE --no-cache`` with stdout to /dev/null. Wall
and CPU (user+sys of the child and the helpers it forks) per round; the ratio is summary/load.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOAD = "import sys; from tracetui.model import load_trace; load_trace(sys.argv[1], cache=False)"


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child and everything it waited for)."""
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--input", type=Path)
    ap.add_argument("--src", type=Path, default=ROOT.parent / "shared/peer-traces/hta/trace_diff_control_control.json.gz")
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = a.input
        if path is None:
            path = Path(tmp) / "big.json"
            subprocess.run([sys.executable, str(ROOT / "benchmarks/make_large_trace.py"), str(a.src), str(path),
                            "--events", str(a.events)], check=True)
        load_cmd = [sys.executable, "-c", LOAD, str(path)]
        summ_cmd = [sys.executable, "-m", "tracetui", "summary", str(path), "--no-cache"]
        rows = []
        for i in range(a.repeat):
            lw, lc = run(load_cmd)
            sw, sc = run(summ_cmd)
            rows.append((lw, lc, sw, sc))
            print(f"round {i + 1}: load {lw:.2f} s wall / {lc:.2f} s CPU; summary {sw:.2f} s / {sc:.2f} s; "
                  f"ratio wall {sw / lw:.3f}, CPU {sc / lc:.3f}")
        bl = min(r[0] for r in rows)
        bs = min(r[2] for r in rows)
        cl = min(r[1] for r in rows)
        cs = min(r[3] for r in rows)
        mid = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731 - the upper median
        print(f"best: load {bl:.2f} s, summary {bs:.2f} s: ratio wall {bs / bl:.3f}; CPU {cs / cl:.3f}"
              f" ({path.stat().st_size / 1e6:.1f} MB)")
        print(f"median of the rounds' ratios: wall {mid([r[2] / r[0] for r in rows]):.3f}, "
              f"CPU {mid([r[3] / r[1] for r in rows]):.3f} (a round's two runs are back to back: on a "
              f"shared VM the best-of ratio pairs two different rounds' luck)")


if __name__ == "__main__":
    main()
