"""Make a large trace from real events: replicate a recorded trace with shifted ids and timestamps.

    python benchmarks/make_large_trace.py SRC OUT --events 270000 [--layout kineto|line]

Each copy shifts ``ts`` past the previous copy and offsets every id that links events
(External id, correlation, Python ids, flow ids, Sequence number), so the copies link like the
original does. Nothing here is committed output: benchmarks generate their input.
"""
from __future__ import annotations

import argparse
import gzip
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


def replicate(src: Path, out: Path, events: int, layout: str = "kineto") -> int:
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
    outev = list(meta)
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
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    pass
                e2["args"] = a
            if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{c * 1000 + int(e2['name'][13:] or 0)}"
            outev.append(e2)
            if len(outev) - len(meta) >= events:
                break
        if len(outev) - len(meta) >= events:
            break
    doc["traceEvents"] = outev
    write = LAYOUTS[layout]
    data = b"{\n" + b",\n".join(
        orjson.dumps(k) + b": " + (b"[\n" + b",\n".join(write(e) for e in v) + b"\n]" if k == "traceEvents"
                                    else orjson.dumps(v)) for k, v in doc.items()) + b"\n}\n"
    if str(out).endswith(".gz"):
        data = gzip.compress(data, compresslevel=1)
    Path(out).write_bytes(data)
    return len(outev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, default=270_000)
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="kineto")
    a = ap.parse_args()
    n = replicate(a.src, a.out, a.events, a.layout)
    print(f"{a.out}: {n:,} events, {a.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
