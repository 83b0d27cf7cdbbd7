"""Diff benchmark: time to align two large traces, beyond loading them.

    python benchmarks/bench_diff.py [--events 270000] [--src A.json.gz B.json.gz]

A is a replicated eager MLP recording, B the compiled one (or the two --src traces, e.g. HTA's
control/test pair: 1,428 vs 2,101 kernels per step), both generated here (not committed). The
diff's time is reported beside the load of the same two files in the same run (the baseline).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", nargs=2, type=Path, default=[ROOT / "traces" / f"{n}.json.gz"
                                                           for n in ("mlp_eager", "mlp_compile")])
    args = ap.parse_args()
    from tracetui.model import load_trace
    from tracetui.compare.changes import diff_dict
    from tracetui.compare.diff import diff_traces
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, src in enumerate(args.src):
            p = Path(tmp) / f"{k}_{src.name.split('.')[0]}.json"
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"),
                            str(src), str(p), "--events", str(args.events)],
                           check=True, capture_output=True)
            paths.append(p)
        t0 = time.perf_counter()
        a, b = load_trace(paths[0]), load_trace(paths[1])
        t1 = time.perf_counter()
        res = diff_traces(a, b)
        j = diff_dict(res)
        t2 = time.perf_counter()
        sizes = [p.stat().st_size / 1e6 for p in paths]
    print(f"A {len(a.store):,} events {sizes[0]:.1f} MB, B {len(b.store):,} events {sizes[1]:.1f} MB, "
          f"{a.n_steps} / {b.n_steps} steps")
    print(f"load both: {t1 - t0:.2f} s; diff beyond loading: {t2 - t1:.2f} s = {(t2 - t1) / (t1 - t0):.2f} of the "
          f"load ({len(j['kernels'])} aligned kernel rows, {len(j['fused'])} fused)")


if __name__ == "__main__":
    main()
