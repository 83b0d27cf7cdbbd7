"""Tolerant-path benchmark: decoding a damaged trace over decoding the same trace undamaged.

    python benchmarks/bench_repair.py [--events 60000 240000] [--rounds 3]

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
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.make_large_trace import replicate  # noqa: E402
from tracetui.model.load import LoadReport, decode  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, nargs="+", default=[60_000, 240_000])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
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
