"""Trace.kernel_classes (vectorised, for the timeline) says what kernel_info says, node by node."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import GPU_KINDS

from tests.conftest import PEER, TRACES

BUNDLED = sorted(TRACES.glob("*.json.gz"))
PEERS = sorted(PEER.glob("*.json*")) if PEER.is_dir() else []


def _same_as_kernel_info(path) -> list[str]:
    """The classes of every GPU node in the trace, checked node by node against kernel_info."""
    t = load_trace(path)
    gpu = np.nonzero(np.isin(t.tree.kind, list(GPU_KINDS)))[0]
    classes = t.kernel_classes(gpu)
    assert classes == [t.kernel_info(int(n)).klass for n in gpu]
    assert t.kernel_class_libs(gpu) == [(t.kernel_info(int(n)).klass, t.kernel_info(int(n)).library) for n in gpu]
    rows = [a.nodes for a in t.kernel_table]
    want = []
    for nodes in rows:  # row by row, as summary asked before table_classes (issue 44.15)
        info, by_class = t.row_info(nodes)
        want.append((info.klass, info.library, by_class, dict(Counter(t.classes_of(nodes).tolist()))))
    got = t.table_classes(rows)
    assert got == want
    assert [list(g[2]) for g in got] == [list(w[2]) for w in want]  # biggest class first, in both
    return classes


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled(path):
    assert len(_same_as_kernel_info(path)) > 0


def test_peer_traces(peer_dir):
    classes = set()
    for p in PEERS:
        classes |= set(_same_as_kernel_info(p))
    assert {"gemm", "conv", "norm", "communication", "memcpy", "triton"} <= classes  # the mix these traces hold
