"""Load-time benchmark: tracetui's load+link over the time to merely gunzip+parse the same file.

    python benchmarks/bench_load.py [--events 270000] [--src traces/mlp_eager.json.gz]

The input is generated from a real recording (benchmarks/make_large_trace.py), never committed.
Peak RSS is measured in a fresh subprocess per contender so one does not inherit the other's heap.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import gc, json, resource, sys, time, gzip
path, what = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if what in ("orjson", "json"):
    loads = __import__(what).loads
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = loads(raw)
    n = len(doc["traceEvents"])
else:
    from tracetui.model import load_trace
    t = load_trace(path)
    n = len(t.store)
    t.op_table, t.kernel_table  # tables the first screen shows
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "rss_mb": int(hwm) / 1024, "n": n,
                  "timings": getattr(locals().get("t"), "timings", None)}))
"""


def measure(path: Path, what: str, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), what], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout
        r = json.loads(out)
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", type=Path, default=ROOT / "traces" / "mlp_eager.json.gz")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gzip", action="store_true", help="benchmark the .json.gz form")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("big.json.gz" if args.gzip else "big.json")
        # generate in a child so this process stays small (peak RSS is read per child)
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"), str(args.src), str(path),
                        "--events", str(args.events)], check=True, capture_output=True)
        n = args.events
        size = path.stat().st_size / 1e6
        base = measure(path, "orjson", args.repeat)
        ours = measure(path, "tracetui", args.repeat)
        std = measure(path, "json", 1)
    print(f"input: {n:,} events, {size:.1f} MB{' gz' if args.gzip else ''} (replicated from {args.src.name})")
    print(f"gunzip+orjson.loads : {base['seconds']:.3f} s  peak RSS {base['rss_mb']:.0f} MB")
    print(f"gunzip+json.loads   : {std['seconds']:.3f} s  peak RSS {std['rss_mb']:.0f} MB")
    print(f"tracetui load+link  : {ours['seconds']:.3f} s  peak RSS {ours['rss_mb']:.0f} MB  "
          f"stages {ours['timings'] and {k: round(v, 3) for k, v in ours['timings'].items()}}")
    print(f"ratio tracetui / orjson parse: {ours['seconds'] / base['seconds']:.2f}")


if __name__ == "__main__":
    main()
