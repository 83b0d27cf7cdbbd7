"""The long fuzz run (issue 35): N mutations of real recordings, each through load, summary, tree,
diff (against a clean trace, the fuzzed one on either side) and the memory model; counts crashes (anything but a
one-line TraceError) and hangs (a case over --limit seconds), each with its input kept.

    nice -n 10 python benchmarks/fuzz_long.py --n 100000 --workers 2 --out /tmp/fuzz

Mutations: the byte-level ones of tests/test_fuzz.py (flip, delete, insert a JSON token, cut,
duplicate), sometimes behind gzip, and structure-aware ones on the decoded document (a field
set to a hostile value: ids and tids past 64 bits, huge and odd times, non-ASCII and invalid
UTF-8 time strings, events duplicated onto other threads, deep nesting, many steps).
"""
from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOSTILE = [None, True, -1, 0, 2 ** 63, 2 ** 64, -(2 ** 64), 1e308, -1e308, 1.5, "1712195496004644.183",
           "١٢٣", "x", "", [], {}, [[1, 2]], 10 ** 30, 1712195496004644.5, -0.0]


class Hang(BaseException):
    pass


def _alarm(*_):
    raise Hang()


def _structural(rng: random.Random, doc: dict) -> dict:
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    if not evs:
        return doc
    op = rng.randrange(6)
    e = rng.choice(evs)
    if not isinstance(e, dict):
        return doc
    if op == 0:  # a field set to a hostile value
        e[rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "id"])] = rng.choice(HOSTILE)
    elif op == 1:  # a link id set to a hostile value
        e.setdefault("args", {})[rng.choice(["correlation", "External id", "Sequence number", "Fwd thread id",
                                             "stream", "Input Dims", "Bytes", "Total Allocated"])] = rng.choice(HOSTILE)
    elif op == 2:  # the same event on other threads (a step: two identical steps made a parent cycle)
        for tid in rng.sample([1, 2, 2 ** 64, -1, "x"], 2):
            evs.append(dict(e, tid=tid))
    elif op == 3:  # a run of nested copies
        base = e.get("ts", 0) if isinstance(e.get("ts"), (int, float)) else 0
        evs.extend(dict(e, ts=base + i, dur=2 * 400 - 2 * i) for i in range(rng.randint(2, 400)))
    elif op == 4:  # many steps
        evs.extend({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": e.get("pid", 1),
                    "tid": e.get("tid", 1), "ts": i * 10, "dur": rng.choice([5, 10, 15])} for i in range(rng.randint(2, 500)))
    else:  # a [memory] instant with odd args
        evs.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                    "ts": rng.choice(HOSTILE + [e.get("ts", 0)]),
                    "args": {"Bytes": rng.choice(HOSTILE), "Total Allocated": rng.choice(HOSTILE),
                             "Addr": rng.choice(HOSTILE), "Device Type": rng.choice([0, 1, "x"])}})
    return doc


def _case(rng: random.Random, seeds: list[bytes], docs: list) -> tuple[bytes, str]:
    from tests.test_fuzz import _TOKENS, mutate
    if rng.random() < 0.4:
        doc = json.loads(json.dumps(rng.choice(docs)))
        for _ in range(rng.randint(1, 3)):
            doc = _structural(rng, doc)
        data = json.dumps(doc).encode()
        if rng.random() < 0.3:
            data = data.replace(b'"x"', b'"\xff\xfe"', 1)
    else:
        ops = [(rng.choice(["flip", "delete", "insert", "cut", "duplicate"]), rng.random(), rng.randint(1, 64),
                rng.choice(_TOKENS), rng.randrange(256)) for _ in range(rng.randint(1, 4))]
        data = mutate(rng.choice(seeds), ops)
    if rng.random() < 0.2:
        z = gzip.compress(data, compresslevel=1)
        return (z[: max(20, int(len(z) * rng.uniform(0.5, 1)))] if rng.random() < 0.3 else z), "f.json.gz"
    return data, "f.json"


def _exercise(path: Path, ref) -> None:
    from tracetui.compare.diff import diff_dict, diff_traces
    from tracetui.model import TraceError, load_trace
    from tracetui.report.summary import summary_dict
    from tracetui.report.tree import tree_dict
    try:
        t = load_trace(path)
    except TraceError as e:
        if "\n" in str(e):
            raise AssertionError(f"a TraceError of more than one line: {e!r}") from None
        return
    json.dumps(summary_dict(t, top=0), default=float)
    tree_dict(t, 0, None, None)
    diff_dict(diff_traces(t, ref) if len(t.store) % 2 else diff_traces(ref, t))  # either side, by the case
    try:
        t.memory  # noqa: B018
    except TraceError:
        pass


def worker(args) -> dict:
    wid, n, seed, limit, out = args
    from tests.test_fuzz import SEEDS, _DOCS
    from tracetui.model import load_trace
    rng = random.Random(seed)
    d = Path(tempfile.mkdtemp(prefix=f"fuzz{wid}-"))
    (d / "ref.json").write_bytes(SEEDS[4])
    ref = load_trace(d / "ref.json")
    signal.signal(signal.SIGALRM, _alarm)
    stats = {"cases": 0, "traceerror_or_ok": 0, "crashes": {}, "hangs": 0, "slowest_s": 0.0}
    for i in range(n):
        data, name = _case(rng, SEEDS, _DOCS)
        p = d / name
        p.write_bytes(data)
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            _exercise(p, ref)
            stats["traceerror_or_ok"] += 1
        except Hang:
            stats["hangs"] += 1
            (Path(out) / f"hang-{wid}-{i}-{name}").write_bytes(data)
        except BaseException as e:  # noqa: BLE001 - the finding
            tb = traceback.extract_tb(e.__traceback__)[-1]
            key = f"{type(e).__name__} at {Path(tb.filename).name}:{tb.lineno}"
            if key not in stats["crashes"]:
                (Path(out) / f"crash-{wid}-{i}-{name}").write_bytes(data)
                (Path(out) / f"crash-{wid}-{i}.txt").write_text(traceback.format_exc())
            stats["crashes"][key] = stats["crashes"].get(key, 0) + 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        stats["slowest_s"] = max(stats["slowest_s"], time.perf_counter() - t0)
        stats["cases"] += 1
        if i % 1000 == 0:
            (Path(out) / f"progress-{wid}.json").write_text(json.dumps(stats))
    (Path(out) / f"progress-{wid}.json").write_text(json.dumps(stats))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--limit", type=float, default=10.0, help="seconds a case may take before it counts as a hang")
    ap.add_argument("--out", default="/tmp/tracetui-fuzz")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.perf_counter()
    per = [a.n // a.workers + (i < a.n % a.workers) for i in range(a.workers)]
    with mp.get_context("spawn").Pool(a.workers) as pool:
        got = pool.map(worker, [(i, per[i], a.seed * 1000 + i, a.limit, a.out) for i in range(a.workers)])
    total = {"cases": sum(g["cases"] for g in got), "hangs": sum(g["hangs"] for g in got),
             "crashes": {}, "slowest_s": max(g["slowest_s"] for g in got), "wall_s": time.perf_counter() - t0}
    for g in got:
        for k, v in g["crashes"].items():
            total["crashes"][k] = total["crashes"].get(k, 0) + v
    print(json.dumps(total, indent=1))
    (Path(a.out) / "total.json").write_text(json.dumps(total))
    sys.exit(1 if total["crashes"] or total["hangs"] else 0)


if __name__ == "__main__":
    main()
