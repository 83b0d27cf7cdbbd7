"""Trace.kernel_classes (vectorised, for the timeline) says what kernel_info says, node by node."""
from __future__ import annotations

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
    return classes


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled(path):
    assert len(_same_as_kernel_info(path)) > 0


def test_peer_traces(peer_dir):
    classes = set()
    for p in PEERS:
        classes |= set(_same_as_kernel_info(p))
    assert {"gemm", "conv", "norm", "communication", "memcpy", "triton"} <= classes  # the mix these traces hold
