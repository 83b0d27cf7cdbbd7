"""Host events nest by torch.profiler's stack rule; partial overlaps are counted, not dropped.

The expected parents below were worked out by hand from the rule (EventList._build_tree): in
(start, -duration) order, an open event that ends at or before the next one's start, or that
the next one outlasts, is closed for good.
"""
from __future__ import annotations

import json
import random

import pytest

from tracetui.model import load_trace

# name: (ts µs, dur µs, expected parent: a name, or "thread")
EVENTS = {
    "outer": (0, 100, "thread"),
    "child": (10, 20, "outer"),
    "zero_at_child_end": (30, 0, "outer"),     # child closed: it ends where this starts
    "overlap": (50, 100, "thread"),            # outlasts `outer` by 50 µs: a partial overlap
    "inside_overlap": (60, 10, "overlap"),     # also inside `outer`, but `outer` is closed
    "skewed": (200, 10, "thread"),
    "skewed_next": (205, 5.5, "thread"),       # outlasts `skewed` by 0.5 µs: clock skew, not counted
    "wide": (300, 10, "thread"),
    "zero_at_start": (300, 0, "wide"),         # same start, shorter: inside
    "zero_at_end": (310, 0, "thread"),         # starts where `wide` ends: not inside
}


def _trace(tmp_path, order):
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": float(ts), "dur": float(d),
               "args": {}} for n, (ts, d, _) in ((n, EVENTS[n]) for n in order)]
    p = tmp_path / "nesting.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return load_trace(p)


def _parents(tr) -> dict:
    t = tr.tree
    out = {}
    for i in range(len(t)):
        if tr.kind(i) == "op":
            p = int(t.cparent[i])
            out[tr.name(i)] = "thread" if tr.kind(p) == "thread" else tr.name(p)
    return out


def test_parents_follow_the_stack_rule_and_partial_overlaps_are_counted(tmp_path):
    tr = _trace(tmp_path, list(EVENTS))
    assert _parents(tr) == {n: v[2] for n, v in EVENTS.items()}
    assert tr.tree.diagnostics["partial_overlaps"] == 1
    by_name = {tr.name(i): i for i in range(len(tr.tree)) if tr.kind(i) == "op"}
    # self time excludes only the children the rule gave it: child (20) and the zero-length one
    assert tr.roll.cpu_self[by_name["outer"]] == 80_000
    assert tr.roll.cpu_total[by_name["outer"]] == 100_000
    assert tr.roll.cpu_self[by_name["overlap"]] == 90_000


def test_nesting_does_not_depend_on_the_order_events_are_written(tmp_path):
    names = list(EVENTS)
    expected = {n: v[2] for n, v in EVENTS.items()}
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(names)
        tr = _trace(tmp_path, names)
        assert _parents(tr) == expected
        assert tr.tree.diagnostics["partial_overlaps"] == 1
        outer = next(i for i in range(len(tr.tree)) if tr.name(i) == "outer")
        assert tr.roll.cpu_self[outer] == 80_000


def test_host_order_is_the_track_start_longest_first_kind_index_order():
    import numpy as np

    from tracetui.model.tree import _host_order

    rng = np.random.default_rng(3)
    n = 5000
    # many ties; few; too wide to pack (the lexsort path); times at both ends of int64, whose
    # span does not fit in it (computed in int64 it wrapped and packed keys that collided)
    for span in (50, 10**6, 2**61, None):
        track = rng.integers(0, 4, n).astype(np.int32)
        ts = rng.integers(0, span, n, dtype=np.int64) if span else rng.integers(-2**63 + 1, 2**63 - 1, n)
        ts[rng.random(n) < 0.3] = ts[0]  # runs of equal starts
        dur = rng.integers(0, 100, n, dtype=np.int64)
        kind = rng.integers(2, 8, n).astype(np.int8)
        host = np.sort(rng.choice(n, n // 2, replace=False))
        want = host[np.lexsort((host, kind[host], -dur[host], ts[host], track[host]))]
        assert np.array_equal(_host_order(host, track, ts, dur, kind), want)
    assert _host_order(np.zeros(0, dtype=np.int64), track, ts, dur, kind).size == 0


def test_children_are_ordered_by_parent_then_start_then_index():
    import numpy as np

    from tracetui.model.tree import by_parent_then_start

    rng = np.random.default_rng(5)
    n = 4000
    for lo, hi in ((0, 50), (0, 2**40), (-2**63 + 1, 2**63 - 1)):
        par = rng.integers(0, 300, n)
        start = rng.integers(lo, hi, n)
        start[rng.random(n) < 0.2] = start[0]
        assert np.array_equal(by_parent_then_start(par, start), np.lexsort((np.arange(n), start, par)))


EXTREMES = {  # name: (ts µs, dur µs, expected parent); ns at both ends of int64
    "far_past": (-9_200_000_000_000_000, 100, "thread"),
    "past_child": (-9_200_000_000_000_000 + 10, 20, "far_past"),
    "now": (0, 50, "thread"),
    "now_child": (5, 10, "now"),
    "far_future": (9_200_000_000_000_000, 100, "thread"),
    "future_child": (9_200_000_000_000_000 + 10, 20, "far_future"),
}


def test_events_at_both_ends_of_the_clock_nest_by_their_times(tmp_path):
    """Hostile times: a trace whose events lie 18.4e18 ns apart (the span overflows int64)
    nests each event in the one that holds it, as on any other clock."""
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": d, "args": {}}
              for n, (ts, d, _) in EXTREMES.items()]
    p = tmp_path / "extremes.json"
    p.write_text(json.dumps({"traceEvents": events}))
    tr = load_trace(p)
    assert _parents(tr) == {n: v[2] for n, v in EXTREMES.items()}
    by_name = {tr.name(i): i for i in range(len(tr.tree)) if tr.kind(i) == "op"}
    assert tr.roll.cpu_self[by_name["far_past"]] == 80_000 and tr.roll.cpu_self[by_name["now"]] == 40_000
    assert (tr.tree.dur >= 0).all()  # the thread and the root span more than int64 holds: capped, not wrapped


def test_nesting_split_over_threads_and_walk_processes_gives_the_one_walks_tree(tmp_path, monkeypatch):
    """Stretches nest in threads, side by side; those numpy cannot nest are walked in forked
    processes. Either way the tree is the one serial load's, field for field."""
    import numpy as np

    from benchmarks.make_large_trace import replicate
    from tracetui.read import forked
    from tracetui.model import nesting

    from tests.conftest import TRACES

    big = tmp_path / "big.json"
    replicate(TRACES / "mlp_eager.json.gz", big, 20_000)
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    serial = load_trace(big)
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    monkeypatch.setattr(nesting, "NEST_SPLIT_MIN", 2)
    if not forked.available():
        pytest.skip("needs fork and two cores")
    spawns, parts = [], []
    real_spawn, real_part, real_numpy = forked.spawn, nesting._in_numpy, nesting.in_numpy
    monkeypatch.setattr(forked, "spawn", lambda c: spawns.append(1) or real_spawn(c))
    monkeypatch.setattr(nesting, "_in_numpy", lambda *a, **k: parts.append(a[-1] if len(a) > 6 else 0) or real_part(*a, **k))
    for workers in (2, 5):  # 5: more stretches than this machine's cores, as on a 16-core server
        for walked in (False, True):  # True: numpy steps aside everywhere, as on crossing events
            monkeypatch.setattr(nesting, "in_numpy", (lambda *a: None) if walked else real_numpy)
            spawns.clear()
            parts.clear()
            split = load_trace(big, workers=workers)
            assert len(set(parts)) == workers  # the nesting was split in that many ways
            if walked:
                assert len(spawns) >= workers - 1  # the walks went to processes (the decode may fork too)
            for field in ("parent", "cparent", "child_off", "child_idx", "depth"):
                assert np.array_equal(getattr(serial.tree, field), getattr(split.tree, field)), (workers, walked, field)
            assert serial.tree.diagnostics == split.tree.diagnostics
    assert serial.tree.diagnostics["partial_overlaps"] > 0


def test_balanced_groups_cover_the_stretches_in_order():
    from tracetui.model.nesting import _balanced

    stretches = [(0, 10), (10, 50), (50, 55), (55, 90), (90, 100), (100, 180)]
    for k in (1, 2, 3, 4, 8):
        groups = _balanced(stretches, k)
        assert 1 <= len(groups) <= k
        assert [s for g in groups for s in g] == stretches
    assert _balanced([], 3) == [[]]
    even = [(i * 100, (i + 1) * 100) for i in range(8)]
    assert [len(g) for g in _balanced(even, 4)] == [2, 2, 2, 2]  # equal stretches: equal groups
    assert [len(g) for g in _balanced(even, 8)] == [1] * 8


def test_thread_sentinels_by_search_equal_the_dict_and_raise_as_it_does():
    import numpy as np

    from tracetui.model.nesting import _sentinels

    sentinel = {3: -2, 1: -1, 70: -9}
    tracks = np.array([1, 3, 70, 70, 1, 3], dtype=np.int32)
    assert _sentinels(sentinel, tracks).tolist() == [sentinel[t] for t in tracks.tolist()]
    assert _sentinels(sentinel, tracks[:0]).tolist() == []
    with pytest.raises(KeyError):
        _sentinels(sentinel, np.array([2]))


def test_walk_cuts_split_where_the_stack_is_empty():
    """Each stretch between the cuts starts on an empty stack: nested alone, it gives the walk's
    own parents (checked against one walk over the whole on random nested events)."""
    import numpy as np

    from tracetui.model import nesting

    rng = np.random.default_rng(5)
    ts, end, track = [], [], []
    t = 0
    for _ in range(400):  # 400 top-level events, each with up to 3 nested children
        d = int(rng.integers(50, 100))
        ts.append(t); end.append(t + d); track.append(0)
        for c in range(int(rng.integers(0, 4))):
            ts.append(t + 1 + 10 * c); end.append(t + 9 + 10 * c); track.append(0)
        t += d + int(rng.integers(0, 3))  # sometimes back to back, sometimes a gap
    ts, end, track = (np.asarray(x, dtype=np.int64) for x in (ts, end, track))
    node = np.arange(ts.size, dtype=np.int64) + 10
    whole, n_whole, _ = nesting.walk(ts, end, node, track, {0: -1})
    free = nesting._free(track, ts, end)
    for k in (2, 3, 7):
        cuts = nesting.walk_cuts(free, k)
        assert cuts == sorted(set(cuts)) and len(cuts) == k - 1 and all(free[c] for c in cuts)
        parts = [nesting.walk(ts[a:b], end[a:b], node[a:b], track[a:b], {0: -1})
                 for a, b in zip([0, *cuts], [*cuts, ts.size])]
        assert np.array_equal(np.concatenate([p.parents for p in parts]), whole)
        assert sum(p.partial for p in parts) == n_whole


def test_a_failing_child_leaves_its_part_to_the_parent():
    import os

    from tracetui.read import forked

    me = os.getpid()

    def child_part():
        if os.getpid() != me:
            raise RuntimeError("the child fails")
        return "done here"

    assert forked.beside(child_part, lambda: 2) == ("done here", 2)
    assert forked.beside(lambda: os.getpid() != me, lambda: 3) == (True, 3)  # normally: the child's


def _walk_order(rng, n, tracks, spread):
    """Random host events on a few threads, sorted as the nesting walks them: many share a
    start, an end, or have no length; some cross."""
    import numpy as np

    from tracetui.model.tree import _host_order

    ts = np.array([rng.randint(0, spread) for _ in range(n)], dtype=np.int64) * 500
    dur = np.array([rng.choice([0, 0, rng.randint(0, spread), 5 * rng.randint(1, 4)]) for _ in range(n)],
                   dtype=np.int64) * 500
    track = np.array([rng.randrange(tracks) for _ in range(n)], dtype=np.int32)
    kind = np.array([rng.randint(2, 7) for _ in range(n)], dtype=np.int8)
    o = _host_order(np.arange(n), track, ts, dur, kind)
    return ts[o], ts[o] + dur[o], track[o]


def _nested(rng, depth=0, lo=0, hi=100_000, out=None, track=0):
    """A properly nested family with a crossing now and then (how real threads look)."""
    out = [] if out is None else out
    t = lo
    while t < hi and rng.random() < 0.85:
        s = min(hi, t + rng.choice([0, 0, 100, 2_000]))
        e = min(hi, s + rng.choice([0, 500, 3_000, 20_000]))
        if rng.random() < 0.1:
            e = hi  # ends with its parent
        out.append((s, e, track))
        if depth < 5 and e > s:
            _nested(rng, depth + 1, s, e, out, track)
        if rng.random() < 0.04:
            out.append((s + 1, e + rng.choice([500, 5_000]), track))  # outlasts its sibling
        t = e
    return out


@pytest.mark.parametrize("chunk", [1 << 18, 8], ids=["whole", "chunks-of-8"])
def test_numpy_nesting_finds_the_walks_parents_and_partial_overlaps(chunk, monkeypatch):
    import numpy as np

    from tracetui.model import nesting
    from tracetui.model.tree import _host_order

    monkeypatch.setattr(nesting, "CHUNK", chunk)  # stretches cut where the stack is empty
    rng = random.Random(7)
    cases = [_walk_order(rng, rng.randint(1, 60), rng.randint(1, 3), 40) for _ in range(3000)]
    for _ in range(1500):
        ev = [e for tr in range(rng.randint(1, 3)) for e in _nested(rng, track=tr)]
        if ev:
            ts, end, track = (np.array(c, dtype=np.int64) for c in zip(*ev))
            o = _host_order(np.arange(len(ev)), track, ts, end - ts, np.full(len(ev), 6, dtype=np.int8))
            cases.append((ts[o], end[o], track[o]))
    fast = partial = 0
    for ts, end, track in cases:
        node = np.arange(ts.size) + 10
        sentinel = {int(t): -1 - int(t) for t in np.unique(track)}
        want = nesting.walk(ts, end, node, track, sentinel)
        got = nesting.in_numpy(ts, end, track)
        assert got is not None  # these all pack, and the check must not reject a right answer
        parent, n_partial, closers = got
        cp = np.where(parent >= 0, node[np.maximum(parent, 0)], [sentinel[int(t)] for t in track])
        assert np.array_equal(cp, want.parents) and n_partial == want.partial
        assert np.array_equal(closers, want.closers)  # what frame_ends.py cuts by
        assert np.array_equal(nesting._nest(ts, end, node, track, sentinel).closers, want.closers)
        cp, n_partial, _ = nesting._nest(ts, end, node, track, sentinel)
        assert np.array_equal(cp, want.parents) and n_partial == want.partial
        free = nesting._free(track, ts, end)
        for c in np.flatnonzero(free)[1:3].tolist():  # what nest hands each side of a split
            assert np.array_equal(nesting._free(track[c:], ts[c:], end[c:]), free[c:])
        fast += 1
        partial += want[1]
    assert fast == len(cases) and partial > 100  # crossings were exercised


def test_numpy_nesting_steps_aside_when_times_do_not_pack():
    import numpy as np

    from tracetui.model import nesting

    ts = np.array([0, 1 << 62], dtype=np.int64)
    end = ts + 10
    track = np.zeros(2, dtype=np.int32)
    assert nesting.in_numpy(ts, end, track) is None
    node = np.array([5, 6])
    assert np.array_equal(nesting._nest(ts, end, node, track, {0: -1})[0], [-1, -1])


def test_the_closers_come_back_whole_from_split_processes(monkeypatch):
    """The event that closed each one (frame_ends.py cuts by it), found by the stretches in
    forked processes, at the positions the one walk over everything finds them."""
    import numpy as np

    from tracetui.model import nesting
    from tracetui.read import forked

    if not forked.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(nesting, "NEST_SPLIT_MIN", 2)
    rng = random.Random(11)
    fam = [e for k in range(400) for e in _nested(rng, lo=k * 100_000, hi=k * 100_000 + 90_000, track=k % 2)]
    fam.sort(key=lambda e: (e[2], e[0], -(e[1] - e[0])))
    ts, end, track = (np.asarray(col, dtype=np.int64) for col in zip(*fam))
    node = np.arange(ts.size, dtype=np.int64) + 10
    sentinel = {0: -1, 1: -2}
    want = nesting.walk(ts, end, node, track, sentinel)
    assert (want.closers >= 0).sum() > 5  # crossings were made
    for workers in (2, 5):
        got = nesting.nest(ts, end, node, track, sentinel, workers)
        assert np.array_equal(got.closers, want.closers) and np.array_equal(got.parents, want.parents), workers


def _with_script_frames(rng, tracks):
    """``_nested`` families on a few threads, each inside a few long frames open from (about)
    the thread's start to its end, as a with_stack recording's script and training loop; now
    and then a frame that starts or ends in the middle of the work, crossing what is there."""
    import numpy as np

    from tracetui.model.tree import _host_order

    ev = []
    for tr in range(tracks):
        fam = [e for k in range(rng.randint(1, 6))
               for e in _nested(rng, lo=k * 100_000, hi=k * 100_000 + 90_000, track=tr)]
        if not fam:
            continue
        lo, hi = min(e[0] for e in fam), max(e[1] for e in fam)
        for _ in range(rng.randint(0, 3)):
            a, b = lo - rng.choice([0, 0, 10]), hi + rng.choice([0, 0, 10])
            if rng.random() < 0.15:
                a = fam[rng.randrange(len(fam))][0] + rng.choice([0, 1])   # starts mid-way
            if rng.random() < 0.15:
                b = fam[rng.randrange(len(fam))][1] + rng.choice([0, -1])  # ends mid-way
            ev.append((a, max(a, b), tr))
        ev += fam
    if not ev:
        return _with_script_frames(rng, tracks)
    ts, end, track = (np.array(c, dtype=np.int64) for c in zip(*ev))
    o = _host_order(np.arange(len(ev)), track, ts, end - ts, np.full(len(ev), 6, dtype=np.int8))
    return ts[o], end[o], track[o]


def test_long_frames_set_aside_give_the_walks_tree(monkeypatch):
    """A with_stack recording's long frames (the script's, the training loop's) keep the stack
    from ever emptying; set aside (``_peeled``), the rest nests in stretches and processes.
    Where that is taken, parents, partial overlaps and closers are the one walk's; where a long
    frame crosses other events it is not taken (None), and ``nest`` walks as before."""
    import numpy as np

    from tracetui.model import nesting

    monkeypatch.setattr(nesting, "LONG_SPAN", 40)
    monkeypatch.setattr(nesting, "CHUNK", 64)
    rng = random.Random(5)
    taken = refused = 0
    for _ in range(400):
        ts, end, track = _with_script_frames(rng, rng.randint(1, 3))
        node = np.arange(ts.size) + 10
        sentinel = {int(t): -1 - int(t) for t in np.unique(track)}
        want = nesting.walk(ts, end, node, track, sentinel)
        got = nesting._peeled(ts, end, node, track, sentinel, workers=1)
        if got is None:
            refused += 1
            continue
        taken += 1
        assert np.array_equal(got.parents, want.parents)
        assert got.partial == want.partial and np.array_equal(got.closers, want.closers)
    assert taken > 150 and refused > 100  # both ways were exercised (400 cases: 175 and 225)


def test_a_thread_inside_one_frame_is_nested_in_several_ways(monkeypatch):
    """The whole nest on such a thread, split two and three ways: the stretches between the
    script frame's children are nested side by side, and the answer is the walk's."""
    import numpy as np

    from tracetui.model import nesting
    from tracetui.read import forked

    if not forked.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(nesting, "LONG_SPAN", 200)
    monkeypatch.setattr(nesting, "CHUNK", 800)
    monkeypatch.setattr(nesting, "NEST_SPLIT_MIN", 2)
    rng = random.Random(12)
    fam = [e for k in range(300) for e in _nested(rng, lo=k * 100_000, hi=k * 100_000 + 90_000, track=k % 2)]
    fam += [(-5, 30_000_000, 0), (-5, 30_000_000, 1), (0, 29_999_000, 1)]  # the script's frames
    fam.sort(key=lambda e: (e[2], e[0], -(e[1] - e[0])))
    ts, end, track = (np.asarray(col, dtype=np.int64) for col in zip(*fam))
    node = np.arange(ts.size, dtype=np.int64) + 10
    sentinel = {0: -1, 1: -2}
    want = nesting.walk(ts, end, node, track, sentinel)
    assert nesting._longest_stretch(nesting._free(track, ts, end)) == (track == 0).sum()  # never empty
    spread = []
    real = nesting.together
    monkeypatch.setattr(nesting, "together", lambda parts, n: (spread.append(len(parts)), real(parts, n))[1])
    for workers in (2, 3):
        got = nesting.nest(ts, end, node, track, sentinel, workers)
        assert np.array_equal(got.parents, want.parents) and np.array_equal(got.closers, want.closers), workers
        assert got.partial == want.partial
    assert spread and max(spread) >= 2  # split
