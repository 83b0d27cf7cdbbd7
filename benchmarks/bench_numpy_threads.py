"""How much numpy's whole-array operations gain from threads on this machine (read/together.py).

    python benchmarks/bench_numpy_threads.py [--n 3000000] [--threads 8]

Each operation the model's stages use is run ``threads`` times in a row, then ``threads`` times
at once in as many threads; printed: both times and their ratio (same run, same arrays). An
operation that holds the GIL shows ~1x. Run it on the machine whose cores you want to count.
"""
from __future__ import annotations

import argparse
import threading
import time

import numpy as np


def ops(n: int) -> dict:
    rng = np.random.default_rng(0)
    a, b, w = rng.integers(0, n, n), rng.integers(0, 1 << 40, n), rng.random(n)
    sb = np.sort(b[:n // 2])
    return {
        "take": lambda: b[a],
        "argsort_stable": lambda: np.argsort(b, kind="stable"),
        "argsort": lambda: np.argsort(b),
        "bincount": lambda: np.bincount(a, weights=w, minlength=n),
        "bincount_now": lambda: np.bincount(a, minlength=n),
        "add.at": lambda: np.add.at(np.zeros(n), a, w),
        "searchsorted": lambda: np.searchsorted(sb, b),
        "cumsum": lambda: np.cumsum(b),
        "where": lambda: np.where(a > 5, b, a),
        "scatter": lambda: np.put(np.zeros(n, dtype=np.int64), a, b),
        "setitem": lambda: np.zeros(n, dtype=np.int64).__setitem__(a, b),
        "nonzero": lambda: np.nonzero(a > n // 2),
        "isin": lambda: np.isin(a, [1, 2, 3, 4]),
        "maxacc": lambda: np.maximum.accumulate(b),
        "reduceat": lambda: np.add.reduceat(b, np.arange(0, n, 3)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3_000_000)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    k = a.threads
    for name, f in ops(a.n).items():
        f()  # warm
        t = time.perf_counter()
        for _ in range(k):
            f()
        serial = time.perf_counter() - t
        ts = [threading.Thread(target=f) for _ in range(k)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        together = time.perf_counter() - t
        print(f"{name:15s} {k} in a row {serial * 1e3:7.1f} ms  {k} threads {together * 1e3:7.1f} ms  "
              f"speed-up {serial / together:.2f}")


if __name__ == "__main__":
    main()
