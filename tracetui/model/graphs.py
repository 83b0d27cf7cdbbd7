"""CUDA/HIP graph launches whose GPU work the record cannot place: absent, or present with no link.

A ``cudaGraphLaunch`` (``hipGraphLaunch``) enqueues a whole captured graph. Kineto usually records
the graph's kernels with the launch's correlation id, and the tree hangs them under the launch: a
replay is then attributed exactly. Some recordings lose that: the kernels are missing (the
profiler did not trace inside graphs), or they are there with no correlation to any launch. A
step with such a launch has GPU work this record does not show, or cannot tie to its launch, so
its idle time, busy time, verdict and hot kernels are not known; ``GraphGaps`` says which steps,
and how much work is hidden or unplaced.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tracetui.read.events import K

GRAPH_LAUNCH = re.compile(r"GraphLaunch")
"""Runtime calls that enqueue a whole captured graph (cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch)."""


@dataclass
class StepGaps:
    """One step's graph launches and what of their work the record lacks (ns for times)."""
    launches: int = 0
    empty: int = 0              # graph launches with no GPU activity linked to them
    unlinked: int = 0           # GPU activity in the window with no launch found
    unlinked_ns: int = 0

    @property
    def incomplete(self) -> bool:
        """A graph launch in the step has no GPU work linked: the step's GPU record is not whole."""
        return self.empty > 0

    def note(self) -> str:
        """One line for people: what is hidden, and what can't be placed."""
        if not self.incomplete:
            return ""
        out = f"{self.empty} of {self.launches} graph launch(es) with no kernels linked: their GPU work is hidden"
        if self.unlinked:
            out += (f"; {self.unlinked} GPU item(s) ({self.unlinked_ns / 1e3:,.1f} µs) in the window have no launch "
                    "and can't be placed")
        return out + "; idle, busy, verdict and hot kernels unknown"

    def as_dict(self) -> dict:
        return {"graph_launches": self.launches, "graph_launches_without_kernels": self.empty,
                "unlinked_gpu_items": self.unlinked, "unlinked_gpu_us": round(self.unlinked_ns / 1e3, 3),
                "incomplete": self.incomplete}


@dataclass
class GraphGaps:
    """Graph launches of the whole trace and of each step (``by_step``: step node -> StepGaps)."""
    launches: int = 0
    empty: int = 0
    linked_items: int = 0       # GPU activity linked to a graph launch (replays attributed exactly)
    by_step: dict = field(default_factory=dict)

    @property
    def incomplete_steps(self) -> list[int]:
        return [s for s, g in self.by_step.items() if g.incomplete]

    def summary(self) -> str:
        """The trace-level line ('' where no graph launch exists)."""
        if not self.launches:
            return ""
        if not self.empty:
            return (f"CUDA graphs: {self.launches} launch(es), every one with its kernels linked "
                    f"({self.linked_items} GPU items attributed to their replay)")
        bad = len(self.incomplete_steps)
        return (f"CUDA graphs: {self.empty} of {self.launches} launch(es) have no kernels linked (absent from the "
                f"record, or present with no link): {bad} step(s) marked incomplete, their idle and hot kernels "
                "unknown")

    def as_dict(self) -> dict:
        return {"graph_launches": self.launches, "graph_launches_without_kernels": self.empty,
                "gpu_items_linked_to_graphs": self.linked_items,
                "incomplete_steps": len(self.incomplete_steps)}


def graph_gaps(trace) -> GraphGaps:
    """Find every graph launch, the GPU activity linked to each, and each step's gaps."""
    t = trace.tree
    rt = np.nonzero(t.kind == K["runtime"])[0]
    if not rt.size:
        return GraphGaps()
    graph_ids = [i for i, n in enumerate(t.names) if "GraphLaunch" in n and GRAPH_LAUNCH.search(n)]
    launches = rt[np.isin(t.name_id[rt], graph_ids)]
    if not launches.size:
        return GraphGaps()
    gpu = trace._gpu_nodes
    exact = np.isin(t.parent[gpu], launches) if gpu.size else np.zeros(0, dtype=bool)
    linked = np.bincount(np.searchsorted(launches, t.parent[gpu][exact]), minlength=launches.size)
    empty = set(launches[linked == 0].tolist())
    out = GraphGaps(int(launches.size), len(empty), int(linked.sum()))
    if trace.steps:
        out.by_step = _by_step(trace, launches, set(empty))
    return out


def _by_step(trace, launches: np.ndarray, empty: set) -> dict:
    """Step node -> StepGaps for every step whose window holds a graph launch (whole arrays:
    a trace of 250,000 steps is one pass)."""
    t, win = trace.tree, trace.windows
    n = len(win.windows)
    r_seg = np.repeat(np.arange(n), np.diff(win.runtime_at))
    is_graph = np.isin(win.runtime_flat, launches)
    n_launch = np.bincount(r_seg[is_graph], minlength=n)
    is_empty = np.isin(win.runtime_flat, np.fromiter(empty, dtype=np.int64, count=len(empty)))
    n_empty = np.bincount(r_seg[is_empty], minlength=n)
    gpu = trace._gpu_nodes
    g = win.gpu_flat.astype(np.int64)
    g_seg = np.repeat(np.arange(n), np.diff(win.gpu_at))
    lost = win.launcher[np.searchsorted(gpu, g)] < 0 if g.size else np.zeros(0, dtype=bool)
    n_lost = np.bincount(g_seg[lost], minlength=n)
    lost_ns = np.bincount(g_seg[lost], weights=t.dur[g[lost]], minlength=n) if g.size else np.zeros(n)
    nodes = [w.node for w in win.windows]
    return {nodes[k]: StepGaps(int(n_launch[k]), int(n_empty[k]), int(n_lost[k]), int(lost_ns[k]))
            for k in np.nonzero(n_launch)[0].tolist()}
