"""Host events nest by time containment on their thread, by torch.profiler's stack rule.

The rule (``EventList._build_tree``) is a walk over the events in (track, ts, -dur, kind,
index) order: an open event that ends at or before the next one's start, or that the next one
outlasts, is closed for good; the next event's parent is the innermost event still open.
``walk`` is that loop in Python. ``in_numpy`` finds the same parents with whole-array steps:

1. An event is closed by being outlasted exactly at the first later event on its track that
   starts inside it and ends after it (nothing else can close it before its end). Ending it
   there instead changes no step of the walk, and leaves no two events that cross.
2. With no crossings, the events open at an event's start are exactly its ancestors: their
   count is its depth, found by counting the ends before that start.
3. Its parent is the latest earlier event on its track one level up.

Every parent found is checked to contain its child, which holds only if the depths were right;
a failed check (or times too wide to pack in int64) leaves the events to ``walk``. The tests
compare both on random and real traces.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tracetui.read import forked
from tracetui.read.together import together

OVERHANG_NS = 1000
"""A child may end this much after its parent before it counts as a partial overlap (clock skew)."""

NEST_SPLIT_MIN = 100_000
"""Host events from which the nesting is split in stretches nested side by side. Measured when
the split was over two processes (build_tree once in a fresh process, 3 interleaved rounds):
240k host events 0.17-0.19 s split against 0.22-0.24 s not; 176k 0.16-0.19 s against 0.19-0.21
s. Threads, which need no fork and send nothing back, cost less than that."""

CHUNK = 1 << 18
"""Events nested in numpy at a time (cut where the walk's stack is empty), which bounds the
range-maximum table to ~40 MB on a GB-sized trace."""

LONG_SPAN = CHUNK // 4
"""An event with more later starts inside it than this is long (``_peeled``): a with_stack
recording's script and training-loop frames."""

MAX_LONG = 4096
SPAN_BUDGET = 8
"""At most this many long events, holding at most ``SPAN_BUDGET`` times the events in all
(``_peeled`` marks each one's span): past either, the events are nested as one stretch."""

TABLE_MAX_BYTES = 64 << 20
"""The most the range-maximum table for step 1 may take; past it the events are walked."""


class Nested(NamedTuple):
    """What the walk finds, per event in nesting order."""
    parents: np.ndarray   # containment parent: a node id, or a thread's sentinel
    partial: int          # events closed by one that outlasts them by more than OVERHANG_NS
    closers: np.ndarray   # the position of the event that outlasted and so closed it, or -1


def nest(ts: np.ndarray, end: np.ndarray, node: np.ndarray, track: np.ndarray,
         sentinel: dict, workers: int | None = None, peel: bool = True) -> Nested:
    """Containment parents (node ids; a thread as its ``sentinel``) of host events sorted by
    (track, ts, -dur, kind, index), how many were closed by a partial overlap, and by what
    (frame_ends.py cuts the frames that close the calls they started in). From
    ``NEST_SPLIT_MIN`` events, stretches cut where the stack is empty are nested by ``workers``
    threads (``forked.default_workers()`` when None), and those numpy cannot nest are walked by
    as many processes (this one and forked children): on a GB trace with 8 cores the nesting is
    most of the link, which no other stage spreads. Where
    the stack stays full for more than ``CHUNK`` events, the long events are set aside first
    so that the rest can be split (``peel``, ``_peeled``)."""
    k = _ways(ts.size, workers)
    # where the stack is empty, found once: both the split and the stretches cut there (on a
    # slice that starts at such a place, the scan gives the same answer as on the whole)
    free = _free(track, ts, end) if k > 1 or ts.size > CHUNK else None
    if peel and k > 1 and _longest_stretch(free) > CHUNK:  # one process: the walk is as fast
        got = _peeled(ts, end, node, track, sentinel, workers)
        if got is not None:
            return got
    cuts = walk_cuts(free, k) if k > 1 else []
    if not cuts:
        return _nest(ts, end, node, track, sentinel, free)
    bounds = [0, *cuts, ts.size]
    # numpy releases the GIL: the stretches nest in threads, which write no result to send back
    # (forked children did: ~0.04 s more on 16 cores at 1 GB); only the walks, Python that holds
    # the GIL, go to processes
    parts = together([lambda a=a, b=b: _in_numpy(ts[a:b], end[a:b], node[a:b], track[a:b], sentinel, free[a:b], a)
                      for a, b in zip(bounds, bounds[1:])], len(bounds) - 1)
    stretches = [s for part in parts for s in part]
    lost = [(a, b) for a, b, got in stretches if got is None]
    walked = [w for group in forked.spread([lambda g=g: [walk(ts[a:b], end[a:b], node[a:b], track[a:b], sentinel)
                                                           for a, b in g] for g in _balanced(lost, k)])
              for w in group] if lost else []
    return _joined(stretches, walked)


def _balanced(stretches: list[tuple[int, int]], k: int) -> list[list[tuple[int, int]]]:
    """``stretches`` in at most ``k`` consecutive groups of about equal events: each goes to the
    group its middle event falls in."""
    total = max(sum(b - a for a, b in stretches), 1)
    groups: dict[int, list[tuple[int, int]]] = {}
    done = 0
    for a, b in stretches:
        groups.setdefault(min(k - 1, k * (2 * done + b - a) // (2 * total)), []).append((a, b))
        done += b - a
    return list(groups.values()) or [[]]


def _longest_stretch(free: np.ndarray) -> int:
    """The most events between two places where the stack is empty."""
    return int(np.diff(np.r_[np.flatnonzero(free), free.size]).max()) if free.size else 0


def _peeled(ts: np.ndarray, end: np.ndarray, node: np.ndarray, track: np.ndarray, sentinel: dict,
            workers: int | None) -> Nested | None:
    """``nest`` with the long events (more than ``LONG_SPAN`` later starts inside them) set
    aside, or None where that would not give the walk's answer.

    A ``with_stack`` recording keeps the script's frame (and the training loop's) open for the
    whole thread: the stack is never empty, so the events were one stretch, walked in Python
    in one process. Without those few long events the rest nest as usual, in stretches and
    processes; the long ones are walked alone. This is exact when no long event crosses any
    other event: no short event is open where a long one starts (the long one would close it),
    none started inside a long one outlasts it, and the long ones nest among themselves. A
    short event is then never an ancestor of a long one (it would hold more starts than the
    long one does), so a short event found at its thread's top goes under the innermost long
    event open at its start."""
    found = _long_events(track, ts, end)
    if found is None:
        return None
    lp, inner = found
    is_short = np.ones(ts.size, dtype=bool)
    is_short[lp] = False
    sp = np.flatnonzero(is_short)
    up = inner[sp]  # (only what the short events need is kept while they nest: a GB trace's peak)
    del is_short, inner, found  # the tuple held ``inner`` too
    longs = walk(ts[lp], end[lp], node[lp], track[lp], sentinel)
    if (longs.closers >= 0).any():
        return None  # long events that cross each other
    held = up >= 0
    if np.any(end[sp[held]] > end[up[held]]):
        return None  # a short event that outlasts the long one it started in
    short = nest(ts[sp], end[sp], node[sp], track[sp], sentinel, workers, peel=False)
    parents = np.empty(ts.size, dtype=np.int64)
    parents[lp] = longs.parents
    parents[sp] = np.where((short.parents < 0) & held, node[np.maximum(up, 0)], short.parents)
    closers = np.full(ts.size, -1, dtype=np.int64)
    closers[sp] = np.where(short.closers >= 0, sp[np.maximum(short.closers, 0)], -1)
    return Nested(parents, short.partial, closers)


def _long_events(track: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions of the long events, the innermost long event each event starts inside or -1),
    or None: none, too many, times that do not pack, or a short event still open where a long
    one starts."""
    packed = _packed(track, ts, end) if np.all(end >= ts) else None
    if packed is None:
        return None
    _, _, key_s, key_e = packed
    del packed
    n = ts.size
    reach = np.searchsorted(key_s, key_e, side="left")  # past the last event starting inside
    lp = np.flatnonzero(reach - np.arange(n) - 1 > LONG_SPAN)
    if not 0 < lp.size <= MAX_LONG or int((reach[lp] - lp).sum()) > SPAN_BUDGET * n:
        return None
    reach = reach[lp]
    shorts_end = key_e.copy()
    shorts_end[lp] = -1  # the keys are >= 0
    furthest = np.maximum.accumulate(shorts_end)  # packed keys: another track's are all lower
    del shorts_end, key_e
    after = lp > 0
    if np.any(furthest[lp[after] - 1] > key_s[lp[after]]):
        return None  # a short event still open where a long one starts
    del furthest, key_s
    inner = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)
    for p, r in zip(lp.tolist(), reach.tolist()):  # outer ones first: inner ones overwrite
        inner[p + 1:r] = p
    return lp, inner


def _ways(n: int, workers: int | None) -> int:
    """In how many stretches (threads; processes for walks) ``n`` events nest: one below
    ``NEST_SPLIT_MIN`` or where a load keeps to one core (``forked.available``), else the
    workers asked for, at most one per ``NEST_SPLIT_MIN // 2`` events."""
    if n < NEST_SPLIT_MIN or not forked.available():
        return 1
    if workers is None:
        workers = forked.default_workers()
    return max(1, min(workers, n // (NEST_SPLIT_MIN // 2)))


def _nest(ts, end, node, track, sentinel, free: np.ndarray | None = None) -> Nested:
    """``nest`` in this process: numpy stretch by stretch, the walk where numpy steps aside.
    ``free`` is ``_free`` of these events, where it was computed already."""
    stretches = _in_numpy(ts, end, node, track, sentinel, free)
    return _joined(stretches, [walk(ts[a:b], end[a:b], node[a:b], track[a:b], sentinel)
                               for a, b, got in stretches if got is None])


def _in_numpy(ts, end, node, track, sentinel, free: np.ndarray | None = None,
              at: int = 0) -> list[tuple[int, int, tuple | None]]:
    """(a, b, (parents, partial overlaps, closers) or None) per stretch [a, b) of about
    ``CHUNK`` events cut where the stack is empty, positions shifted by ``at``: nested in
    numpy, None where the walk must do it (``in_numpy`` stepped aside)."""
    out = []
    for a, b in _chunks(track, ts, end, free):
        got = in_numpy(ts[a:b], end[a:b], track[a:b])
        if got is not None:
            parent, n, by = got
            top = np.flatnonzero(parent < 0)
            cp = node[a:b][np.maximum(parent, 0)]
            cp[top] = _sentinels(sentinel, track[a:b][top])
            got = (cp, n, by)
        out.append((a + at, b + at, got))
    return out


def _sentinels(sentinel: dict, tracks: np.ndarray) -> np.ndarray:
    """``[sentinel[t] for t in tracks]`` by a search of the few threads' keys, not a Python loop
    per top-level event (threads nest side by side: a loop would hold the GIL)."""
    keys = np.array(sorted(sentinel), dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, tracks), max(keys.size - 1, 0))
    if not keys.size or not np.array_equal(keys[pos], tracks):
        return np.array([sentinel[t] for t in tracks.tolist()], dtype=np.int64)  # (a KeyError, as ever)
    return np.array([sentinel[k] for k in keys.tolist()], dtype=np.int64)[pos]


def _joined(stretches: list, walked: list) -> Nested:
    """One ``Nested`` from ``_in_numpy``'s stretches, ``walked`` filling (in order) those it
    left to the walk; closers' positions become the whole's."""
    parts, closers, partial = [], [], 0
    walks = iter(walked)
    for a, b, got in stretches:
        cp, n, by = got if got is not None else next(walks)
        parts.append(cp)
        closers.append(np.where(by >= 0, by + a, -1))
        partial += n
    if not parts:
        return Nested(np.zeros(0, dtype=np.int64), 0, np.zeros(0, dtype=np.int64))
    return Nested(np.concatenate(parts), partial, np.concatenate(closers))


def _free(track: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where the walk's stack is empty: a thread's first event, or one that starts after every
    earlier event on its thread ended."""
    first = np.r_[True, track[1:] != track[:-1]]
    free = first.copy()
    firsts = np.flatnonzero(first).tolist()
    for a, b in zip(firsts, firsts[1:] + [ts.size]):
        if b - a > 1:
            free[a + 1:b] |= ts[a + 1:b] >= np.maximum.accumulate(end[a:b - 1])
    return free


def _chunks(track: np.ndarray, ts: np.ndarray, end: np.ndarray,
            free: np.ndarray | None = None) -> list[tuple[int, int]]:
    """[a, b) stretches of about CHUNK events that start where the walk's stack is empty."""
    n = ts.size
    if n <= CHUNK:
        return [(0, n)] if n else []
    at = np.flatnonzero(_free(track, ts, end) if free is None else free)
    bounds = [0]
    while n - bounds[-1] > CHUNK:
        i = int(np.searchsorted(at, bounds[-1] + CHUNK, side="right")) - 1
        nxt = int(at[i]) if at[i] > bounds[-1] else int(at[min(i + 1, at.size - 1)])
        if nxt <= bounds[-1]:
            break  # no empty stack after here: one stretch to the end
        bounds.append(nxt)
    return list(zip(bounds, bounds[1:] + [n]))


def walk(ts: np.ndarray, end: np.ndarray, node: np.ndarray, track: np.ndarray,
         sentinel: dict) -> Nested:
    """``nest`` as torch.profiler's loop: the reference ``in_numpy`` must agree with."""
    cuts = (np.flatnonzero(np.diff(track)) + 1).tolist()
    o_ts, o_end, o_node = ts.tolist(), end.tolist(), node.tolist()
    cpar: list[int] = []
    out = cpar.append
    closer = [-1] * len(o_node)
    partial = 0
    runs = list(zip([0] + cuts, cuts + [len(o_node)])) if o_node else []  # one run per thread
    for a, b in runs:
        # the thread sits at the bottom of the stack as a sentinel that nothing outlasts
        pe = 1 << 80
        stack, ends, at = [sentinel[int(track[a])]], [pe], [-1]
        push_n, push_e, push_i, pop_n, pop_e, pop_i = stack.append, ends.append, at.append, stack.pop, ends.pop, at.pop
        for i, (s, e, n) in enumerate(zip(o_ts[a:b], o_end[a:b], o_node[a:b]), a):
            # an open event that ends before this one starts, or that this one outlasts,
            # cannot be its parent and is closed for good
            while s >= pe or e > pe:
                if s < pe:  # outlasted: this one closes it
                    closer[at[-1]] = i
                    if e > pe + OVERHANG_NS:
                        partial += 1
                pop_e()
                pop_n()
                pop_i()
                pe = ends[-1]
            out(stack[-1])
            push_n(n)
            push_e(e)
            push_i(i)
            pe = e
    return Nested(np.asarray(cpar, dtype=np.int64), partial, np.asarray(closer, dtype=np.int64))


def walk_cuts(free: np.ndarray, k: int) -> list[int]:
    """Up to ``k - 1`` increasing positions near ``i/k`` of the events where the walk's stack is
    empty (``free``: ``_free`` of the events); nesting the stretches between them separately
    gives exactly the one walk's parents and counts. A cut is kept only within ``n / 2k`` events
    of its place (for two ways: between 25% and 75%), so no stretch has most of the work."""
    n = free.size
    at = np.flatnonzero(free)
    at = at[at > 0]
    cuts: list[int] = []
    if not at.size:
        return cuts
    for i in range(1, k):
        want = n * i // k
        j = int(np.searchsorted(at, want))
        near = [int(at[x]) for x in (j - 1, j) if 0 <= x < at.size]
        c = min(near, key=lambda c: abs(c - want))
        if abs(c - want) <= n // (2 * k) and (not cuts or c > cuts[-1]) and c < n:
            cuts.append(c)
    return cuts


def _bits(x: int) -> int:
    return max(int(x).bit_length(), 1)


def _packed(track: np.ndarray, ts: np.ndarray, end: np.ndarray):
    """(track rank per event, (rank, ts) and (rank, end) packed in int64), or None if too wide."""
    first = np.r_[True, track[1:] != track[:-1]]
    rank = np.cumsum(first) - 1
    lo = int(ts.min())
    shift = _bits(int(end.max()) - lo)
    if shift + _bits(int(rank[-1])) > 62:
        return None
    return first, rank, (rank << shift) | (ts - lo), (rank << shift) | (end - lo)


def in_numpy(ts: np.ndarray, end: np.ndarray, track: np.ndarray) -> tuple[np.ndarray, int, np.ndarray] | None:
    """(parent position per event, -1 for its thread; partial overlaps; closer position per
    event, -1 for none) as ``walk`` finds them, or None where the check fails or the keys do
    not pack."""
    n = ts.size
    if not n:
        return np.zeros(0, dtype=np.int64), 0, np.zeros(0, dtype=np.int64)
    packed = _packed(track, ts, end) if np.all(end >= ts) else None
    if packed is None:
        return None
    killer = _closers(end, *packed[2:])
    if killer is None:
        return None
    closed = killer >= 0
    partial = int((end[killer[closed]] > end[closed] + OVERHANG_NS).sum())
    first, rank, key_s, key_e = packed
    cut_end = np.where(closed, ts[np.maximum(killer, 0)], end)  # ends where the walk closes it
    parent = _parents(ts, cut_end, first, rank, key_s, key_e - (end - cut_end))
    return (parent, partial, killer) if parent is not None else None


def _closers(end: np.ndarray, key_s: np.ndarray, key_e: np.ndarray) -> np.ndarray | None:
    """For each event, the first later event on its track that starts inside it and outlasts
    it (the walk closes it there), or -1. A range-maximum table over the ends answers "the
    first end past mine" for all events at once."""
    n = end.size
    inside = np.searchsorted(key_s, key_e, side="left")  # past the last event starting inside
    cand = np.flatnonzero(inside > np.arange(1, n + 1))
    out = np.full(n, -1, dtype=np.int64)
    if not cand.size:
        return out
    span = int((inside[cand] - cand - 1).max())
    if (span.bit_length() + 1) * n * 8 > TABLE_MAX_BYTES:
        return None
    levels = [end]  # levels[k][i] = max(end[i : i + 2**k])
    while (1 << len(levels)) <= span:
        w, prev = 1 << (len(levels) - 1), levels[-1]
        nxt = prev.copy()
        np.maximum(prev[:n - w], prev[w:], out=nxt[:n - w])
        levels.append(nxt)
    cur, lim, mine = cand + 1, inside[cand], end[cand]
    for k in range(len(levels) - 1, -1, -1):  # skip every window whose ends are all <= mine
        w = 1 << k
        skip = (cur + w <= lim) & (levels[k][np.minimum(cur, n - 1)] <= mine)
        cur = np.where(skip, cur + w, cur)
    hit = cur < lim
    out[cand[hit]] = cur[hit]
    return out


def _parents(ts: np.ndarray, end: np.ndarray, first: np.ndarray, rank: np.ndarray,
             key_s: np.ndarray, key_e: np.ndarray) -> np.ndarray | None:
    """Each event's parent position (-1: its thread) in a family with no crossings, or None if
    some parent does not contain its child (then the family has crossings)."""
    n = ts.size
    pos = np.arange(n, dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(first, pos, 0))
    bits = _bits(n)
    if _bits(int(rank[-1])) + 2 * bits > 62:
        return None
    # ends at or before my start on my track; less me if I am empty, less the empty events
    # that start with me but come after me (the only later events that can end so early)
    done = np.searchsorted(np.sort(key_e), key_s, side="right") - run_start
    empty = end == ts
    same = np.r_[True, key_s[1:] != key_s[:-1]]
    group = np.flatnonzero(same)
    group_end = np.r_[group[1:], n]
    empties = np.add.reduceat(empty.astype(np.int64), group)
    g = np.cumsum(same) - 1
    later_empty = group_end[g] - np.maximum(pos + 1, (group_end - empties)[g])
    depth = (pos - run_start) - (done - empty - later_empty)
    key = (rank << (2 * bits)) | (depth << bits) | pos
    order = np.argsort(key)
    at = np.empty(n, dtype=np.int64)
    at[order] = np.searchsorted(key[order], key[order] - (1 << bits), side="left") - 1
    up = order[np.maximum(at, 0)]
    inner = depth > 0
    found = (at >= 0) & (rank[up] == rank) & (depth[up] == depth - 1)
    if not np.all(~inner | (found & (ts < end[up]) & (end <= end[up]))):
        return None
    return np.where(inner, up, -1)
