"""How much slower one process runs a load's kind of work while N others run it too (issue 39).

    python benchmarks/bench_concurrent_slowdown.py [--procs 8,16] [--events 300000]

The parallel load (read/split.py) gives each of N processes 1/N of the events; it can only
reach N times one process's speed if a process decodes its share as fast alone as with N-1
others beside it. Three kinds of work, each timed alone (best of 2) and then in N forked
processes at once: a pure-Python loop (the CPU's own speed: frequency under load), numpy
whole-array steps (memory bandwidth), and ``msgspec`` decoding a JSON array of Kineto-shaped
events (what each decode process does). Printed: the times and the per-process slowdown
(mean time at once / time alone; 1.00 = no loss). Run it on the machine whose cores you want
to count.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import msgspec
import numpy as np


def python_loop(_=None) -> float:
    t = time.perf_counter()
    s = 0
    for i in range(6_000_000):
        s += i * i % 7
    return time.perf_counter() - t


def numpy_steps(_=None) -> float:
    a = np.random.default_rng(0).integers(0, 1 << 40, 3_000_000)
    t = time.perf_counter()
    for _ in range(4):
        np.argsort(a, kind="stable")
        a[np.argsort(a)]
        np.cumsum(a)
    return time.perf_counter() - t


EVENTS = 300_000


def decode(_=None) -> float:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 300}", "pid": 1, "tid": 2, "ts": 1000 + i,
               "dur": 5, "args": {"External id": i, "Record function id": 0, "Ev Idx": i}} for i in range(EVENTS)]
    raw = msgspec.json.encode(events)
    t = time.perf_counter()
    for _ in range(3):
        msgspec.json.decode(raw)
    return time.perf_counter() - t


def main() -> None:
    global EVENTS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", default="8,16", help="process counts to run at once")
    ap.add_argument("--events", type=int, default=EVENTS, help="events in the decoded array")
    a = ap.parse_args()
    EVENTS = a.events
    ctx = mp.get_context("fork")
    print(f"{'work':14s} {'alone s':>8s} {'procs':>6s} {'mean s':>8s} {'max s':>8s} {'slowdown':>9s}")
    for name, work in (("python loop", python_loop), ("numpy steps", numpy_steps), ("msgspec decode", decode)):
        alone = min(work() for _ in range(2))
        for n in (int(x) for x in a.procs.split(",")):
            with ctx.Pool(n) as pool:
                times = pool.map(work, range(n))
            print(f"{name:14s} {alone:8.3f} {n:6d} {np.mean(times):8.3f} {max(times):8.3f} "
                  f"{np.mean(times) / alone:8.2f}x", flush=True)


if __name__ == "__main__":
    main()
