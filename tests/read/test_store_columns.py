"""The event store's columns that are computed in bulk: flow ends, tracks, phases, skipped events."""
from __future__ import annotations

import json

import numpy as np

from tracetui.model import load_trace
from tracetui.read.events import KINDS, Flows, build_store, concat_stores
from tracetui.read.load import Event, LinkArgs


def _flow(ph, fid, cat="ac2g"):
    return {"ph": ph, "cat": cat, "name": cat, "id": fid, "pid": 1, "tid": 1, "ts": 1.0}


def _x(name, cat="cpu_op", pid=1, tid=1, ts=0.0, dur=1.0, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


FLOWS = [
    _flow("s", 1), _flow("f", 1),             # a launch arrow with both ends
    _flow("s", 2),                            # a start whose end is missing
    _flow("t", 3),                            # an end whose start is missing
    _flow("s", 1, cat="fwdbwd"),              # same id, another category: its own flow, no end
    _flow("s", 4), _flow("s", 4), _flow("f", 4),  # an id written twice still has an end
]


def _write(tmp_path, events):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return p


def test_flows_without_end_counts_each_category_and_id_once(tmp_path):
    tr = load_trace(_write(tmp_path, [_x("aten::mm")] + FLOWS))
    assert tr.tree.diagnostics["flows_without_end"] == 3  # (ac2g, 2), (ac2g, 3), (fwdbwd, 1)


def test_string_and_missing_flow_ids_are_matched_as_written(tmp_path):
    events = [_x("aten::mm"), _flow("s", "0x10"), _flow("f", "0x10"), _flow("s", "0x11"),
              _flow("s", 5), _flow("f", 5), {"ph": "f", "cat": "ac2g", "name": "x", "pid": 1, "ts": 1.0},
              _flow("s", "7"), _flow("f", 7)]
    tr = load_trace(_write(tmp_path, events))
    assert tr.tree.diagnostics["flows_without_end"] == 4  # "0x11", the end with no id, "7" and 7


def _events(raw):
    return [Event(ph=e["ph"], cat=e["cat"], name=e["name"], pid=e["pid"], tid=e.get("tid"), ts=e["ts"],
                  dur=e.get("dur", float("nan")), id=e.get("id"), args=LinkArgs(**e.get("args", {})))
            for e in raw]


def test_flows_split_anywhere_join_to_the_whole_files_flows():
    events = _events([_x("aten::mm")] + FLOWS)
    whole = build_store(events).flows
    for cut in range(1, len(events)):
        a, b = build_store(events[:cut]), build_store(events[cut:])
        joined = concat_stores([a, b], [0, cut]).flows
        assert joined == whole and joined.without_end() == 3, cut
    assert not build_store(events[:1]).flows and whole


def test_gpu_tracks_are_keyed_by_stream_in_first_seen_order():
    events = _events([
        _x("k1", cat="kernel", pid=0, tid=7, stream=7),
        _x("aten::mm", pid=10, tid=3),
        _x("k2", cat="kernel", pid=0, tid=99, stream=7),   # same stream, other tid: same lane
        _x("k3", cat="kernel", pid=0, tid=8),              # no stream: its tid names the lane
        _x("m", cat="gpu_memcpy", pid=1, tid=7, stream=7),  # another device
        _x("aten::add", pid=10, tid=3),
    ])
    s = build_store(events)
    assert s.track_keys == [("gpu", 0, 7), (10, 3), ("gpu", 0, 8), ("gpu", 1, 7)]
    assert s.track.tolist() == [0, 1, 0, 2, 3, 1]
    assert [KINDS[k] for k in s.kind] == ["kernel", "op", "kernel", "kernel", "memcpy", "op"]


def test_odd_phases_are_skipped_and_named():
    events = _events([_x("aten::mm"), {"ph": "", "cat": "c", "name": "n", "pid": 1, "ts": 1.0},
                      {"ph": "XX", "cat": "c", "name": "n", "pid": 1, "ts": 1.0},
                      {"ph": "i", "cat": "", "name": "n", "pid": 1, "ts": 1.0}])
    s = build_store(events)  # "" and "XX" together are as long as two one-letter phases
    assert len(s) == 1 and s.skipped == {"c (?)": 1, "c (XX)": 1, "(none) (i)": 1}
    assert np.array_equal(s.file_index, [0])


def test_flows_equality_compares_ids():
    a = Flows(starts={"ac2g": np.array([1, 2])}, ends={})
    assert a == Flows(starts={"ac2g": np.array([1, 2])}, ends={})
    assert a != Flows(starts={"ac2g": np.array([1, 3])}, ends={})
    assert a.without_end() == 2


def test_flows_without_end_is_the_sets_symmetric_difference():
    """The sorted count against Python's own sets, on random ids with repeats, negatives, one
    empty side and categories on one side only."""
    import numpy as np

    from tracetui.read.events import Flows

    rng = np.random.default_rng(39)
    for _ in range(200):
        f = Flows()
        want = 0
        for c in ("ac2g", "fwdbwd", "x")[: int(rng.integers(1, 4))]:
            s = rng.integers(-50, 50, int(rng.integers(0, 40)))
            e = rng.integers(-50, 50, int(rng.integers(0, 40)))
            if rng.random() < 0.5:
                f.starts[c] = s
            else:
                s = s[:0]
            f.ends[c] = e
            want += len(set(s.tolist()) ^ set(e.tolist()))
        assert f.without_end() == want
