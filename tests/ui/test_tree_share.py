"""Issue 43 item 2: the tree's ``%`` was the CPU share of the step, and nothing said so: in a GPU
trace ``Linear_24 … dev 870.1µs · 0%`` was 7% of the step's GPU time. The share is now written after
the figure it is a share of: device time where the trace has a GPU, CPU time otherwise."""
from __future__ import annotations

import gzip
import json
import re

from tracetui.model import load_trace
from tracetui.ui.tree_view import TraceTree

from tests.conftest import DATA, TRACES

GPU = TRACES / "transformer_eager.json.gz"
CPU = DATA / "cpu_transformer_eager.json.gz"


def _raw(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def test_a_gpu_trace_shows_the_device_share_of_the_step():
    """Reference from the raw JSON: the first step's GPU work is every kernel/memcpy/memset whose
    launch (its correlation's runtime call) starts inside ProfilerStep#2, on any thread; each
    kernel's share is its duration over their sum."""
    ev = _raw(GPU)
    step = next(e for e in ev if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
                and e.get("cat") == "user_annotation")
    rt = {e["args"]["correlation"]: e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
          and "correlation" in e.get("args", {})}
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and (r := rt.get(e["args"].get("correlation"))) and step["ts"] <= r["ts"] < step["ts"] + step["dur"]]
    total = sum(e["dur"] for e in gpu)
    biggest = max((e for e in gpu if e["cat"] == "kernel"), key=lambda e: e["dur"])
    t = load_trace(GPU)
    tree = TraceTree(t)
    s = t.steps[0]
    assert t.name(s) == step["name"]
    nodes = [int(n) for n in t.step_gpu_nodes(s).tolist() if t.name(int(n)) == biggest["name"]
             and abs(t.tree.dur[int(n)] / 1e3 - biggest["dur"]) < 1e-3]
    label = tree.label_for(nodes[0]).plain
    m = re.search(r"dev [\d.]+[µm]?s \((\d+)%\)", label)
    assert m, label
    assert int(m.group(1)) == round(100 * biggest["dur"] / total), (label, biggest["dur"], total)
    # a module's share is of the device time too (was its CPU share)
    mod = next(int(n) for n in range(len(t.tree.kind)) if t.name(n) == "nn.Module: Linear_24" and int(t.roll.step_of[n]) == s)
    share = int(re.search(r"dev [^ ]+ \((\d+)%\)", tree.label_for(mod).plain).group(1))
    assert share == round(100 * t.roll.device[mod] / t.roll.device[s]) and share > 0


def test_a_cpu_only_trace_shows_the_cpu_share():
    t = load_trace(CPU)
    tree = TraceTree(t)
    s = t.steps[0]
    op = next(int(n) for n in range(len(t.tree.kind)) if t.kind(n) == "op" and int(t.roll.step_of[n]) == s
              and t.roll.cpu_total[n] > 0.05 * t.roll.cpu_total[s])
    label = tree.label_for(op).plain
    m = re.search(r"cpu [^ ]+ \((\d+)%\)", label)
    assert m and "dev " not in label, label
    assert int(m.group(1)) == round(100 * t.roll.cpu_total[op] / t.roll.cpu_total[s])
