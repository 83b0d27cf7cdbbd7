"""Third-party traces (CPU-only, ROCm, CUDA graphs, NCCL, old formats) all load, and no kernel is lost."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import K

from tests.conftest import PEER

FILES = sorted(p.name for p in PEER.glob("*.json*")) if PEER.is_dir() else ["(absent)"]


@pytest.mark.parametrize("name", FILES)
def test_peer_trace_loads_with_every_kernel(peer_dir, name):
    path = peer_dir / name
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    n_kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"))
    t = load_trace(path)
    assert int((t.tree.kind == 8).sum()) == n_kernels  # K["kernel"]
    assert sum(a.count for a in t.kernel_table if a.kind == "kernel") == n_kernels
    # every node reaches the root
    assert (t.tree.depth[1:] > 0).all()


def test_cpu_only_trace(peer_dir):
    t = load_trace(peer_dir / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert not t.has_gpu and t.device_name is None and t.n_steps >= 1


def test_cuda_graph_launch_owns_many_kernels(peer_dir):
    t = load_trace(peer_dir / "negative_queue_length_values_check_rank0.json.gz")
    graph = [i for i in range(len(t.tree)) if t.name(i) == "cudaGraphLaunch"]
    assert graph and max(len(t.tree.children(g)) for g in graph) > 1


def test_backward_ops_link_to_forward(peer_dir):
    t = load_trace(peer_dir / "ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    assert t.tree.fwd_of
    b, f = next(iter(t.tree.fwd_of.items()))
    assert t.store.seq[t.tree.ev[b]] == t.store.seq[t.tree.ev[f]]


def _fwd_of_by_loop(t) -> dict:
    """The rule spelled out as a loop: each backward op (Fwd thread id > 0) -> the first forward op
    (in file order) with its Sequence number."""
    store, base = t.store, int(np.flatnonzero(t.tree.ev >= 0)[0])
    fwd, out = {}, {}
    for e in range(len(store)):
        if store.kind[e] == K["op"] and store.seq[e] >= 0 and store.fwd_tid[e] <= 0:
            fwd.setdefault(int(store.seq[e]), e)
    for e in range(len(store)):
        if store.kind[e] == K["op"] and store.seq[e] >= 0 and store.fwd_tid[e] > 0 and int(store.seq[e]) in fwd:
            out[base + e] = base + fwd[int(store.seq[e])]
    return out


@pytest.mark.parametrize("name", FILES)
def test_backward_links_follow_the_rule(peer_dir, name):
    t = load_trace(peer_dir / name)
    assert t.tree.fwd_of == _fwd_of_by_loop(t)
