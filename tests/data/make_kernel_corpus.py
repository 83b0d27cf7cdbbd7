"""List every distinct GPU activity in the peer traces, traces/ and tests/data/ for the taxonomy corpus.

    python3 tests/data/make_kernel_corpus.py > /tmp/names.tsv

Prints ``source, kind, launching op, user_triton, name`` rows read from the raw JSON (not
through tracetui's model): the launching op is the innermost ``cpu_op`` on the runtime call's
thread that encloses it; user_triton is 1 for a kernel launched by cuLaunchKernel* outside any
op. The expected class of each row in tests/data/kernel_corpus.tsv is written by hand; rerun this
to find rows to add when traces are added.
"""
from __future__ import annotations

import bisect
import gzip
import sys
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
RUNTIME = ("cuda_runtime", "cuda_driver", "runtime")


def sources(peer: bool = True) -> list[Path]:
    """The traces to list: the peer traces (fixed, read-only) unless ``peer`` is False, then ours."""
    hta = ROOT.parent / "shared" / "peer-traces" / "hta"
    return (sorted(hta.glob("*.json*")) if peer else []) + sorted((ROOT / "traces").glob("*.json.gz")) + \
        sorted((ROOT / "tests" / "data").glob("*.json.gz"))


def rows(path: Path) -> set[tuple]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        d = msgspec.json.decode(f.read())  # a plain JSON parser, several times faster than json
    evs = d["traceEvents"] if isinstance(d, dict) else d
    ops, runtime = {}, {}
    for e in evs:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            ops.setdefault((e["pid"], e["tid"]), []).append(e)
        elif e.get("cat") in RUNTIME and (e.get("args") or {}).get("correlation") is not None:
            runtime[e["args"]["correlation"]] = e
    for lst in ops.values():
        lst.sort(key=lambda e: float(e["ts"]))
    starts = {k: [float(e["ts"]) for e in v] for k, v in ops.items()}
    out = set()
    for e in evs:
        kind = KINDS.get(e.get("cat"))
        if kind is None:
            continue
        r = runtime.get((e.get("args") or {}).get("correlation"))
        op = ""
        if r is not None:
            key, ts, end = (r["pid"], r["tid"]), float(r["ts"]), float(r["ts"]) + float(r.get("dur", 0))
            lst, st = ops.get(key, []), starts.get(key, [])
            j = bisect.bisect_right(st, ts) - 1
            for k in range(j, max(j - 400, -1), -1):  # the latest-starting op that encloses the call
                if st[k] + float(lst[k].get("dur", 0)) >= end:
                    op = lst[k]["name"]
                    break
        user = int(kind == "kernel" and not op and r is not None and r["name"].startswith("cuLaunchKernel"))
        out.add((path.name.split(".")[0], kind, op, user, e["name"]))
    return out


def main() -> None:
    seen = set()
    for p in sources():
        for src, kind, op, user, name in sorted(rows(p), key=lambda r: (r[4], r[2])):
            if (kind, op, user, name) in seen:
                continue
            seen.add((kind, op, user, name))
            sys.stdout.write(f"{src}\t{kind}\t{op}\t{user}\t{name}\n")


if __name__ == "__main__":
    main()
