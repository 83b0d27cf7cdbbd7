"""Steps stay the top level of their thread (model/step_tops.py), checked event by event against
the rule written out here from the tree's own containment parents (the nesting's answer, which
tests/model tests against torch's): on a thread with step markers,

- a step hangs from its thread;
- an event that spans a step's start (a step starts inside it, or starts with it and ends
  first) hangs from its thread too: it is shown beside the steps;
- an event whose containment parent spans a step's start, and that starts inside a step, hangs
  from that step;
- every other event keeps its containment parent.
"""
from __future__ import annotations

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import HOST_KINDS, K

from tests.conftest import PEER, TRACES

BUNDLED = sorted(TRACES.glob("*.json.gz"))
PEERS = sorted(PEER.glob("*.json*")) if PEER.is_dir() else []


def _check(path) -> int:
    """Assert the rule on every host event of every step thread; (events spanning a step start,
    events moved from one of them under a step)."""
    t = load_trace(path, cache=False)
    tree, store = t.tree, t.tree.store
    ev_track = {}
    steps_on: dict[int, list[tuple[int, int, int]]] = {}
    thread_of: dict[int, int] = {}
    for node in range(len(tree.kind)):
        e = int(tree.ev[node])
        if e < 0 or int(tree.kind[node]) not in HOST_KINDS:
            continue
        tr = int(store.track[e])
        ev_track[node] = tr
        if tree.kind[node] == K["step"]:
            steps_on.setdefault(tr, []).append((int(tree.start[node]), int(tree.start[node] + tree.dur[node]), node))
            thread_of[tr] = int(tree.parent[node])
    spanned = held = 0
    for tr, steps in steps_on.items():
        steps.sort()
        thread = thread_of[tr]

        def spans(node: int) -> bool:
            s, e = int(tree.start[node]), int(tree.start[node] + tree.dur[node])
            if any(s < a < e for a, _, _ in steps):
                return True
            same = [b for a, b, _ in steps if a == s]
            return bool(same) and e > same[0]

        def step_at(ts: int) -> int | None:
            began = [(b, n) for a, b, n in steps if a <= ts]
            return began[-1][1] if began and ts < began[-1][0] else None  # the latest step begun, if still open

        for node, t2 in ev_track.items():
            if t2 != tr:
                continue
            if tree.kind[node] == K["step"]:
                assert tree.parent[node] == thread, (path.name, node)
                continue
            cp = int(tree.cparent[node])
            if spans(node):
                spanned += 1
                assert tree.parent[node] == thread, (path.name, node, "spans a step start")
            elif cp > 0 and tree.kind[cp] != K["step"] and spans(cp) and step_at(int(tree.start[node])) is not None:
                held += 1
                assert tree.parent[node] == step_at(int(tree.start[node])), (path.name, node, "held by a spanning event")
            else:
                assert tree.parent[node] == cp if cp >= 0 else True, (path.name, node, "its containment parent")
    assert spanned == tree.diagnostics["steps_spanned_by_events"], path.name
    return spanned, held


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled(path):
    _check(path)


def test_a_bundled_trace_has_frames_around_step_starts():
    spanned, held = _check(TRACES / "transformer_eager.json.gz")
    assert spanned > 0 and held > 0


def test_peer_traces(peer_dir):
    assert PEERS
    for p in PEERS:
        _check(p)
