"""Load-time benchmark: tracetui's load+link over the time to merely gunzip+parse the same file.

    python benchmarks/bench_load.py [--events 270000] [--src traces/mlp_eager.json.gz] [--input FILE]

Contenders run interleaved (orjson, tracetui, orjson, ...) so a drift in the machine's speed hits
both; the ratio is reported per round and for the best of each. On a large file tracetui decodes
in two processes: its peak RSS is given for the main process and for the helper it forked.

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
from benchmarks.bytecode import compile_package, uncompile_package  # noqa: E402

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
import resource
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the split's helper, if any
split = sys.modules.get("tracetui.read.split")
print(json.dumps({"seconds": dt, "rss_mb": int(hwm) / 1024, "child_rss_mb": child_kb / 1024, "n": n,
                  "child_private_mb": split.TIMES.get("child private MB", -1) if split and child_kb else -1,
                  "timings": getattr(locals().get("t"), "timings", None)}))
"""


def once(path: Path, what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), what], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    return json.loads(out)


def interleaved(path: Path, repeat: int) -> tuple[dict, dict, list[float]]:
    """Best orjson run, best tracetui run, and tracetui/orjson per round."""
    base = ours = None
    ratios = []
    for _ in range(repeat):
        b, o = once(path, "orjson"), once(path, "tracetui")
        ratios.append(o["seconds"] / b["seconds"])
        base = b if base is None or b["seconds"] < base["seconds"] else base
        ours = o if ours is None or o["seconds"] < ours["seconds"] else ours
    return base, ours, ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--src", type=Path, default=ROOT / "traces" / "mlp_eager.json.gz")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gzip", action="store_true", help="benchmark the .json.gz form")
    ap.add_argument("--input", type=Path, help="an existing trace file instead of generating one")
    ap.add_argument("--no-json", action="store_true", help="skip the stdlib json contender (slow on 1 GB)")
    ap.add_argument("--cold", action="store_true",
                    help="remove tracetui's bytecode first (this VM's PYTHONDONTWRITEBYTECODE=1 then recompiles it in every child)")
    args = ap.parse_args()
    # the import of tracetui.model is inside the timed part, as orjson's is
    (uncompile_package if args.cold else compile_package)(str(ROOT))
    print("tracetui's bytecode removed: compiled in every child (--cold)" if args.cold else
          "tracetui byte-compiled first, as a Python writing bytecode has it after one run (--cold: not)")
    with tempfile.TemporaryDirectory() as tmp:
        if args.input:
            path = args.input
        else:
            path = Path(tmp) / ("big.json.gz" if args.gzip else "big.json")
            # generate in a child so this process stays small (peak RSS is read per child)
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"), str(args.src),
                            str(path), "--events", str(args.events)], check=True, capture_output=True)
        size = path.stat().st_size / 1e6
        base, ours, ratios = interleaved(path, args.repeat)
        std = None if args.no_json else once(path, "json")
        n = ours["n"]
    print(f"input: {n:,} complete events, {size:.1f} MB{' gz' if path.suffix == '.gz' else ''} "
          f"({path.name if args.input else 'replicated from ' + args.src.name})")
    print(f"gunzip+orjson.loads : {base['seconds']:.3f} s  peak RSS {base['rss_mb']:.0f} MB")
    if std:
        print(f"gunzip+json.loads   : {std['seconds']:.3f} s  peak RSS {std['rss_mb']:.0f} MB")
    helper = f" + helper {ours['child_rss_mb']:.0f} MB" if ours["child_rss_mb"] > 1 else ""
    if helper and ours["child_private_mb"] >= 0:  # the rest of the helper's RSS is the main process's pages
        helper += (f" (of which {ours['child_private_mb']:.0f} MB its own: together at most "
                   f"{ours['rss_mb'] + ours['child_private_mb']:.0f} MB)")
    print(f"tracetui load+link  : {ours['seconds']:.3f} s  peak RSS {ours['rss_mb']:.0f} MB{helper}  "
          f"stages {ours['timings'] and {k: round(v, 3) for k, v in ours['timings'].items()}}")
    print(f"ratio tracetui / orjson parse: best {ours['seconds'] / base['seconds']:.2f}, "
          f"per round {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
