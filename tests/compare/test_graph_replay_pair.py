"""CUDA-graph replays in the diff: the same kernels launched by one graph replay are not a fusion.

The recordings are issue 42's fused MLP on an H200 (tests/data/README.md), with the step replayed
as CUDA graphs (`Graphed` / `GraphedBackward`) against the same step compiled.
"""
from __future__ import annotations

import gzip
import json
from collections import Counter

from tracetui.compare.changes import diff_dict
from tracetui.compare.diff import diff_traces
from tracetui.model import load_trace

from tests.conftest import DATA


GRAPHS, COMPILED = DATA / "h200_mlp_train_fused_graphs_op.json.gz", DATA / "h200_mlp_train_fused_compile_op.json.gz"


def test_a_cuda_graph_replay_is_the_same_kernels_not_a_fusion():
    """fused-compile -> fused-graphs replays the same kernels (the raw JSON's kernel names are the
    same multiset): `Graphed` launches the dual GEMM and the down projection in one call, so its
    shapes' FLOPs (all three GEMMs) are no one kernel's evidence of having taken over two."""
    names = [Counter(e["name"] for e in json.load(gzip.open(p))["traceEvents"] if e.get("cat") == "kernel")
             for p in (COMPILED, GRAPHS)]
    assert names[0] == names[1]
    d = diff_traces(load_trace(COMPILED), load_trace(GRAPHS))
    totals = diff_dict(d)["totals"]
    assert not d.fusions, [(f.kernel.name, [x.name for x in f.replaces]) for f in d.fusions]
    assert totals["unexplained"] == 0 and totals["kernels_a"] == totals["kernels_b"] == sum(names[0].values()) / 3
