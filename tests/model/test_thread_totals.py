"""Issue 36 (5): a thread's totals are smaller than its steps' when backward runs on another
thread (autograd's on CUDA): the thread counts what its own events launched, a step its window
on every thread. Both are right by their rules; the rows say which. References from the raw JSON:
GPU work joined to the runtime call that launched it, by correlation."""
from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest

from tracetui.model import load_trace
from tracetui.model.stats import COUNTS
from tracetui.report.tree import tree_dict

from tests.conftest import TRACES

PATH = TRACES / "transformer_eager_rf.json.gz"  # steps marked by record_function, backward on a 2nd thread


def _launched_per_thread():
    evs = json.loads(gzip.decompress(PATH.read_bytes()))["traceEvents"]
    tid_of = {e["args"]["correlation"]: e["tid"] for e in evs if e.get("ph") == "X"
              and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    dev, kernels = Counter(), Counter()
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            tid = tid_of[e["args"]["correlation"]]
            dev[tid] += e["dur"]
            kernels[tid] += e["cat"] == "kernel"
    return dev, kernels


def test_thread_rows_count_their_own_launches_and_say_so():
    dev, kernels = _launched_per_thread()
    doc = tree_dict(load_trace(PATH), 0, depth=2, keep=None)
    threads = [c for c in doc["children"] if c["kind"] == "thread"]
    assert len(threads) == 2
    main = None
    for c in threads:
        tid = int(re.match(r"thread (\d+)", c["name"]).group(1))
        assert c["device_us"] == pytest.approx(dev[tid], abs=0.01) and c["kernels"] == kernels[tid]
        assert c["counts"] == COUNTS["thread"] and "every thread" in c["counts"]
        if any(k["kind"] == "step" for k in c["children"]):
            main = c
    steps = [k for k in main["children"] if k["kind"] == "step"]
    assert len(steps) == 3 and all(s["counts"] == COUNTS["step"] for s in steps)
    # the case the issue met: the steps hold more than the thread they sit under
    assert sum(s["kernels"] for s in steps) > main["kernels"]
    assert sum(s["kernels"] for s in steps) == sum(kernels.values())  # every launch is in a step here
    assert doc["counts"] == COUNTS["root"]
