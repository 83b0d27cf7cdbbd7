"""Issue 36 (3): no negative CPU self time for Python frames. The cause: ``record_function``'s
annotation starts inside its ``__enter__`` frame and ends inside ``__exit__``; neither nests in
the other, so all three are children of the frame around them and torch (key_averages()) counts
the overlap twice. The reference (tests/model/raw_tree.py) builds torch's tree from the raw JSON
and subtracts the union of each event's children instead.
"""
from __future__ import annotations

import re

import pytest

from tracetui.mcp import tools
from tracetui.model import load_trace
from tracetui.report.summary import summary_dict
from tracetui.workloads.record import key_averages_path, read_key_averages

from tests.conftest import DATA
from tests.model.raw_tree import self_times

# torch 2.13 CPU training recordings with stacks; the _rf one marks its steps with record_function
TRACES = [DATA / "cpu_transformer_eager_rf.json.gz", DATA / "cpu_transformer_eager.json.gz",
          DATA / "cpu_autocast_train.json.gz"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_self_time_is_what_the_children_leave(path):
    ref = self_times(path)
    # the reference is torch's tree: its plain sums are key_averages()'s own self times
    torch_rows = {r["name"]: r for r in read_key_averages(key_averages_path(path))[0] if r["cpu_total_us"]}
    for name in ("torch/optim/optimizer.py(1023): zero_grad", "torch/optim/optimizer.py(509): wrapper"):
        assert ref[name]["torch"] == pytest.approx(torch_rows[name]["cpu_self_us"], abs=0.01)
        assert ref[name]["torch"] < 0 and ref[name]["overlap"] > 0  # the bug, as torch has it
    rows = summary_dict(load_trace(path), top=0)["ops"]
    assert len(rows) > 100
    covered = {}
    for name, v in ref.items():  # key_averages() groups every ProfilerStep#N as ProfilerStep*
        key = "ProfilerStep*" if re.fullmatch(r"ProfilerStep#\d+", name) else name
        covered[key] = covered.get(key, 0.0) + v["covered"]
    for r in rows:
        # a same-name merge (autocast) moves self time within one name: the sums still agree
        assert r["cpu_self_us"] == pytest.approx(covered[r["name"]], abs=0.02), r["name"]
        assert r["cpu_self_us"] >= -0.001, r["name"]


def test_mcp_ops_has_no_negative_self_time():
    path = DATA / "cpu_transformer_eager_rf.json.gz"
    rows = tools.ops(str(path), kind="python", limit=100)["ops"]
    assert rows and all(r["cpu_self_us"] >= -0.001 for r in rows)
    ref = self_times(path)
    wrapper = next(r for r in rows if r["name"] == "torch/optim/optimizer.py(509): wrapper")
    assert wrapper["cpu_self_us"] == pytest.approx(ref[wrapper["name"]]["covered"], abs=0.01)


def test_overlap_against_a_bitmap():
    """The vectorised double count equals a brute-force count of covered nanoseconds, on random
    children (nested, chained, disjoint) of several parents at once."""
    import types

    import numpy as np

    from tracetui.model.stats import _overlap
    rng = np.random.default_rng(0)
    parents, n = 5, 305
    start, dur, par = np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, -1)
    start[:parents], dur[:parents] = np.arange(parents) * 5000, 1000
    for j in range(parents, n):
        p = int(rng.integers(0, parents))
        a = int(rng.integers(0, 900))
        b = int(rng.integers(a + 1, 1000))
        start[j], dur[j], par[j] = start[p] + a, b - a, p
    tree = types.SimpleNamespace(kind=np.zeros(n, np.int8), start=start, dur=dur)
    got = _overlap(tree, par, np.arange(parents, n))
    for p in range(parents):
        covered = np.zeros(1000, dtype=bool)
        kids = np.nonzero(par == p)[0]
        for j in kids:
            covered[start[j] - start[p]:start[j] - start[p] + dur[j]] = True
        assert got[p] == int(dur[kids].sum()) - int(covered.sum()) > 0
