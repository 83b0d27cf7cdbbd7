"""The local pool's own cost: one index built by 1 worker, by 2 ``ProcessPoolExecutor`` workers
(the portable path, taken when a start method is named) and by 2 forked workers (the default
where fork exists), alternating in one process so a slow minute hits all three.

    python benchmarks/bench_pool.py [--ranks 32] [--rounds 9] [--input RANK_TRACE]

Baseline measured in the same run: the 1-worker build; each 2-worker variant's speed-up is the
1-worker median over its median (and best over best).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--input", type=Path, default=ROOT / "tests" / "data" / "gloo_rank0.pt.trace.json.gz")
    args = ap.parse_args()
    from tracetui.jobs import pool
    from tracetui.jobs.index import build_index
    from tracetui.workloads.replicate import replicate
    forked = pool.as_done

    def executor(fn, tasks, workers=None, start_method=None, should_stop=None):
        return forked(fn, tasks, workers, "fork", should_stop)  # a named start method: the executor

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        replicate(args.input, tmp / "job", args.ranks, per_host=8, straggler=args.ranks // 3, seed=1)
        variants = {"1 worker": (forked, 1), "2, ProcessPoolExecutor": (executor, 2), "2, forked": (forked, 2)}
        times = {k: [] for k in variants}
        build_index([tmp / "job"], tmp / "warm", workers=1)
        for _ in range(args.rounds):
            for name, (as_done, w) in variants.items():
                pool.as_done = as_done
                t = time.perf_counter()
                build_index([tmp / "job"], tmp / "idx", workers=w)
                times[name].append(time.perf_counter() - t)
                pool.settle()
        pool.as_done = forked
    base, best = statistics.median(times["1 worker"]), min(times["1 worker"])
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.ranks} ranks of "
          f"{args.input.name}, {args.rounds} rounds")
    for name, v in times.items():
        print(f"{name:24s} median {statistics.median(v):.3f} s, best {min(v):.3f} s; speed-up "
              f"{base / statistics.median(v):.2f}x median, {best / min(v):.2f}x best")


if __name__ == "__main__":
    main()
