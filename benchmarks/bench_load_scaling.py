"""Load scaling with decode processes: a ~1 GB trace loaded with 1, 2, 4, 8 workers (issue 39.1).

    python benchmarks/bench_load_scaling.py [--gb 1.0] [--workers 1,2,4,8] [--repeat 2] [--input FILE]
    python benchmarks/bench_load_scaling.py --input FILE --ab OTHER_CHECKOUT --workers 1,2 --repeat 1

Generates the trace (benchmarks/make_large_trace.py, from HTA's control trace where
../shared/peer-traces is present, else traces/transformer_eager.json.gz) unless --input names
one. Each contender is a fresh process, run interleaved round by round: ``orjson`` (read the
bytes and ``orjson.loads`` them: the baseline), then ``load_trace(FILE, workers=N, cache=False)``
for each N. While a contender runs, this process samples its whole process tree (the decode
helpers it forks included) every 50 ms: the peak of the summed RSS, and of the summed PSS
(shared pages split between the processes that map them: the honest total for forked helpers),
each with the machine's shared memory that grew meanwhile and no process maps (a helper's
result in an in-memory file, before this process maps it: read/forked.py).

Printed: per round, each contender's seconds, peak summed RSS and PSS, and load_trace's stages
(import, read, decode+index, link, tree+rollup+windows: the last two run in the parent, their
independent parts side by side in threads, read/together.py; before 2026-12-06 11:30 UTC the
display tree's CSR and depths were in "link" and the last stage was "rollup+windows"); then the best
seconds per contender, ratio to orjson.loads and to 1 worker (same run), peak memory and MiB per
MB of JSON. Needs only Python 3.11+, numpy, msgspec and orjson (no Textual, no peer traces).
On a 2-core VM the 1 GB trace takes ~1.7 min to make and ~25 s per 1-worker load; on 16 cores
the default run (1,2,4,8 workers, 2 rounds) should take a few minutes. Run it on the machine whose cores you want to count.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
path, what = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if what == "summary":
    import contextlib, io
    from tracetui.cli.main import main
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["summary", path, "--no-cache"])
    assert rc in (0, None), rc
    n = -1
elif what == "orjson":
    import gzip, orjson
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    n = len(orjson.loads(raw)["traceEvents"])
else:
    from tracetui.model import load_trace
    t1 = time.perf_counter()
    t = load_trace(path, workers=int(what), cache=False)
    n = len(t.store)
    stages = {"import": t1 - t0, **{k.split(" (")[0]: v for k, v in t.timings.items()}}
    from tracetui.read import split
    if split.TIMES.get("processes", 1) > 1:  # inside decode+index: this process's own part, the slowest helper's
        stages["(own part"] = split.TIMES.get("parent decode", 0) + split.TIMES.get("parent index", 0)
        if "slowest child s" in split.TIMES:
            stages["slowest helper)"] = split.TIMES["slowest child s"]
print(json.dumps({"seconds": time.perf_counter() - t0, "n": n, **({"stages": stages} if what.isdigit() else {})}))
"""


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _mem_kb(pid: int) -> tuple[int, int, int]:
    """(RSS, PSS, the part of PSS in shared memory) of one process in KiB; zeros once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            rss = pss = shm = 0
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Pss_Shmem:"):
                    shm = int(line.split()[1])
            return rss, pss, shm
    except (OSError, ValueError):
        return 0, 0, 0


def _shmem_kb() -> int:
    """The machine's shared memory in KiB (/proc/meminfo): a helper's result written to an
    in-memory file (read/forked.py) is there, and in no process's PSS until the parent maps it."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("Shmem:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run(path: Path, what: str, root: Path = ROOT) -> dict:
    """One contender in a fresh process, with the tracetui of the checkout ``root``."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(path), what], cwd=root, stdout=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(root)})
    peak = [0, 0]
    done = threading.Event()
    shmem0 = _shmem_kb()

    def sample() -> None:
        while not done.is_set():
            rss = pss = mapped_shm = 0
            for q in _tree(p.pid):
                r, s, m = _mem_kb(q)
                rss, pss, mapped_shm = rss + r, pss + s, mapped_shm + m
            unmapped = max(0, _shmem_kb() - shmem0 - mapped_shm)  # written by a helper, not mapped yet
            peak[0], peak[1] = max(peak[0], rss + unmapped), max(peak[1], pss + unmapped)
            done.wait(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out = p.communicate()[0]
    done.set()
    th.join()
    if p.returncode:
        raise SystemExit(f"{what}: exit {p.returncode}")
    got = json.loads(out)
    got.update(rss_mb=peak[0] / 1024, pss_mb=peak[1] / 1024)
    return got


def make(out: Path, gb: float) -> Path:
    peer = ROOT.parent / "shared/peer-traces/hta/trace_diff_control_control.json.gz"
    src = peer if peer.exists() else ROOT / "traces/transformer_eager.json.gz"
    per_event = 349 if peer.exists() else 318  # bytes per event of each source's Kineto-laid-out replica
    events = int(gb * 1e9 / per_event)
    subprocess.run([sys.executable, str(ROOT / "benchmarks/make_large_trace.py"), str(src), str(out),
                    "--events", str(events)], check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gb", type=float, default=1.0, help="size of the generated trace")
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--input", type=Path, help="an existing trace instead of generating one")
    ap.add_argument("--summary", action="store_true", help="also time `tracetui summary` (default workers)")
    ap.add_argument("--no-orjson", action="store_true", help="leave out the orjson baseline (for a trace "
                    "whose orjson.loads would not fit in memory: ratios are then left out too)")
    ap.add_argument("--ab", type=Path, metavar="CHECKOUT", help="A/B instead: each worker count run from "
                    "CHECKOUT's tracetui and from this one's, interleaved, --repeat rounds (memory and seconds)")
    a = ap.parse_args()
    if a.ab:
        return ab(a)
    counts = [int(w) for w in a.workers.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        path = a.input or make(Path(tmp) / "big.json", a.gb)
        mb = path.stat().st_size / 1e6
        print(f"input: {path} ({mb:,.1f} MB)")
        best: dict[str, dict] = {}
        for r in range(a.repeat):
            for what in ["orjson"] * (not a.no_orjson) + [str(w) for w in counts] + ["summary"] * a.summary:
                got = run(path, what)
                stages = "  ".join(f"{k} {v:.2f}" for k, v in got.get("stages", {}).items())
                print(f"round {r + 1} {what:>6}: {got['seconds']:6.2f} s  peak RSS sum {got['rss_mb']:7.0f} MB  "
                      f"PSS sum {got['pss_mb']:7.0f} MB  {stages}", flush=True)
                if what not in best or got["seconds"] < best[what]["seconds"]:
                    best[what] = got
        base, one = best.get("orjson", {}).get("seconds", float("nan")), best[str(counts[0])]["seconds"]
        print(f"\nbest of {a.repeat}: {mb:,.1f} MB, {best[str(counts[0])]['n']:,} events")
        print("contender   seconds  vs orjson.loads  speed-up vs 1st  peak PSS sum MB  MiB per MB")
        for what, got in best.items():
            s = got["seconds"]
            print(f"{what:>9} {s:9.2f} {s / base:16.3f} {one / s:16.2f} {got['pss_mb']:16.0f} "
                  f"{got['pss_mb'] / mb:11.2f}")


def ab(a) -> None:
    """Each worker count from ``a.ab``'s checkout and from this one, interleaved, on ``a.input``."""
    mb = a.input.stat().st_size / 1e6
    print(f"input: {a.input} ({mb:,.1f} MB); A = {a.ab}, B = {ROOT}")
    for r in range(a.repeat):
        for w in a.workers.split(","):
            for name, root in (("A", a.ab), ("B", ROOT)):
                got = run(a.input, w, root)
                stages = "  ".join(f"{k} {v:.2f}" for k, v in got.get("stages", {}).items())
                print(f"round {r + 1} {name} workers {w}: {got['seconds']:7.2f} s  RSS sum {got['rss_mb']:6.0f} MB  "
                      f"PSS sum {got['pss_mb']:6.0f} MB  {got['pss_mb'] / mb:.2f} MiB/MB  {stages}", flush=True)


if __name__ == "__main__":
    main()
