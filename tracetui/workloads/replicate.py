"""Replicate one rank's trace into N ranks of a job: shifted clocks and a planted straggler.

For scale tests and benchmarks without a cluster. Every collective of the source rank (its
``gloo:*``/``nccl:*`` annotations when it has no communication kernels, else its NCCL kernels)
is re-timed per rank: rank r arrives at ``start + jitter`` (``+ delay`` on the straggler), every
rank finishes at the latest arrival plus the source's duration, so the collective ends together
on every rank as a real one does. Then each host's clock is shifted by its own offset (ranks
``per_host`` at a time share a host and its clock). Needs no torch: the JSON is edited directly.
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import orjson

COLLECTIVE = re.compile(r"^(gloo|nccl|ucc|mpi|xccl):\w+")


def _is_collective(e: dict, kernels: bool) -> bool:
    if kernels:
        return e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()
    return e.get("cat") == "user_annotation" and bool(COLLECTIVE.match(e.get("name", "")))


def _us(ns: int) -> float:
    return ns / 1000.0


def replicate(src, out_dir, n: int, per_host: int = 1, straggler: int | None = None, delay_ns: int = 200_000,
              jitter_ns: int = 2_000, max_offset_ns: int = 50_000_000, seed: int = 0, gz: bool = False) -> dict:
    """Write ``n`` rank files into ``out_dir`` and return the truth they were made with:
    ``{"files", "host_offsets_ns": {host: ns}, "offsets_ns": {rank: ns}, "straggler", "arrivals_ns":
    [per collective, per rank], "ends_ns": [per collective]}`` (times before the clock shift)."""
    raw = Path(src).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    events = doc["traceEvents"]
    kernels = any(_is_collective(e, True) for e in events if isinstance(e, dict))
    coll = sorted((i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "X"
                   and _is_collective(e, kernels)), key=lambda i: events[i]["ts"])
    rng = np.random.default_rng(seed)
    n_hosts = (n + per_host - 1) // per_host
    host_off = [0] + [int(x) for x in rng.integers(-max_offset_ns, max_offset_ns, size=n_hosts - 1)]
    starts = np.array([round(events[i]["ts"] * 1000) for i in coll], dtype=np.int64)
    durs = np.array([round(events[i].get("dur", 0) * 1000) for i in coll], dtype=np.int64)
    arrive = starts[:, None] + rng.integers(0, jitter_ns + 1, size=(len(coll), n))
    if straggler is not None:
        arrive[:, straggler] += delay_ns
    ends = arrive.max(axis=1) + durs
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files, offsets = [], {}
    coll_pos = {i: j for j, i in enumerate(coll)}
    for r in range(n):
        host = r // per_host
        off = host_off[host]
        offsets[r] = off
        evs = []
        for i, e in enumerate(events):
            if not isinstance(e, dict) or "ts" not in e or not isinstance(e["ts"], (int, float)):
                evs.append(e)
                continue
            e2 = dict(e)
            j = coll_pos.get(i)
            if j is not None:
                e2["ts"] = _us(int(arrive[j, r]) + off)
                e2["dur"] = _us(int(ends[j] - arrive[j, r]))
            else:
                e2["ts"] = _us(round(e["ts"] * 1000) + off)
            evs.append(e2)
        d = {k: v for k, v in doc.items() if k != "traceEvents"}
        di = dict(d.get("distributedInfo") or {"backend": "gloo"})
        di.update(rank=r, world_size=n)
        if isinstance(di.get("pg_config"), list):  # the default group spans the new world, not the source's
            di["pg_config"] = [dict(g, pg_size=n, ranks=list(range(n))) if isinstance(g, dict)
                               and g.get("pg_desc") == "default_pg" else g for g in di["pg_config"]]
        d["distributedInfo"] = di
        d["host_name"] = f"node{host}"
        d["traceEvents"] = evs
        name = f"gen_rank-{r}.pt.trace.json" + (".gz" if gz else "")
        data = orjson.dumps(d)
        p = out / name
        p.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
        files.append(p)
    return {"files": files, "host_offsets_ns": {f"node{h}": o for h, o in enumerate(host_off)},
            "offsets_ns": offsets, "straggler": straggler, "arrivals_ns": arrive.tolist(), "ends_ns": ends.tolist()}


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--per-host", type=int, default=1)
    ap.add_argument("--straggler", type=int, default=None)
    a = ap.parse_args()
    t = replicate(a.src, a.out, a.n, per_host=a.per_host, straggler=a.straggler)
    print(f"{len(t['files'])} ranks in {a.out}; straggler {t['straggler']}")
