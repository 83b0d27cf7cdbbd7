"""Hiding Python frames splices their children into the nearest shown ancestor, in order."""
from __future__ import annotations

import pytest

from tracetui.model import load_trace
from tracetui.read.events import K

from tests.conftest import TRACES


def _spliced(tree, node):
    """The rule written out directly: walk through hidden frames depth-first."""
    out, stack = [], tree.children(node).tolist()[::-1]
    while stack:
        c = stack.pop()
        if tree.kind[c] == K["python"]:
            stack.extend(tree.children(c).tolist()[::-1])
        else:
            out.append(c)
    return out


@pytest.mark.parametrize("name", ["mlp_eager.json.gz", "mlp_compile.json.gz", "linear_eager.json.gz"])
def test_children_without_python_frames(name):
    tree = load_trace(TRACES / name).tree
    assert (tree.kind == K["python"]).any(), "bundled traces are recorded with_stack"
    off, idx = tree.children_without(K["python"])
    for node in range(len(tree)):
        if tree.kind[node] == K["python"]:
            assert off[node] == off[node + 1]
            continue
        assert idx[off[node]:off[node + 1]].tolist() == _spliced(tree, node), node


def test_children_without_python_frames_cpu_recording(cpu_traces):
    tree = load_trace(cpu_traces["mlp_eager_stack"]).tree
    off, idx = tree.children_without(K["python"])
    shown = [n for n in range(len(tree)) if tree.kind[n] != K["python"]]
    assert len(shown) < len(tree)
    for node in shown:
        assert idx[off[node]:off[node + 1]].tolist() == _spliced(tree, node), node
