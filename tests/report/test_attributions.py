"""summary's first-step attribution with each ancestor's answer kept (``Attributions``, issue 44.15:
a step of 10^6 kernels) says what ``attribution`` says, kernel by kernel; so does the text's
whole-array count of the kernels an op launched (``launched_by_op``)."""
from __future__ import annotations

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import GPU_KINDS
from tracetui.report.summary import Attributions, attribution, launched_by_op

from tests.conftest import PEER, TRACES

BUNDLED = sorted(TRACES.glob("*.json.gz"))
PEERS = sorted(PEER.glob("*.json*")) if PEER.is_dir() else []


def _check(path) -> int:
    t = load_trace(path)
    gpu = np.nonzero(np.isin(t.tree.kind, list(GPU_KINDS)))[0].tolist()
    scopes = Attributions(t)
    assert [scopes.of(g) for g in gpu] == [attribution(t, g) for g in gpu]
    assert [scopes.of(g) for g in reversed(gpu)] == [attribution(t, g) for g in reversed(gpu)]  # memo filled
    assert launched_by_op(t, np.array(gpu, dtype=np.int64)).tolist() == [bool(attribution(t, g)["ops"]) for g in gpu]
    return sum(1 for g in gpu if attribution(t, g)["module"] or attribution(t, g)["ops"])


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled(path):
    _check(path)


def test_bundled_have_modules_and_ops():
    assert _check(TRACES / "transformer_eager.json.gz") > 0


def test_peer_traces(peer_dir):
    assert PEERS
    for p in PEERS:
        _check(p)
