"""Tolerant-path benchmark: decoding a damaged trace over decoding the same trace undamaged.

    python benchmarks/bench_repair.py [--events 60000 240000] [--rounds 3]
    python benchmarks/bench_repair.py --quadratic [--tree OTHER_CHECKOUT]

For each size, the same real events (benchmarks/make_large_trace.py, json.dumps's one-line
layout: the layout issue 21's quadratic repair was measured on) are decoded clean and with one
kind of damage: one unescaped quote in a name in the middle, a raw control character in every
100th event, the file cut at two thirds. Contenders run interleaved per round; the best time of
each (CPU seconds of this single-threaded decode) is reported with its ratio to the clean decode
of the same size, and the ratio between the two sizes shows the repair staying linear.
"""
from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.make_large_trace import replicate  # noqa: E402
from tracetui.read.load import LoadReport, decode  # noqa: E402

def _one_quote(raw: bytes) -> bytes:
    """An unescaped quote pair in one name, in the middle of the file."""
    i = raw.index(b'"aten::gelu"', len(raw) // 2)
    return raw[:i] + b'"aten::gelu "x" y"' + raw[i + len(b'"aten::gelu"'):]


DAMAGE = {
    "clean": lambda raw: raw,
    "one quote": _one_quote,
    "ctrl every 100th": lambda raw: re.sub(rb'("External id":\s*\d*00)\b', lambda m: m.group(1) + b', "n": "\x01"', raw),
    "cut at 2/3": lambda raw: raw[: len(raw) * 2 // 3],
}


TIME_LOAD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tracetui.model import load_trace
t0, c0 = time.perf_counter(), time.process_time()
t = load_trace(sys.argv[2])
print(f"{sys.argv[1]}: {len(t.store):,} events, {time.perf_counter() - t0:.3f} s wall, "
      f"{time.process_time() - c0:.3f} s CPU, {t.report.repairs}")
"""


def quadratic(trees: list[str]) -> None:
    """Issue 21's quadratic case: a 542 KB one-line file with no ", " after a name (separators
    "," and ": ") and one invalid byte, loaded by this checkout and by each of ``trees``."""
    evs = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
            "args": {"External id": i}} for i in range(4400)]
    raw = json.dumps({"traceEvents": evs}, separators=(",", ": ")).encode()
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "one_line.json"
        p.write_bytes(raw.replace(b'"aten::op2000"', b'"aten::op2000\xff"'))
        print(f"{p.stat().st_size:,} bytes")
        for tree in [str(ROOT)] + trees:
            subprocess.run([sys.executable, "-c", TIME_LOAD, tree, str(p)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, nargs="+", default=[60_000, 240_000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quadratic", action="store_true", help="time issue 21's quadratic case instead")
    ap.add_argument("--tree", action="append", default=[], help="another checkout to time it with")
    a = ap.parse_args()
    if a.quadratic:
        quadratic(a.tree)
        return
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.events:
            src = Path(tmp) / f"t{n}.json"
            replicate(ROOT / "traces" / "mlp_eager.json.gz", src, n, layout="line")
            raw = src.read_bytes()
            inputs = {k: f(raw) for k, f in DAMAGE.items()}
            best = {k: float("inf") for k in inputs}
            notes = {}
            for _ in range(a.rounds):
                for k, data in inputs.items():
                    rep = LoadReport()
                    gc.collect()
                    gc.disable()  # as load_trace does: the decode allocates millions of objects, no cycles
                    t0 = time.process_time()  # CPU time: one thread, steadier than wall time on a shared machine
                    doc, _ = decode(src, data, rep)
                    best[k] = min(best[k], time.process_time() - t0)
                    gc.enable()
                    notes[k] = (len(doc.traceEvents), rep.repairs)
            mb = len(raw) / 1e6
            for k in inputs:
                rows[(n, k)] = best[k]
                print(f"{n:>8,} events {mb:7.1f} MB  {k:18s} {best[k]:7.3f} s  {best[k] / best['clean']:5.2f}x clean"
                      f"  {mb / best[k]:6.1f} MB/s  kept {notes[k][0]:,}  {'; '.join(notes[k][1])[:90]}")
    if len(a.events) == 2:
        lo, hi = a.events
        print(f"\nscaling {hi / lo:.1f}x the events:")
        for k in DAMAGE:
            print(f"  {k:18s} {rows[(hi, k)] / rows[(lo, k)]:5.2f}x the time")


if __name__ == "__main__":
    main()
