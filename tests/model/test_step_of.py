"""Each node's step (``Rollups.step_of``): the nearest step up the display parents, checked node
by node against a walk up ``tree.parent`` written here, on traces with several steps, a
backward thread and GPU streams (bundled and, where present, the peers' real traces)."""
from __future__ import annotations

import pytest

from tracetui.model import load_trace

from tests.conftest import TRACES

PEERS = __import__("pathlib").Path(__file__).resolve().parents[2] / ".." / "shared" / "peer-traces"


def _walked(tree, is_step, i: int) -> int:
    for _ in range(len(tree.parent) + 1):
        if i < 0 or is_step[i]:
            return i
        i = int(tree.parent[i])
    raise AssertionError("display parents with a cycle")


@pytest.mark.parametrize("name", ["transformer_eager.json.gz", "mlp_compile.json.gz", "linear_eager.json.gz"])
def test_step_of_is_the_nearest_step_up_the_display_parents(name):
    t = load_trace(TRACES / name)
    is_step = (t.tree.kind == t.tree.kind[t.steps[0]]) if t.steps else None
    assert t.steps, "the bundled traces have steps"
    want = [_walked(t.tree, is_step, i) for i in range(len(t.tree))]
    assert t.roll.step_of.tolist() == want
    assert len({s for s in want if s >= 0}) == len(t.steps) > 1


def test_step_of_on_a_real_training_trace():
    path = PEERS / "hta" / "trace_diff_control_control.json.gz"
    if not path.exists():
        pytest.skip("../shared/peer-traces is absent")
    t = load_trace(path)
    is_step = t.tree.kind == t.tree.kind[t.steps[0]]
    assert t.roll.step_of.tolist() == [_walked(t.tree, is_step, i) for i in range(len(t.tree))]


def test_step_of_of_a_tree_finished_before_the_rollups():
    """build_tree finishes the tree first: the rollups then walk its CSR for the steps."""
    from tracetui.model.stats import rollups
    from tracetui.model.tree import build_tree
    from tracetui.read.load import decode_store
    from tracetui.read.source import read_input

    tree = build_tree(decode_store(read_input(TRACES / "transformer_eager.json.gz")).store)
    assert tree.child_off is not None
    is_step = tree.kind == tree.kind[next(i for i in range(len(tree)) if tree.name(i).startswith("ProfilerStep"))]
    got = rollups(tree).step_of
    assert got.tolist() == [_walked(tree, is_step, i) for i in range(len(tree))]
    assert (got >= 0).sum() > len(tree) // 2  # most of the work is inside some step
