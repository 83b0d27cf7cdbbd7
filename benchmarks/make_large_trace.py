"""Make a large trace from real events: replicate a recorded trace with shifted ids and timestamps.

    python benchmarks/make_large_trace.py SRC OUT --events 270000 [--layout kineto|line] [--script-frame]

Each copy shifts ``ts`` past the previous copy and offsets every id that links events
(External id, correlation, Python ids, flow ids, Sequence number), so the copies link like the
original does. Nothing here is committed output: benchmarks generate their input.
"""
from __future__ import annotations

import argparse
import gzip
from itertools import chain
from pathlib import Path

import orjson

ID_ARGS = ("External id", "correlation", "Python id", "Python parent id", "Sequence number", "Ev Idx")


def _kineto_event(e: dict) -> bytes:
    """One event laid out as Kineto's exporter writes it: indented, several lines, the args one
    per line; real files carry that whitespace (HTA's control trace: 319 bytes per event)."""
    d = orjson.dumps
    head = [k for k in ("ph", "cat", "name", "pid", "tid") if k in e]
    times = [k for k in ("ts", "dur") if k in e]
    rest = [k for k in e if k not in head and k not in times and k != "args"]
    lines = [", ".join(d(k).decode() + ": " + d(e[k]).decode() for k in ks) for ks in (head, times, rest) if ks]
    text = "  {\n    " + ",\n    ".join(lines)
    args = e.get("args")
    if isinstance(args, dict):
        body = ",\n".join("      " + d(k).decode() + ": " + d(v).decode() for k, v in args.items())
        text += ",\n    \"args\": {\n" + body + "\n    }"
    return (text + "\n  }").encode()


LAYOUTS = {"kineto": _kineto_event, "line": orjson.dumps}
"""How each event is written: as Kineto does (the default), or one compact line per event (the
layout of the benchmark files before 2026-12-04, ~15% smaller for the same events)."""


def replicate(src: Path, out: Path, events: int, layout: str = "kineto", script_frame: bool = False) -> int:
    """Write ``events`` events of ``src``'s copies to ``out``; with ``script_frame``, each host
    thread also gets one Python frame open from its first copy to its last, as a ``with_stack``
    recording has for the script (its thread's stack is then never empty)."""
    raw = Path(src).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    evs = doc["traceEvents"]
    meta = [e for e in evs if e.get("ph") == "M"]
    body = [e for e in evs if e.get("ph") != "M"]
    ts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts)) + 10.0
    id_max = 1
    for e in body:
        a = e.get("args") or {}
        for k in ID_ARGS:
            if isinstance(a.get(k), int):
                id_max = max(id_max, a[k])
        if isinstance(e.get("id"), int):
            id_max = max(id_max, e["id"])
    stride = id_max + 1
    copies = max(1, -(-events // max(1, len(body))))
    if script_frame:
        meta = meta + _script_frames(body, min(ts) - 1, copies * span + 2)
    write = LAYOUTS[layout]
    opener = (lambda: gzip.open(out, "wb", compresslevel=1)) if str(out).endswith(".gz") else (lambda: open(out, "wb"))
    n = 0
    with opener() as f:  # written as it is made: a 4 GB trace needs no 4 GB (nor its dicts) in memory
        f.write(b"{\n")
        for i, (k, v) in enumerate(doc.items()):
            f.write((b",\n" if i else b"") + orjson.dumps(k) + b": ")
            if k != "traceEvents":
                f.write(orjson.dumps(v))
                continue
            f.write(b"[\n")
            n = _write_events(f, write, meta, _copies(body, copies, events, span, stride))
            f.write(b"\n]")
        f.write(b"\n}\n")
    return n


def _copies(body: list, copies: int, events: int, span: float, stride: int):
    """The replicated events, one at a time: ``events`` of them, copy after copy."""
    n = 0
    for c in range(copies):
        for e in body:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e2["ts"] + c * span, 3)
            if isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + c * stride
            a = e2.get("args")
            if a:
                a = dict(a)
                for k in ID_ARGS:
                    if isinstance(a.get(k), int):
                        a[k] = a[k] + c * stride
                e2["args"] = a
            if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{c * 1000 + int(e2['name'][13:] or 0)}"
            yield e2
            n += 1
            if n >= events:
                return


def _script_frames(body: list, ts: float, dur: float) -> list:
    """One ``python_function`` frame per thread with ops, from ``ts`` for ``dur`` µs."""
    threads = dict.fromkeys((e["pid"], e["tid"]) for e in body if e.get("cat") == "cpu_op" and "pid" in e and "tid" in e)
    return [{"ph": "X", "cat": "python_function", "name": "train.py(1): <module>", "pid": pid, "tid": tid,
             "ts": ts, "dur": dur, "args": {"Python id": 0, "Python thread": 0}} for pid, tid in threads]


def _write_events(f, write, meta: list, body) -> int:
    """Write the events separated as before (",\n"), in blocks; returns how many."""
    n, block = 0, []
    for e in chain(meta, body):
        block.append(write(e))
        n += 1
        if len(block) >= 4096:
            f.write((b",\n" if n > len(block) else b"") + b",\n".join(block))
            block = []
    if block:
        f.write((b",\n" if n > len(block) else b"") + b",\n".join(block))
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="kineto")
    ap.add_argument("--script-frame", action="store_true",
                    help="each host thread's events inside one frame from start to end (a with_stack recording)")
    a = ap.parse_args()
    n = replicate(a.src, a.out, a.events, a.layout, a.script_frame)
    print(f"{a.out}: {n:,} events, {a.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
