"""A reference written from the raw JSON, not through the model: torch's CPU tree
(``EventList._populate_cpu_children``: per thread, by start then longest first, a stack of open
events; an event that ends after the top of the stack does not nest in it) and, per host event,
its children's summed time and the union of their intervals.
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

HOST_CATS = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}


def host_events(path: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(Path(path).read_bytes()))
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in HOST_CATS:
            s = round(float(e["ts"]) * 1000)
            out.append({"name": e["name"], "thread": (e["pid"], e["tid"]), "start": s,
                        "end": s + round(float(e.get("dur", 0)) * 1000), "kids": []})
    return out


def torch_tree(events: list[dict]) -> list[dict]:
    """Fills each event's ``kids`` as torch's stack does."""
    by_thread = defaultdict(list)
    for e in events:
        by_thread[e["thread"]].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["start"], -e["end"]))
        stack: list[dict] = []
        for e in evs:
            while stack and (e["start"] >= stack[-1]["end"] or e["end"] > stack[-1]["end"]):
                stack.pop()
            if stack:
                stack[-1]["kids"].append(e)
            stack.append(e)
    return events


def union(intervals: list[tuple[int, int]]) -> int:
    covered, reach = 0, None
    for a, b in sorted(intervals):
        if reach is None or a >= reach:
            covered, reach = covered + b - a, b
        elif b > reach:
            covered, reach = covered + b - reach, b
    return covered


def self_times(path: Path) -> dict[str, dict[str, float]]:
    """Per name (µs): ``torch`` (duration less every child's duration, key_averages()'s rule),
    ``covered`` (duration less the union of the children's intervals) and ``overlap`` (the
    difference: children's time counted twice)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"torch": 0.0, "covered": 0.0, "overlap": 0.0})
    for e in torch_tree(host_events(path)):
        dur = e["end"] - e["start"]
        summed = sum(k["end"] - k["start"] for k in e["kids"])
        cov = union([(k["start"], k["end"]) for k in e["kids"]])
        row = out[e["name"]]
        row["torch"] += (dur - summed) / 1e3
        row["covered"] += (dur - cov) / 1e3
        row["overlap"] += (summed - cov) / 1e3
    return dict(out)
