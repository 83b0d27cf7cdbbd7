"""Linking: one hierarchy per trace, as integer arrays (parent, CSR children), never object per event.

root -> host thread -> ProfilerStep / annotation -> nn.Module -> python frame -> ATen op ->
runtime call -> GPU activity (by correlation, falling back to External id). Host events nest by
time containment on their thread (torch.profiler's own rule, so self times match key_averages);
frames that span several steps are shown beside the steps, so steps stay the top level.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, EventStore, kind_mask
from tracetui.model.frame_ends import MAX_ROUNDS, cut_frame_ends
from tracetui.model.nesting import nest
from tracetui.model.step_tops import step_thread_groups, steps_on_top
from tracetui.read.forked import cores
from tracetui.read.together import together

DIAGNOSTICS = {
    "partial_overlaps": "events that outlast their parent on a thread (closed there, by torch's rule)",
    "python_frames_cut": "Python frames that outlasted the op, runtime call or frame they started in (an exit the "
                         "tracer missed or wrote late): cut to its end, so it no longer closes it",
    "launches_without_gpu": "launch, memcpy or memset calls with no GPU activity in the file",
    "gpu_without_launch": "GPU activity whose launch was not found (shown under 'no launch found')",
    "linked_by_external_id": "GPU activity linked to its op by External id, no runtime call matched",
    "flows_without_end": "flow arrows (ac2g, fwdbwd) with only one end in the file",
    "events_missing_fields": "events without ts (left out) or dur (kept, with dur 0)",
    "args_wrong_types": "link ids of an unexpected type or beyond 64 bits, read leniently (as no link)",
    "events_unreadable": "events left out: a field of the wrong type (e.g. pid as a float, ts as text), by field",
    "times_out_of_range": "events left out: ts or dur beyond +-292 years in ns (e.g. 1e308), or not finite",
    "negative_durations": "events with a negative dur, shown with dur 0",
    "skipped_categories": "events of categories the hierarchy does not use, by category",
    "steps_spanned_by_events": "frames that span a step boundary, shown beside the steps",
    "parent_cycles_broken": "events whose display parents went round in a loop, re-hung under their "
                            "containment parent (a tracetui bug if it ever shows: please report it)",
}
"""Each diagnostic the tree counts, and what it means for the numbers (CLI and app both say it)."""


def diagnostic_lines(diag: dict) -> list[tuple[str, object, str]]:
    """(label, count, meaning) of every non-zero diagnostic, in ``DIAGNOSTICS`` order."""
    keys = [k for k in DIAGNOSTICS if k in diag] + [k for k in diag if k not in DIAGNOSTICS]
    return [(k.replace("_", " "), diag[k], DIAGNOSTICS.get(k, "")) for k in keys if diag[k]]


LAUNCH_WORDS = ("Launch", "Memcpy", "Memset", "memcpy", "memset")
"""Runtime calls whose name has one of these are expected to produce GPU activity."""


@dataclass
class Tree:
    """The hierarchy: node arrays indexed by node id; node 0 is the root."""
    store: EventStore
    names: list[str]
    name_id: np.ndarray
    kind: np.ndarray
    ev: np.ndarray            # event index, -1 for synthetic nodes
    start: np.ndarray         # ns
    dur: np.ndarray           # ns (device duration for GPU nodes)
    parent: np.ndarray        # display parent
    cparent: np.ndarray       # containment parent (torch.profiler's tree), used for rollups
    child_off: np.ndarray     # CSR children and depths: None between link_tree and finish_tree
    child_idx: np.ndarray
    depth: np.ndarray
    diagnostics: dict = field(default_factory=dict)
    fwd_of: dict = field(default_factory=dict)   # backward op node -> forward op node
    _without: dict = field(default_factory=dict, repr=False)  # children_without's cache, by kind

    def __len__(self) -> int:
        return len(self.kind)

    def children(self, i: int) -> np.ndarray:
        return self.child_idx[self.child_off[i]:self.child_off[i + 1]]

    def name(self, i: int) -> str:
        return self.names[self.name_id[i]]

    def children_without(self, hidden_kind: int) -> tuple[np.ndarray, np.ndarray]:
        """CSR (offsets, children) of the display tree with nodes of ``hidden_kind`` spliced out.

        A hidden node's children move up to its nearest shown ancestor, in start-time order;
        the UI hides Python frames this way. Cached: one vectorised pass per kind.
        """
        cache = self._without
        if hidden_kind not in cache:
            kind, parent = self.kind, self.parent
            hidden = kind == hidden_kind
            vp = parent.copy()
            m = np.nonzero((vp > 0) & hidden[np.maximum(vp, 0)])[0]
            while m.size:
                vp[m] = parent[vp[m]]
                m = m[(vp[m] > 0) & hidden[np.maximum(vp[m], 0)]]
            vp[hidden] = -1
            cache[hidden_kind] = _csr(vp, self.start, len(kind))
        return cache[hidden_kind]

    def path(self, i: int) -> list[int]:
        """Node ids from the root to ``i`` (display parents)."""
        return list(self.ancestors(i))[::-1] + [int(i)]

    def ancestors(self, i: int, parents: np.ndarray | None = None):
        """The ancestors of ``i`` along ``parents`` (display parents by default), innermost first.

        The walk takes at most as many steps as the tree has nodes: ``build_tree`` makes the
        parents acyclic, and a walk up must end even if some later edit broke that."""
        parents = self.parent if parents is None else parents
        p = int(parents[i])
        for _ in range(len(parents)):
            if p < 0:
                return
            yield p
            p = int(parents[p])


def packed(major: np.ndarray, minor: np.ndarray) -> np.ndarray | None:
    """``(major, minor)`` as one int64 whose order is theirs (``major`` non-negative), or None
    where they do not fit 62 bits. The span of ``minor`` is taken in Python ints: times at both
    ends of int64 overflowed it in int64 and packed colliding keys."""
    if not major.size:
        return np.zeros(0, dtype=np.int64)
    lo = int(minor.min())
    bits = max((int(minor.max()) - lo).bit_length(), 1)
    if int(major.min()) < 0 or bits + int(major.max()).bit_length() > 62:
        return None
    return (major.astype(np.int64) << bits) | (minor - lo)


def by_parent_then_start(par: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``np.lexsort((start, par))``: one stable sort of both packed in an int64 where they fit
    (the CSR children and the sibling overlaps: less time than lexsort on 2M nodes)."""
    key = packed(par, start)
    return np.lexsort((start, par)) if key is None else np.argsort(key, kind="stable")


def _csr(parent: np.ndarray, start: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, children): each node's children by start, ties in node order."""
    nodes = np.nonzero(parent >= 0)[0]
    order = nodes[by_parent_then_start(parent[nodes], start[nodes])]
    counts = np.bincount(parent[order], minlength=n)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off, order.astype(np.int32)


def _host_order(host: np.ndarray, track: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                kind: np.ndarray) -> np.ndarray:
    """``host`` in (track, ts, -dur, kind, index) order, the order the nesting walks.

    Files are written almost in time order, so one stable sort of (track, ts) packed in an
    int64 runs near-linear (timsort); only runs of equal (track, ts) need the other keys.
    A 5-key lexsort took 4.5x longer on the 270k-event replica.
    """
    if not host.size:
        return host
    t, tr = ts[host], track[host]
    key = packed(tr, t)
    if key is None:
        return host[np.lexsort((host, kind[host], -dur[host], t, tr))]
    o = np.argsort(key, kind="stable")
    k = key[o]
    tie = np.zeros(o.size, dtype=bool)
    tie[1:] = k[1:] == k[:-1]
    if tie.any():
        member = tie.copy()
        member[:-1] |= tie[1:]                 # every event of a run of equal (track, ts)
        at = np.flatnonzero(member)
        run = np.cumsum(~tie[at])              # which run
        sub = o[at]
        h = host[sub]
        o[at] = sub[np.lexsort((h, kind[h], -dur[h], run))]
    return host[o]


def _first_of(keys: np.ndarray, events: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each id in ``wanted``, the first of ``events`` whose key is that id (-1: none, or id < 0)."""
    ok = keys >= 0
    uniq, first = np.unique(keys[ok], return_index=True)
    owner = events[ok][first]
    if not uniq.size:
        return np.full(wanted.size, -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(uniq, wanted), uniq.size - 1)
    return np.where((wanted >= 0) & (uniq[pos] == wanted), owner[pos], -1)


def steps_down(tree: Tree) -> np.ndarray:
    """Each node's step in a finished display tree (-1 outside any step): the walk down its CSR
    children that ``finish_tree`` makes when it is given ``step_of``."""
    out = np.full(len(tree.kind), -1, dtype=np.int64)
    _depths(tree.child_off, tree.child_idx, len(tree.kind), (tree.kind == K["step"], out))
    return out


def _acyclic(parent: np.ndarray, cparent: np.ndarray, start: np.ndarray, n: int,
             diag: dict, step_of: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CSR offsets, children, depths) of the display tree, after making sure every node hangs
    from the root: a node the walk down from the root does not reach sits on a parent cycle,
    which no rule above should make; it is re-hung under its containment parent (acyclic: an
    event's is always one that started before it), or the root, and counted, never dropped.
    ``step_of``: (which nodes are steps, an array filled with each node's step), as ``_depths``."""
    for attempt in range(3):
        off, idx = _csr(parent, start, n)
        depth, reached = _depths(off, idx, n, step_of)
        lost = np.flatnonzero(~reached)
        if not lost.size:
            return off, idx, depth
        if not attempt:
            diag["parent_cycles_broken"] = int(lost.size)
        # along cparent the lost nodes reach a reached one or the root (no reached node's path
        # runs through a lost one); should even that fail, the root takes them
        up = cparent[lost] if not attempt else np.zeros(lost.size, dtype=parent.dtype)
        parent[lost] = np.where(up >= 0, up, 0)
    raise AssertionError("unreachable: the root holds every node after the second pass")


def _depths(off: np.ndarray, idx: np.ndarray, n: int,
            step_of: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(depth of each node, reached from the root) by a walk down the CSR children. With
    ``step_of`` = (is_step, out): ``out`` gets each reached node's step on the way down (itself
    if a step, else its parent's; -1 outside any step), which saves a second walk by levels."""
    reached = np.zeros(n, dtype=bool)
    reached[0] = True

    depth = np.zeros(n, dtype=np.int32)  # int16 overflowed at 32,767 nested events
    frontier = np.array([0])
    if step_of is not None:
        step_of[1][0] = 0 if step_of[0][0] else -1
    d = 0
    while frontier.size:
        d += 1
        starts, ends = off[frontier], off[frontier + 1]
        lens = ends - starts
        if not lens.sum():
            break
        kids = idx[np.repeat(ends - lens.cumsum(), lens) + np.arange(lens.sum())]
        new = ~reached[kids]  # a cycle cannot keep the walk going
        if step_of is not None:
            is_step, out = step_of
            up = np.repeat(frontier, lens)[new]
            kids = kids[new]
            out[kids] = np.where(is_step[kids], kids, out[up])
        else:
            kids = kids[new]
        depth[kids] = d
        reached[kids] = True
        frontier = kids
    return depth, reached


@dataclass
class _Order:
    """The host events in the nesting's (track, ts, -dur, kind, index) order, with their
    tracks, starts and ends (the durations the nesting used): each thread's events are one
    slice of it, already gathered and sorted by start, for the stages after the nesting."""
    events: np.ndarray
    track: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    top: np.ndarray      # the nesting put it at its thread's top (no host parent)

    def on(self, track: int) -> slice:
        """The slice of the events on ``track``."""
        # the needles in the track column's own type: Python ints made numpy cast the whole
        # column to int64 first (~6 ms a call on 2.5M host events)
        lo, hi = np.searchsorted(self.track, np.array([track, track + 1], dtype=self.track.dtype)).tolist()
        return slice(lo, hi)


@dataclass
class _Links:
    """What the linking stages fill in, per event: display and containment parents (node ids),
    the node layout (0 root, 1..T threads, then the events from ``base``, then synthetic nodes)
    and the diagnostics counted on the way."""
    store: EventStore
    thread_node: dict            # host track -> its thread node
    base: int                    # node id of event 0
    parent: np.ndarray
    cparent: np.ndarray
    host: np.ndarray             # host events
    diag: dict
    group_nodes: dict = field(default_factory=dict)   # GPU track key -> "no launch found" node
    dur: np.ndarray | None = None                      # the store's durations, frames cut (frame_ends.py)
    groups: list = field(default_factory=list)        # step_tops.step_thread_groups
    nested: "_Order | None" = None                     # the host events in nesting order (_nest_host)

    @classmethod
    def start(cls, store: EventStore) -> "_Links":
        is_host = kind_mask(store.kind, HOST_KINDS)
        host_tracks = np.flatnonzero(np.bincount(store.track[is_host], minlength=1)).tolist()
        n_ev = len(store)
        diag = {"partial_overlaps": 0, "python_frames_cut": 0, "launches_without_gpu": 0, "gpu_without_launch": 0,
                "linked_by_external_id": 0, "flows_without_end": 0, "events_missing_fields": store.missing_fields,
                "args_wrong_types": store.wrong_types, "events_unreadable": dict(store.unreadable),
                "times_out_of_range": store.times_out_of_range, "negative_durations": store.negative_durations,
                "skipped_categories": dict(store.skipped), "steps_spanned_by_events": 0}
        return cls(store=store, thread_node={t: 1 + i for i, t in enumerate(host_tracks)}, base=1 + len(host_tracks),
                   parent=np.full(n_ev, -1, dtype=np.int64), cparent=np.full(n_ev, -1, dtype=np.int64),
                   host=np.nonzero(is_host)[0], diag=diag)


def build_tree(store: EventStore, title: str = "trace", cut_frames: bool = False,
               workers: int | None = None) -> Tree:
    """The hierarchy of ``store``'s events, in stages: host events nest on their thread, steps
    stay on top, other threads' work shows under its step, GPU activity goes under its launch;
    then the node arrays, with every node hanging from the root. ``cut_frames``: Python frames
    that outlast the call they started in are cut to its end first (frame_ends.py) — for
    recordings whose torch builds its own tree from ops alone (<= 2.12); torch >= 2.13 nests
    the frames as written, and so does this tree then. ``workers``: processes the nesting may
    use (nesting.py; one: this one only)."""
    return finish_tree(link_tree(store, title, cut_frames, workers))


def link_tree(store: EventStore, title: str = "trace", cut_frames: bool = False,
              workers: int | None = None) -> Tree:
    """``build_tree`` up to its last stage: every parent and node array, but not yet the display
    tree's CSR children and depths (None until ``finish_tree``). What needs only the
    containment tree or the nodes' parents (the rollups' climbs, the step windows) can start
    here, beside ``finish_tree`` (trace.py)."""
    links = _Links.start(store)

    def host() -> None:  # the host events' parents: nested, then the steps kept on top
        _nest_host(links, cut_frames, workers)
        steps = np.flatnonzero(store.kind == K["step"])  # found once for both step stages
        steps_on_top(links, steps)
        links.groups = step_thread_groups(store, links.nested, links.parent, links.thread_node, steps)

    # host events' parents, GPU activity's and the backward links touch disjoint parts (the
    # nesting's helpers may fork while the other two run: they only run numpy on arrays)
    _, _, fwd_of = together([host, lambda: _link_gpu(links), lambda: _link_backward(store, links.base)], cores(workers))
    tree = _assemble(links, title)
    tree.fwd_of = fwd_of
    return tree


def finish_tree(tree: Tree, step_of: np.ndarray | None = None) -> Tree:
    """The display tree's CSR children and depths, after making sure every node hangs from the
    root (``_acyclic``: it may re-hang a node on a parent cycle, which changes no containment
    parent and no GPU node's parent). ``step_of``, when given, is filled with each node's step
    in the display tree (-1 outside any step), found on the walk that finds the depths."""
    steps = (tree.kind == K["step"], step_of) if step_of is not None else None
    tree.child_off, tree.child_idx, tree.depth = _acyclic(tree.parent, tree.cparent, tree.start, len(tree.kind),
                                                          tree.diagnostics, steps)
    return tree


def _nest_host(links: _Links, cut_frames: bool = False, workers: int | None = None) -> None:
    """Host events nest by time on their thread, one stack per thread, in (track, ts, -dur,
    kind, index) order (nesting.py): parents strictly enclose children, ties broken by that
    total order, so the containment parents cannot form a cycle. With ``cut_frames``, frames
    that outlast the call they started in are cut to its end (frame_ends.py, from the closers
    the nesting found) and the events nested again, for as many rounds as frames are cut (at
    most ``MAX_ROUNDS``); such a frame is a partial overlap, so a trace whose nesting finds
    none (most) is nested once."""
    store, host, ts = links.store, links.host, links.store.ts
    links.dur = store.dur
    sentinel = {t: -node - 1 for t, node in links.thread_node.items()}  # negative: encoded thread node
    cut = np.zeros(len(store), dtype=bool)
    for rounds_left in range(MAX_ROUNDS, -1, -1):
        # the nesting order ranks longer events first at one start: the cut ones may move
        order = _host_order(host, store.track, ts, links.dur, store.kind)
        o_ts, o_track = ts[order], store.track[order]
        o_end = o_ts + links.dur[order]
        nested = nest(o_ts, o_end, order + links.base, o_track, sentinel, workers)
        if not (cut_frames and nested.partial and rounds_left):
            break
        new_end, frames = cut_frame_ends(o_end, store.kind[order], nested.closers)
        if not frames.size:
            break
        if not cut.any():
            links.dur = links.dur.copy()  # the store keeps the ends as written
        links.dur[order] = new_end - o_ts
        cut[order[frames]] = True
    links.diag["python_frames_cut"] = int(cut.sum())
    links.diag["partial_overlaps"] = nested.partial
    top = nested.parents < 0
    cp = np.where(top, -nested.parents - 1, nested.parents)
    links.cparent[order] = cp
    links.parent[order] = cp
    links.nested = _Order(order, o_track, o_ts, o_end, top)  # the last round's: the durations links.dur holds


def _link_gpu(links: _Links) -> None:
    """GPU activity under its launch: the runtime call with its correlation id first, the op or
    annotation with its External id second; the rest under one "no launch found" node per GPU
    track (numbered in order of first activity). Counts what did not link."""
    store, base, diag = links.store, links.base, links.diag
    kind_e, n_ev = store.kind, len(store)
    gpu = np.nonzero(kind_mask(kind_e, GPU_KINDS))[0]
    runtime = np.nonzero(kind_e == K["runtime"])[0]
    op_nodes = np.nonzero(kind_mask(kind_e, [K["op"], K["annotation"]]))[0]
    by_corr = _first_of(store.corr[runtime], runtime, store.corr[gpu])     # the first runtime call per id
    by_ext_id = _first_of(store.ext[op_nodes], op_nodes, store.ext[gpu])   # the first op or annotation per id
    via_ext = (by_corr < 0) & (by_ext_id >= 0)
    launcher = np.where(by_corr >= 0, by_corr, by_ext_id)
    linked = launcher >= 0
    links.parent[gpu[linked]] = links.cparent[gpu[linked]] = base + launcher[linked]
    lone = gpu[~linked]
    tracks, first = np.unique(store.track[lone], return_index=True)
    tracks = tracks[np.argsort(first)]
    links.group_nodes = {store.track_keys[t]: base + n_ev + i for i, t in enumerate(tracks.tolist())}
    if lone.size:
        node_of_track = np.zeros(len(store.track_keys), dtype=np.int64)
        node_of_track[tracks] = base + n_ev + np.arange(tracks.size)
        links.parent[lone] = links.cparent[lone] = node_of_track[store.track[lone]]
    diag["linked_by_external_id"] = int(via_ext.sum())
    diag["gpu_without_launch"] = int(lone.size)
    launched = np.zeros(n_ev, dtype=bool)
    launched[by_corr[by_corr >= 0]] = True
    names_e = store.names
    launch_word = np.zeros(len(names_e), dtype=bool)
    rt_names = np.unique(store.name_id[runtime]).tolist()  # only runtime calls' names matter
    launch_word[rt_names] = [any(w in names_e[i] for w in LAUNCH_WORDS) for i in rt_names]
    diag["launches_without_gpu"] = int(
        (~launched[runtime] & launch_word[store.name_id[runtime]]).sum()) if gpu.size else 0
    diag["flows_without_end"] = store.flows.without_end()


def _assemble(links: _Links, title: str) -> Tree:
    """The node arrays: root, threads, events, "no launch found" groups, other-thread groups
    under steps; synthetic nodes span their children (the CSR and depths: ``finish_tree``)."""
    store, base, thread_node, group_nodes, groups = links.store, links.base, links.thread_node, links.group_nodes, links.groups
    n_ev = len(store)
    names = list(store.names)
    extra_names: dict[str, int] = {}

    def nid(s: str) -> int:
        if s not in extra_names:
            extra_names[s] = len(names)
            names.append(s)
        return extra_names[s]

    G = len(group_nodes)
    n = base + n_ev + G + len(groups)
    kind = np.empty(n, dtype=np.int8)
    name_id = np.empty(n, dtype=np.int32)
    ev, start, d, parent, cparent = (np.empty(n, dtype=np.int64) for _ in range(5))
    for col, fill in ((ev, -1), (start, 0), (d, 0), (parent, -1), (cparent, -1)):
        col[:base] = col[base + n_ev:] = fill  # the events' part is copied in below, not filled first
    kind[0], name_id[0] = K["root"], nid(title)
    moved: dict = {}
    for g in groups:
        moved[g[1]] = moved.get(g[1], 0) + g[2].size
    for t, node in thread_node.items():
        pid, tid = store.track_keys[t]
        label = _thread_label(store, pid, tid)
        if moved.get(t) and moved[t] == int((links.parent == node).sum()):  # all of it went under steps
            label += " (its work is shown under the steps)"
        kind[node], name_id[node] = K["thread"], nid(label)
        parent[node] = cparent[node] = 0
    sl = slice(base, base + n_ev)
    kind[sl], name_id[sl], ev[sl] = store.kind, store.name_id, np.arange(n_ev)
    start[sl], d[sl] = store.ts, links.dur  # frames cut where _nest_host cut them
    parent[sl], cparent[sl] = links.parent, links.cparent
    for key, node in group_nodes.items():
        _, dev, stream = key
        kind[node], name_id[node] = K["gpu"], nid(f"GPU {dev} stream {stream}: activity with no launch found")
        parent[node] = cparent[node] = 0
    for j, (step_e, track, members) in enumerate(groups):
        node = base + n_ev + G + j
        pid, tid = store.track_keys[track]
        kind[node], name_id[node] = K["thread"], nid(_thread_label(store, pid, tid))
        parent[node] = cparent[node] = base + step_e
        parent[base + members] = node
    orphan = parent[sl] < 0  # host events on tracks with nothing (should not happen) -> root
    parent[sl][orphan] = 0
    cparent[sl][orphan] = 0
    synthetic = np.zeros(n, dtype=bool)
    synthetic[list(thread_node.values()) + list(group_nodes.values())] = True
    synthetic[base + n_ev + G:] = True
    _span_children(synthetic, parent, start, d, cparent)
    return Tree(store=store, names=names, name_id=name_id, kind=kind, ev=ev, start=start, dur=d,
                parent=parent, cparent=cparent, child_off=None, child_idx=None, depth=None,
                diagnostics=links.diag)


def _span_children(synthetic: np.ndarray, parent: np.ndarray, start: np.ndarray, d: np.ndarray,
                   cparent: np.ndarray) -> None:
    """Synthetic nodes (threads, groups) span their children, display and containment (a thread
    whose work all went under the steps still spans it), and the root spans every node that has
    time: an empty synthetic node (start 0) would stretch it back to 0. One pass, not a scan per
    node; the spans are gathered in arrays the size of the synthetic nodes (lo/hi over the whole
    tree, and masked writes back into it, were ~0.1 s of the serial load at 1 GB)."""
    syn = np.flatnonzero(synthetic)
    is_syn = np.append(synthetic, False)  # read for parent -1 at its end: False
    is_syn[0] = False
    has = np.zeros(syn.size, dtype=bool)
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for up in (parent, cparent):
        kids = np.flatnonzero(is_syn[up])
        if kids.size:
            lo = np.where(has, start[syn], big)
            hi = np.where(has, start[syn] + d[syn], small)
            g = np.searchsorted(syn, up[kids])  # each kid's synthetic parent, as its place in syn
            np.minimum.at(lo, g, start[kids])
            np.maximum.at(hi, g, start[kids] + d[kids])
            has |= hi > small
            start[syn[has]], d[syn[has]] = lo[has], _span(lo[has], hi[has])
    timed = ~synthetic
    timed[syn[has]] = True
    timed[0] = False
    if timed.any():
        start[0] = np.min(start, where=timed, initial=big)
        d[0] = _span(start[:1], np.max(start + d, where=timed, initial=small, keepdims=True))[0]


def _span(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``hi - lo`` (hi >= lo), at most the int64 maximum: times at both ends of the clock (a
    hostile trace) are further apart than int64 holds, and the wrapped difference was negative."""
    d = hi - lo
    return np.where(d < 0, np.iinfo(np.int64).max, d)


def _thread_label(store: EventStore, pid, tid) -> str:
    label = store.thread_names.get((pid, tid))
    if not label:  # thread 0 and negative ids say what they are (lanes.LABEL_RULES)
        from tracetui.model.lanes import thread_label
        label = thread_label(store, pid, tid) if isinstance(tid, int) and tid <= 0 else f"thread {tid}"
    pname = store.process_names.get(pid) or "pid"
    return f"{label} [{pname} {pid}]"


def _link_backward(store: EventStore, base: int) -> dict:
    """Backward op -> forward op with the same Sequence number (forward ops have Fwd thread id 0):
    the first forward op of each number, in event order (vectorised: a Python loop over every
    op was 0.12 s of the serial load at 1 GB)."""
    ops = np.nonzero((store.kind == K["op"]) & (store.seq >= 0))[0]
    if not ops.size:
        return {}
    seq, bwd = store.seq[ops], store.fwd_tid[ops] > 0
    f_seq, first = np.unique(seq[~bwd], return_index=True)   # first occurrence: ops are in event order
    f_op = ops[~bwd][first]
    b_op, b_seq = ops[bwd], seq[bwd]
    if not f_seq.size or not b_op.size:
        return {}
    pos = np.minimum(np.searchsorted(f_seq, b_seq), f_seq.size - 1)
    hit = f_seq[pos] == b_seq
    return dict(zip((b_op[hit] + base).tolist(), (f_op[pos[hit]] + base).tolist()))
