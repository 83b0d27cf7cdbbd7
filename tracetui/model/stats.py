"""Numbers on every node (CPU total/self, device time, kernel count, step) and per-name aggregates.

Rollups follow torch.profiler's own tree (time containment per thread; GPU activity under the
runtime call that launched it), so the aggregates agree with ``key_averages()``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, kind_mask
from tracetui.read.forked import cores
from tracetui.read.together import together
from tracetui.model.tree import Tree, by_parent_then_start, finish_tree, steps_down

T = TypeVar("T")

STEP_KEY = "ProfilerStep*"
_STEP_RE = re.compile(r"^ProfilerStep#\d+$")


def agg_key(name: str) -> str:
    """The name key_averages() groups under (every ProfilerStep#N is ``ProfilerStep*``)."""
    return STEP_KEY if _STEP_RE.match(name) else name


@dataclass
class Rollups:
    cpu_total: np.ndarray     # ns
    cpu_self: np.ndarray      # ns, per node by the stack rule (what the tree and the detail pane show)
    device: np.ndarray        # ns of GPU activity in the subtree (containment)
    kernels: np.ndarray       # kernel launches in the subtree
    step_of: np.ndarray       # node id of the enclosing ProfilerStep (display tree), -1 if none
    dup: np.ndarray = None    # bool: merged into its same-name parent (torch's duplicate-node rule)
    op_self: np.ndarray = None  # ns, cpu_self with each merged duplicate's given to its survivor (op table)


def _nearest_not(parent: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Each node's nearest proper ancestor that is not ``skip``ped (the root counts as not), or -1.

    Pointer jumping over the skipped nodes only: chains of Python frames are long, but halve at
    every pass. ``skip`` is read through a copy one longer, whose last entry (read for parent -1)
    is False: no clamped copy of the parents per gather.
    """
    sk = np.append(skip, False)
    sk[0] = False  # the root counts as not skipped
    owner = parent.copy()
    via = np.flatnonzero(sk[parent])  # nodes whose parent is skipped
    if not via.size:
        return owner
    jump = parent.copy()
    f = np.flatnonzero(sk)
    f = f[sk[jump[f]]]
    while f.size:
        jump[f] = jump[jump[f]]
        f = f[sk[jump[f]]]
    owner[via] = jump[owner[via]]
    return owner


def _cpu_parents(tree: Tree, host: np.ndarray, python_owns_time: bool) -> tuple[np.ndarray, np.ndarray]:
    """(the CPU parent of every node in torch's tree, whether the node is in that tree), ``host``
    marking the host nodes.

    torch <= 2.12 leaves Python frames out of its tree: an op's parent is then its nearest
    non-frame ancestor, and frames have none. torch 2.13 keeps them (``python_owns_time``).
    """
    if python_owns_time:
        return tree.cparent, host
    pyish = kind_mask(tree.kind, [K["python"], K["module"]])
    return _nearest_not(tree.cparent, pyish), host & ~pyish


def _self_times(tree: Tree, host: np.ndarray, cpar: np.ndarray, member: np.ndarray,
                torch_compat: bool = False, threads: int = 1) -> np.ndarray:
    """Duration less the time its children in torch's tree (``_cpu_parents``) cover; a frame
    torch leaves out, less its own contained host children.

    Children can overlap each other: ``record_function``'s annotation starts inside the
    ``__enter__`` frame and ends inside ``__exit__``, so neither nests in the other and both are
    children of the frame that opened it. torch subtracts each child's whole duration, counting
    the overlap twice (``optimizer.py: zero_grad`` at -93 µs in key_averages()); we subtract the
    union of the children's intervals (``_overlap``). ``torch_compat=True`` keeps torch's sum.
    ``threads``: the sum and the overlap side by side (together.py).
    """
    n, dur = len(tree.kind), tree.dur

    def covered(par: np.ndarray, kids: np.ndarray) -> np.ndarray:
        if torch_compat:
            return _sum_to(par[kids], dur[kids], n)
        child, over = together([lambda: _sum_to(par[kids], dur[kids], n), lambda: _overlap(tree, par, kids)], threads)
        child -= over
        return child

    mn = np.nonzero(member & (cpar >= 0))[0]
    child = covered(cpar, mn)
    if member[host].all():  # torch 2.13: every host node is in torch's tree
        return np.where(host, dur - child, 0)
    # the frames torch leaves out: only their own children's cover is needed (not every host
    # node's again). One tree after the other: side by side, their sorts' temporaries (~7
    # node-sized arrays each) raised the load's peak by ~130 MB at 1 GB for ~0.1 s on 16 cores
    hn = np.nonzero(host & (tree.cparent >= 0))[0]
    up = tree.cparent[hn]
    hn = hn[host[up] & ~member[up]]
    return np.where(host, dur - np.where(member, child, covered(tree.cparent, hn)), 0)


def _sum_to(index: np.ndarray, ns: np.ndarray, n: int) -> np.ndarray:
    """``ns`` summed per ``index`` (int64; bincount, ~10x np.add.at; exact below 2**53 ns)."""
    total = np.bincount(index, weights=ns, minlength=n)
    if total.dtype.kind == "f":  # (no index at all gives ints)
        np.rint(total, out=total)
    return total.astype(np.int64)


def _overlap(tree: Tree, par: np.ndarray, kids: np.ndarray) -> np.ndarray:
    """Per parent, the ns its children ``kids`` (under ``par``) cover more than once: their summed
    durations less the length of their union. Any overlap among siblings shows between two that
    are adjacent in start order, so only those parents' children are measured: times relative
    to the parent's start, each parent's range shifted past the last one's, so one running
    maximum of the ends (what the earlier children reach) serves every parent at once."""
    if not kids.size:
        return np.zeros(len(tree.kind), dtype=np.int64)
    # the sort's keys and order are dropped as soon as it is done: four node-sized arrays at a
    # time, not seven (the load's peak at 1 GB is in the rollups)
    k = kids[by_parent_then_start(par[kids], tree.start[kids])]
    p, s = par[k], tree.start[k]
    e = s + tree.dur[k]
    hit = np.unique(p[1:][(p[1:] == p[:-1]) & (s[1:] < e[:-1])])  # sorted: p is
    if not hit.size:
        return np.zeros(len(tree.kind), dtype=np.int64)
    m = np.zeros(len(tree.kind), dtype=bool)
    m[hit] = True
    m = m[p]
    k, p, s, e = k[m], p[m], s[m], e[m]
    g = np.cumsum(np.r_[False, p[1:] != p[:-1]])  # the parent's index in hit (both in order)
    pdur = np.maximum(tree.dur[hit], 0)
    shift = np.r_[0, np.cumsum(pdur + 1)[:-1]][g]
    rs = np.clip(s - tree.start[p], 0, pdur[g]) + shift
    re = np.clip(e - tree.start[p], 0, pdur[g]) + shift
    reach = np.maximum.accumulate(re)
    before = np.r_[0, reach[:-1]]
    before[np.r_[True, g[1:] != g[:-1]]] = 0  # a parent's first child: nothing covered yet
    covered = np.maximum(re - np.maximum(rs, before), 0)
    return _sum_to(p, tree.dur[k] - covered, len(tree.kind))


def _duplicates(tree: Tree, cpar: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's ``EventList._remove_dup_nodes``: a node with its parent's name that is the parent's
    only child is merged into it (autocast and other re-dispatches record an op twice, nested).

    Returns (the merged nodes, the node each merges into: the top of its same-name chain). One
    pass finds them all: a merge can only give the survivor children its merged child had.
    """
    mn = np.nonzero(member & (cpar > 0))[0]
    mn = mn[member[cpar[mn]]]
    nkids = np.bincount(cpar[mn], minlength=len(tree.kind))
    dup = mn[(tree.name_id[mn] == tree.name_id[cpar[mn]]) & (nkids[cpar[mn]] == 1)]
    is_dup = np.zeros(len(tree.kind), dtype=bool)
    is_dup[dup] = True
    into = cpar[dup].copy()
    while True:
        up = is_dup[into]
        if not up.any():
            return dup, into
        into[up] = cpar[into[up]]


def rollups(tree: Tree, torch_compat: bool = False, python_owns_time: bool = False,
            workers: int | None = 1) -> Rollups:
    """Roll CPU and GPU time up the containment tree.

    GPU activity launched outside any ATen op (a user ``@triton.jit`` kernel: no External id)
    still counts for its enclosing module/annotation/step here. ``torch_compat=True`` drops it
    instead, which is what ``key_averages()`` does; the tests check both.

    Python frames (``with_stack``) are call-stack context: an op's self time excludes its ATen and
    runtime children only, as torch <= 2.11 computes it (python frames are not in its tree).
    ``python_owns_time=True`` nests ops under frames for self time, as torch 2.13 does.
    A node torch merges into its same-name parent (``_duplicates``) gives it its self time in the
    op table (``op_self``); the tree keeps each node's own (``cpu_self``). ``workers``: threads
    its independent parts may use (together.py).
    """
    return rollups_beside(tree, lambda: None, torch_compat, python_owns_time, workers)[0]


def rollups_beside(tree: Tree, beside: Callable[[], T], torch_compat: bool = False, python_owns_time: bool = False,
                   workers: int | None = 1) -> tuple[Rollups, T]:
    """(``rollups``, ``beside()``), with ``beside`` (the step windows: trace.py) run side by side
    with the rollups' parts. A tree from ``link_tree`` is finished here (its CSR children and
    depths, ``finish_tree``), beside the climbs up the containment parents, which need none."""
    def display() -> np.ndarray:  # what needs the display tree: each node's step
        if tree.child_off is not None:
            return steps_down(tree)
        step_of = np.full(len(tree.kind), -1, dtype=np.int64)
        finish_tree(tree, step_of)  # the steps found on the walk down that finds the depths
        return step_of

    host = kind_mask(tree.kind, HOST_KINDS)
    gpu = kind_mask(tree.kind, GPU_KINDS)
    step_of, r, other, into = together(
        [display, lambda: _contained(tree, host, gpu, torch_compat, python_owns_time, workers), beside,
         lambda: _totals_into(tree, host, gpu)], cores(workers))
    if tree.diagnostics.get("parent_cycles_broken"):  # found on display parents _acyclic then moved
        into = _totals_into(tree, host, gpu)
    _thread_totals(r.cpu_total, r.device, r.kernels, into)  # on the finished display tree
    r.step_of = step_of
    return r, other


def _contained(tree: Tree, host: np.ndarray, gpu: np.ndarray, torch_compat: bool, python_owns_time: bool,
               workers: int | None) -> Rollups:
    """The rollups that climb the containment parents only (all but ``step_of`` and the
    threads' totals): they may run before the display tree is finished. ``host``, ``gpu``: the
    nodes of those kinds, found once for both stages."""
    kind = tree.kind
    cpu_total = np.where(host, tree.dur, 0).astype(np.int64)
    cpar, member = _cpu_parents(tree, host, python_owns_time)
    # three parts that need only the containment tree, side by side (together.py)
    cpu_self, (dup, into), (device, kernels) = together([
        lambda: _self_times(tree, host, cpar, member, torch_compat, cores(workers)),
        lambda: _duplicates(tree, cpar, member),
        lambda: _device_climb(tree, gpu, torch_compat)], cores(workers))
    op_self = cpu_self.copy()  # the tree keeps every node's own self time; the op table merges
    np.add.at(op_self, into, cpu_self[dup])
    op_self[dup] = 0
    is_dup = np.zeros(len(kind), dtype=bool)
    is_dup[dup] = True
    return Rollups(cpu_total=cpu_total, cpu_self=cpu_self, device=device, kernels=kernels,
                   step_of=None, dup=is_dup, op_self=op_self)


def _device_climb(tree: Tree, gpu: np.ndarray, torch_compat: bool) -> tuple[np.ndarray, np.ndarray]:
    """(device ns, kernel launches) of every node's subtree.

    GPU time belongs to the op that launched it, as in key_averages(): the runtime call in
    between (cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync) reports none itself.
    """
    kind, dur = tree.kind, tree.dur
    counted = gpu.copy()
    if torch_compat:
        counted[gpu] = tree.store.ext[tree.ev[gpu]] > 0
    device = np.where(gpu, dur, 0).astype(np.int64)
    kernels = (kind == K["kernel"]).astype(np.int64)
    up = tree.cparent.copy()
    g = np.nonzero(gpu & (up >= 0))[0]
    via_rt = g[kind[up[g]] == K["runtime"]]
    up[via_rt] = tree.cparent[up[via_rt]]
    up[gpu & ~counted] = -1  # torch_compat: unattributed GPU activity rolls up nowhere
    # GPU activity is what carries device time and kernel counts: climb from it, merging the
    # climbs that meet, instead of ordering every node by depth
    g = np.nonzero(gpu & (up >= 0))[0]
    cur, w_dev, w_ker = up[g], dur[g], kernels[g]
    while cur.size:
        o = np.argsort(cur, kind="stable")
        cur = cur[o]
        first = np.flatnonzero(np.r_[True, cur[1:] != cur[:-1]])
        cur = cur[first]
        w_dev, w_ker = np.add.reduceat(w_dev[o], first), np.add.reduceat(w_ker[o], first)
        device[cur] += w_dev
        kernels[cur] += w_ker
        nxt = up[cur]
        keep = nxt >= 0
        cur, w_dev, w_ker = nxt[keep], w_dev[keep], w_ker[keep]
    return device, kernels


def _totals_into(tree: Tree, host: np.ndarray, gpu: np.ndarray) -> tuple[np.ndarray, ...]:
    """What ``_thread_totals`` adds into what: (top-level host events, their thread or root;
    the members of steps' groups of another thread's work, their group). Found beside the
    rollups, which it does not need; the sums, after them, are a few thousandths of that."""
    kind, n = tree.kind, len(tree.kind)
    top = np.nonzero(host & (tree.cparent >= 0))[0]
    up = tree.cparent[top]
    keep = ~(host[up] | gpu[up])
    grp = np.nonzero((kind == K["thread"]) & (tree.parent > 0))[0]
    grp = grp[kind[tree.parent[grp]] == K["step"]]
    members = np.zeros(0, dtype=np.int64)
    if grp.size:
        is_grp = np.zeros(n, dtype=bool)
        is_grp[grp] = True
        members = np.nonzero((tree.parent > 0) & is_grp[np.maximum(tree.parent, 0)])[0]
    return top[keep], up[keep], members, tree.parent[members]


def _thread_totals(cpu_total: np.ndarray, device: np.ndarray, kernels: np.ndarray, into: tuple) -> None:
    """Threads (and the root, for host events found on no thread) total their top-level events;
    so does a step's group of another thread's work (tree.py). ``into``: ``_totals_into``."""
    top, thread, members, group = into
    np.add.at(cpu_total, thread, cpu_total[top])
    for col in (cpu_total, device, kernels):
        np.add.at(col, group, col[members])


@dataclass
class Agg:
    """One row of an op or kernel table (times in µs)."""
    name: str
    kind: str
    count: int
    cpu_total_us: float
    cpu_self_us: float
    device_total_us: float
    nodes: np.ndarray
    device_scope_us: float | None = None  # op table: with the GPU work key_averages() leaves out

    @property
    def mean_device_us(self) -> float:
        return self.device_total_us / self.count if self.count else 0.0


def torch_device(tree: Tree) -> np.ndarray:
    """Device ns of every node as key_averages() counts it: only GPU work an op launched (by
    External id) on the node's own thread (``rollups`` also counts op-less kernels and, for a
    step, the work of every thread: that is the op table's ``device_scope_us``)."""
    return _device_climb(tree, kind_mask(tree.kind, GPU_KINDS), torch_compat=True)[0]


def aggregate(tree: Tree, r: Rollups, kinds: frozenset, device: np.ndarray | None = None) -> list[Agg]:
    """Rows grouped by key_averages()'s name key, for the node kinds in ``kinds``; by device then CPU time.

    Nodes torch merges into their parent (``Rollups.dup``) are no rows of their own. With
    ``device`` (``torch_device``), device totals are key_averages()'s and ``device_scope_us``
    holds ``r.device``'s."""
    from tracetui.read.events import KINDS
    keep = kind_mask(tree.kind, kinds)
    if r.dup is not None:  # merged into their same-name parent, as key_averages() merges them
        keep &= ~r.dup
    sel = np.nonzero(keep)[0]
    if not sel.size:
        return []
    # group by interned name id (integers: a count per id, no sort), then map the few distinct
    # names to their key
    ids = tree.name_id[sel]
    name_ids = np.nonzero(np.bincount(ids, minlength=len(tree.names)))[0]
    key_of = [agg_key(tree.names[i]) for i in name_ids.tolist()]
    uniq = list(dict.fromkeys(key_of))
    key_ix = {k: i for i, k in enumerate(uniq)}
    m = len(uniq)
    # a row number per node in the narrowest integer: numpy's stable sort of 16-bit integers is a
    # radix sort (~5x faster than int64's on 175k op nodes)
    small = np.int16 if m < 1 << 15 else np.int64
    lut = np.zeros(len(tree.names), dtype=small)
    lut[name_ids] = np.array([key_ix[k] for k in key_of], dtype=small)
    inv = lut[ids]
    count = np.bincount(inv, minlength=m)
    ct = np.bincount(inv, weights=r.cpu_total[sel], minlength=m) / 1e3
    own = r.cpu_self if r.op_self is None else r.op_self
    cs = np.bincount(inv, weights=own[sel], minlength=m) / 1e3
    scope = np.bincount(inv, weights=r.device[sel], minlength=m) / 1e3
    dv = scope if device is None else np.bincount(inv, weights=device[sel], minlength=m) / 1e3
    order = np.argsort(inv, kind="stable")
    splits = np.split(sel[order], np.cumsum(count)[:-1])
    first_kind = {i: KINDS[tree.kind[splits[i][0]]] for i in range(m)}
    rows = [Agg(str(uniq[i]), first_kind[i], int(count[i]), float(ct[i]), float(cs[i]), float(dv[i]), splits[i],
                None if device is None else float(scope[i])) for i in range(m)]
    rows.sort(key=lambda a: (-a.device_total_us, -a.cpu_total_us, a.name))
    return rows


COUNTS = {
    "root": "the whole trace",
    "thread": "this thread's own events and launches; a step counts every thread",
    "step thread": "this thread's part of the step",
    "step": "device, kernels: the step's window, every thread",
}
"""What a row's CPU, device and kernel figures count, where that is not the node's own subtree:
a thread's totals can be smaller than its steps' (backward on autograd's thread counts for the
step, not for the main thread), and the row says so (``what_it_counts``)."""


COUNTS_SHORT = {"thread": "own launches", "step": "all threads"}
"""The same, as a tree row's tag (the explorer's tree: the detail pane has room for the rest)."""


def what_it_counts(tree: Tree, node: int, short: bool = False) -> str | None:
    """``COUNTS``'s line (``COUNTS_SHORT``'s tag) for a root, thread or step node; else None."""
    kind = int(tree.kind[node])
    key = None
    if kind == K["root"]:
        key = "root"
    elif kind == K["step"]:
        key = "step"
    elif kind == K["thread"]:
        p = int(tree.parent[node])
        key = "step thread" if p > 0 and tree.kind[p] == K["step"] else "thread"
    return (COUNTS_SHORT if short else COUNTS).get(key) if key else None
