"""The threads' totals are found beside the display tree's finish (stats.rollups_beside); where
that finish re-hangs nodes on a parent cycle meanwhile, they are found again on the final parents."""
from __future__ import annotations

import numpy as np

from tracetui.model import stats
from tracetui.model.tree import finish_tree, link_tree
from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, kind_mask
from tracetui.read.load import decode_store
from tracetui.read.source import read_input

from tests.conftest import TRACES


def _cyclic(store):
    """The linked tree with a step and its group of the backward thread's work made a cycle by
    hand (step -> group -> step): both, and the group's members, hang from nothing until the
    finish re-hangs them on their containment parents, where the members are in no group."""
    tree = link_tree(store)
    grp = np.flatnonzero((tree.kind == K["thread"]) & (tree.parent > 0))
    g = int(grp[tree.kind[tree.parent[grp]] == K["step"]][0])
    tree.parent[tree.parent[g]] = g
    return tree


def test_totals_found_before_a_cycle_is_broken_are_found_again(monkeypatch):
    store = decode_store(read_input(TRACES / "transformer_eager.json.gz")).store
    ref_tree = _cyclic(store)
    finish_tree(ref_tree)  # the cycle broken first: the totals then read the final parents
    ref = stats.rollups(ref_tree)

    tree = _cyclic(store)
    host, gpu = kind_mask(tree.kind, HOST_KINDS), kind_mask(tree.kind, GPU_KINDS)
    stale = stats._totals_into(tree, host, gpu)

    def last_first(calls, n):  # the totals' search (the last part) runs before the finish
        out = [None] * len(calls)
        for i in [len(calls) - 1, *range(len(calls) - 1)]:
            out[i] = calls[i]()
        return out

    monkeypatch.setattr(stats, "together", last_first)
    got, _ = stats.rollups_beside(tree, lambda: None)
    assert tree.diagnostics["parent_cycles_broken"] > 0
    final = stats._totals_into(tree, host, gpu)
    assert not np.array_equal(stale[2], final[2])  # the group's members moved: the stale search is wrong
    for f in ("cpu_total", "device", "kernels", "step_of"):
        assert np.array_equal(getattr(got, f), getattr(ref, f)), f
