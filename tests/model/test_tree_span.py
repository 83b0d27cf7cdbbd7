"""Issue 36 (4): the root spans the trace and every thread spans its own events, also a thread
whose work all went under the steps (backward on autograd's thread, shown inside each step).
Before, that thread had start 0 and duration 0, and the root ran from 0: 62 days.
The reference is the raw JSON's own min(ts) and max(ts + dur)."""
from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict

import pytest

from tracetui.mcp import tools
from tracetui.model import load_trace
from tracetui.report.tree import tree_dict

from tests.conftest import DATA, TRACES

HOST = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
CASES = [DATA / "cpu_transformer_eager_rf.json.gz", TRACES / "transformer_eager_rf.json.gz",
         DATA / "cpu_transformer_eager.json.gz"]


def _raw_spans(path):
    evs = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    lo, hi, threads = float("inf"), float("-inf"), defaultdict(lambda: [float("inf"), float("-inf")])
    for e in evs:
        if e.get("ph") != "X" or e.get("cat") not in HOST | GPU:
            continue
        s, f = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        lo, hi = min(lo, s), max(hi, f)
        if e["cat"] in HOST:
            span = threads[(int(e["pid"]), int(e["tid"]))]
            span[0], span[1] = min(span[0], s), max(span[1], f)
    return lo, hi, threads


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_root_and_threads_span_their_events(path):
    lo, hi, threads = _raw_spans(path)
    doc = tree_dict(load_trace(path), 0, depth=1, keep=None)
    assert doc["start_us"] == pytest.approx(lo, abs=0.002)
    assert doc["dur_us"] == pytest.approx(hi - lo, abs=0.002)
    assert doc["dur_us"] < 10e6  # seconds, not the 5e12 µs of a span from 0
    seen = 0
    for c in doc["children"]:
        m = re.match(r"thread (\d+) .*\[.* (\d+)\]", c["name"])
        if c["kind"] != "thread" or not m:
            continue
        s, f = threads[(int(m.group(2)), int(m.group(1)))]
        assert c["start_us"] == pytest.approx(s, abs=0.002), c["name"]
        assert c["dur_us"] == pytest.approx(f - s, abs=0.002), c["name"]
        seen += 1
    assert seen == len(threads) >= 2  # the backward thread included


def test_mcp_tree_root_spans_the_trace():
    path = DATA / "cpu_transformer_eager_rf.json.gz"
    lo, hi, _ = _raw_spans(path)
    root = tools.tree(str(path), depth=0)
    node = root["rows"][0]
    assert node["dur_us"] == pytest.approx(hi - lo, abs=0.002)
