"""Timeline lanes (tracetui.model.lanes) against references read straight from the JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.model.lanes import build_lanes, extent, range_summary, thread_label, ticks

from tests.ui.synth import AUTOGRAD, MAIN, PID, S_BWD, S_FWD, make


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    p = tmp_path_factory.mktemp("lanes") / "t.json"
    doc = make(p)
    return load_trace(p), doc["traceEvents"]


def _ns(e):
    return round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)


def test_a_lane_per_thread_row_and_stream_grouped_by_process_then_device(synth):
    t, raw = synth
    lanes = build_lanes(t)
    labels = [(lane.group, lane.label) for lane in lanes]
    streams = sorted({e["args"]["stream"] for e in raw if e.get("cat") == "kernel"})
    assert streams == [S_FWD, S_BWD]
    want = [(f"process {PID}", "steps"), (f"process {PID}", "main annot"), (f"process {PID}", "main ops"),
            (f"process {PID}", "main launch"), (f"process {PID}", "autograd ops"), (f"process {PID}", "autograd launch"),
            ("GPU 0", f"stream {S_FWD} annot"), ("GPU 0", f"stream {S_FWD}"), ("GPU 0", f"stream {S_BWD}")]
    assert labels == want
    by = {lane.label: lane for lane in lanes}
    # the GPU user annotations (a category the tree skips) are read from the file as written
    ann = sorted(_ns(e) for e in raw if e.get("cat") == "gpu_user_annotation")
    got = sorted(zip(by[f"stream {S_FWD} annot"].starts.tolist(), by[f"stream {S_FWD} annot"].ends.tolist()))
    assert got == ann
    # the ops row holds the outermost ops of its thread: aten::addmm is inside aten::linear
    main_ops = [e for e in raw if e.get("cat") == "cpu_op" and e["tid"] == MAIN]
    outer = [e for e in main_ops if not any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
                                             for o in main_ops)]
    assert sorted(_ns(e) for e in outer) == list(zip(by["main ops"].starts.tolist(), by["main ops"].ends.tolist()))
    kern = sorted(_ns(e) for e in raw if e.get("cat") == "kernel" and e["args"]["stream"] == S_BWD)
    assert kern == list(zip(by[f"stream {S_BWD}"].starts.tolist(), by[f"stream {S_BWD}"].ends.tolist()))
    assert {t.store.track_keys[t.store.track[t.tree.ev[n]]][1] for n in by["autograd ops"].nodes.tolist()} == {AUTOGRAD}


@pytest.mark.parametrize("zoom", ["whole", "step", "adds"])
def test_each_cell_shows_its_one_event_or_merged_coverage(synth, zoom):
    """At three zooms, every cell of the stream-7 row against intervals counted cell by cell."""
    t, raw = synth
    lane = next(lane for lane in build_lanes(t) if lane.label == f"stream {S_FWD}")
    iv = sorted(_ns(e) for e in raw if e.get("cat") == "kernel" and e["args"]["stream"] == S_FWD)
    lo, hi = {"whole": extent(build_lanes(t)), "step": (1_000_000, 2_500_000), "adds": (1_220_000, 1_260_000)}[zoom]
    width = 97
    rep, merged = lane.cells(lo, hi, width)
    px = (hi - lo) / width
    kinds = set()
    for c in range(width):
        a, b = lo + c * px, lo + (c + 1) * px
        over = [i for i, (s, e) in enumerate(iv) if s < b and e > a]
        if not over:
            assert rep[c] == -1 and not merged[c]
            kinds.add("empty")
        elif len(over) == 1:
            assert not merged[c] and (lane.starts[rep[c]], lane.ends[rep[c]]) == iv[over[0]]
            kinds.add("one")
        else:
            assert merged[c] and (lane.starts[rep[c]], lane.ends[rep[c]]) in [iv[i] for i in over]
            kinds.add("merged")
    assert kinds == ({"empty", "one"} if zoom == "adds" else {"empty", "one", "merged"})


def test_index_at_is_the_event_there_else_the_nearest(synth):
    t, raw = synth
    lane = next(lane for lane in build_lanes(t) if lane.label == f"stream {S_BWD}")
    iv = sorted(_ns(e) for e in raw if e.get("cat") == "kernel" and e["args"]["stream"] == S_BWD)
    for probe in (iv[0][0] + 5, iv[1][1] - 1, iv[2][0] - 3_000, iv[-1][1] + 10**6, 0):
        inside = [i for i, (s, e) in enumerate(iv) if s <= probe < e]
        want = inside[0] if inside else min(range(len(iv)), key=lambda i: max(iv[i][0] - probe, probe - iv[i][1], 0))
        assert lane.index_at(probe) == want


@pytest.mark.parametrize("span_ns,unit", [(3_000_000_000, "s"), (2_000_000, "ms"), (40_000, "µs"), (300, "ns")])
def test_ticks_land_on_round_times_in_a_unit_that_suits_the_zoom(span_ns, unit):
    lo = 123_456_789
    width = 120
    got = ticks(lo, lo + span_ns, width, origin=100_000_000)
    assert 4 <= len(got) <= 15
    scale = {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1}[unit]
    vals = []
    for cell, text in got:
        assert text.endswith(unit) and not text.endswith("m" + unit if unit == "s" else "@")
        v = float(text[:-len(unit)].replace(",", "")) * scale
        vals.append(v)
        # the tick sits in the cell holding its time (from the origin)
        assert int((100_000_000 + v - lo) / span_ns * width) == pytest.approx(cell, abs=1)
    steps = np.diff(vals)
    assert np.allclose(steps, steps[0]) and f"{steps[0] / 10 ** np.floor(np.log10(steps[0])):.0f}" in ("1", "2", "5")


def test_range_summary_against_the_raw_events(synth):
    t, raw = synth
    lo, hi = 1_100_000, 1_700_000
    s = range_summary(t, build_lanes(t), lo, hi)
    assert s["window_ns"] == hi - lo
    for st in s["streams"]:
        sid = int(st["stream"].split()[1])
        cells = set()
        for e in raw:
            if e.get("cat") == "kernel" and e["args"]["stream"] == sid:
                a, b = _ns(e)
                cells.update(range(max(a, lo), min(b, hi)))
        assert st["busy_ns"] == len(cells) and st["idle_ns"] == hi - lo - len(cells)
    per: dict = {}
    for e in raw:
        if e.get("cat") == "kernel":
            a, b = _ns(e)
            if b > lo and a < hi:
                per[e["name"]] = per.get(e["name"], 0) + min(b, hi) - max(a, lo)
    top = sorted(per.items(), key=lambda kv: -kv[1])[:5]
    assert [(k["name"], k["time_ns"]) for k in s["kernels"]] == top
    launches = [e for e in raw if e.get("name") == "cudaLaunchKernel" and lo <= _ns(e)[0] < hi]
    assert s["launches"] == len(launches) > 0
    assert s["launch_ns"] == sum(_ns(e)[1] - _ns(e)[0] for e in launches)
    ops: dict = {}
    for e in raw:
        if e.get("cat") == "cpu_op":
            a, b = _ns(e)
            if b > lo and a < hi:
                ops[e["name"]] = ops.get(e["name"], 0) + min(b, hi) - max(a, lo)
    assert [(o["name"], o["time_ns"]) for o in s["ops"]] == sorted(ops.items(), key=lambda kv: -kv[1])[:5]


def test_thread_labels_say_what_odd_thread_ids_are(tmp_path):
    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": tid, "ts": 1.0 + i, "dur": 0.5}
           for i, tid in enumerate([5, -549452224, 0, 77])]
    evs.append({"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "pid": 5, "tid": 77, "ts": 9.0, "dur": 0.5})
    evs.append({"ph": "X", "cat": "cpu_op", "name": "MulBackward0", "pid": 5, "tid": 77, "ts": 10.0, "dur": 0.5})
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = load_trace(p)
    assert thread_label(t.store, 5, 5) == "main"
    assert "runtime thread -549452224 (negative id)" == thread_label(t.store, 5, -549452224)
    assert "no thread id" in thread_label(t.store, 5, 0)
    assert "Python frames" in thread_label(t.store, 5, 0)  # what the row holds (issue 43 item 8)
    labels = [lane.label for lane in build_lanes(t)]
    assert "autograd 77 ops" in labels  # unnamed, but its ops are mostly backward ops
