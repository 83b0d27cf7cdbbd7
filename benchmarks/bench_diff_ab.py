"""Diff speed, A/B between checkouts: the diff's CPU time beyond loading, interleaved in one run.

    git worktree add /tmp/old dfe5d10
    python benchmarks/bench_diff_ab.py /tmp/old . [--rounds 5] [--events 270000]
        [--src traces/transformer_eager.json.gz traces/transformer_compile.json.gz]

The pair (default: the bundled GPT-2-width transformer training step, eager vs compile) is
replicated to ``--events`` each by ``make_large_trace.py``, once. Each round runs every checkout
in a fresh process with ``PYTHONPATH`` set to it, in turn: load both traces, then
``diff_dict(diff_traces(a, b))``. CPU time (``time.process_time``), not wall time: this VM is
shared, and CPU time moves less with the other sessions' load. Prints each run and the medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys, time
try:
    from tracetui.model import load_trace
except ImportError:
    from tracetui.model.load import load_trace
try:
    from tracetui.compare.changes import diff_dict
    from tracetui.compare.diff import diff_traces
except ImportError:  # checkouts before the compare/ stage (dfe5d10)
    from tracetui.model.diff import diff_dict, diff_traces
t0 = time.process_time(); a, b = load_trace(sys.argv[1]), load_trace(sys.argv[2]); t1 = time.process_time()
j = diff_dict(diff_traces(a, b)); t2 = time.process_time()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {len(j['kernels'])}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", nargs=2, type=Path, default=[ROOT / "traces" / f"transformer_{k}.json.gz"
                                                           for k in ("eager", "compile")])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, src in enumerate(args.src):
            p = Path(tmp) / f"{k}.json"
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"), str(src), str(p),
                            "--events", str(args.events)], check=True, capture_output=True)
            paths.append(str(p))
        runs: dict = {str(c): [] for c in args.checkouts}
        for r in range(args.rounds):
            for c in args.checkouts:
                env = dict(os.environ, PYTHONPATH=str(c.resolve()))
                out = subprocess.run([sys.executable, "-c", CHILD, *paths], env=env, capture_output=True, text=True,
                                     cwd=tmp)
                if out.returncode:
                    print(f"round {r + 1} {c}: failed: {out.stderr.strip().splitlines()[-1:]}")
                    continue
                load, diff, rows = out.stdout.split()
                runs[str(c)].append((float(load), float(diff)))
                print(f"round {r + 1} {c}: load {float(load):.3f} s, diff {float(diff):.3f} s CPU ({rows} rows)")
    for c, xs in runs.items():
        if xs:
            print(f"{c}: median diff {statistics.median(d for _, d in xs):.3f} s CPU, "
                  f"median load {statistics.median(l for l, _ in xs):.3f} s CPU ({len(xs)} runs)")


if __name__ == "__main__":
    main()
