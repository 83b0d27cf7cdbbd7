"""The timeline driven by Pilot: every navigation step, with what it selects checked against
the JSON as written (tests/ui/synth.py: steps, the backward on pt_autograd_0, two streams)."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import K
from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.range_table import RangeTable
from tracetui.ui.timeline import HEAD_ROWS, Timeline

from tests.ui.synth import MAIN, S_BWD, S_FWD, make
from tests.ui.test_app import explorer, wait_for


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    p = tmp_path_factory.mktemp("tl") / "synth.json"
    doc = make(p)
    return p, doc["traceEvents"]


def _ns(e):
    return round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)


def _event(tl: Timeline) -> tuple[str, tuple[int, int], str]:
    """(lane label, (start, end) ns, name) under the cursor."""
    lane = tl.lanes[tl.cur.lane]
    i = tl.cur.index
    return lane.label, (int(lane.starts[i]), int(lane.ends[i])), lane.name(tl.trace, i)


async def _timeline(pilot, s: ExplorerScreen) -> Timeline:
    await pilot.press("4")
    await pilot.pause()
    tl = s.query_one(Timeline)
    await wait_for(pilot, lambda: tl.has_focus)
    return tl


def run(path, body, size=(120, 40)):
    async def go():
        app = TraceApp([path])
        async with app.run_test(size=size) as pilot:
            s = await explorer(pilot)
            await body(pilot, s)
    asyncio.run(go())


def test_4_opens_on_the_tree_selection_and_arrows_walk_lanes_and_events(synth):
    path, raw = synth
    steps = sorted((e for e in raw if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    main_ops = sorted((e for e in raw if e.get("cat") == "cpu_op" and e["tid"] == MAIN), key=lambda e: e["ts"])
    outer = [e for e in main_ops if not any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
                                            for o in main_ops)]

    async def body(pilot, s):
        assert s.trace.name(s.current) == "ProfilerStep#0"  # the first screen's selection
        tl = await _timeline(pilot, s)
        assert tl.node == s.current and _event(tl) == ("steps", _ns(steps[0]), "ProfilerStep#0")
        a, b = _ns(steps[0])
        assert tl.lo <= a and tl.hi >= b and tl.hi - tl.lo < 1.2 * (b - a + 1_000_000)  # the step, not the trace
        await pilot.press("right")
        assert _event(tl)[1:] == (_ns(steps[1]), "ProfilerStep#1")
        await pilot.press("left", "left")  # stops at the first
        assert _event(tl)[2] == "ProfilerStep#0"
        await pilot.press("down", "down")  # steps -> main annot -> main ops, nearest in time
        label, (s0, s1), name = _event(tl)
        assert label == "main ops"
        ref = [(_ns(e), e["name"]) for e in outer]
        annot = next(e for e in raw if e.get("name") == "forward" and e.get("cat") == "user_annotation")
        mid = sum(_ns(annot)) / 2
        want = min(ref, key=lambda r: (0 if r[0][0] <= mid < r[0][1] else 1, max(r[0][0] - mid, mid - r[0][1], 0)))
        assert ((s0, s1), name) == want
        i = ref.index(want)
        await pilot.press("right", "right", "right")
        assert (_event(tl)[1], _event(tl)[2]) == ref[i + 3]
        await pilot.press("tab")  # Tab is down, shift+Tab up
        assert _event(tl)[0] == "main launch"
        await pilot.press("shift+tab")
        assert _event(tl)[0] == "main ops"

    run(path, body)


def test_zoom_keeps_the_cursor_in_place_and_pan_moves_the_view(synth):
    path, raw = synth

    async def body(pilot, s):
        tl = await _timeline(pilot, s)
        await pilot.press("down", "down", "right")
        _, (a, b), _ = _event(tl)
        mid = (a + b) / 2
        frac = (mid - tl.lo) / (tl.hi - tl.lo)
        for key, factor in (("plus", 0.5), ("plus", 0.5), ("minus", 2)):
            span = tl.hi - tl.lo
            await pilot.press(key)
            assert tl.hi - tl.lo == pytest.approx(span * factor)
            assert (mid - tl.lo) / (tl.hi - tl.lo) == pytest.approx(frac, abs=1e-6)
        lo, span = tl.lo, tl.hi - tl.lo
        await pilot.press("right_square_bracket")
        assert tl.lo == pytest.approx(lo + span / 4)
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert tl.lo == pytest.approx(lo - span / 4)
        await pilot.press("w")
        first = min(_ns(e)[0] for e in raw if e.get("ph") == "X")
        last = max(_ns(e)[1] for e in raw if e.get("ph") == "X")
        assert (tl.lo, tl.hi) == (first, last)

    run(path, body)


def test_up_down_cross_to_the_gpu_and_f_follows_the_launch(synth):
    path, raw = synth
    by_corr = {}
    for e in raw:
        c = (e.get("args") or {}).get("correlation")
        if c is not None:
            by_corr.setdefault(c, {})[e["cat"]] = e

    async def body(pilot, s):
        tl = await _timeline(pilot, s)
        await pilot.press("down", "down", "down")  # main launch
        assert _event(tl)[0] == "main launch"
        _, span, name = _event(tl)
        launch = next(v["cuda_runtime"] for v in by_corr.values() if _ns(v["cuda_runtime"]) == span)
        kernel = by_corr[launch["args"]["correlation"]]["kernel"]
        await pilot.press("f")
        assert _event(tl)[0] == f"stream {kernel['args']['stream']}"
        assert _event(tl)[1:] == (_ns(kernel), kernel["name"])
        await pilot.press("f")  # and back to its launch
        assert _event(tl)[1] == span and _event(tl)[0] == "main launch"
        # down from the forward stream to the backward one lands on the event nearest in time
        await pilot.press("f", "down")
        assert _event(tl)[0] == f"stream {S_BWD}"
        mid = sum(_ns(kernel)) / 2
        bwd = [_ns(e) for e in raw if e.get("cat") == "kernel" and e["args"]["stream"] == S_BWD]
        assert _event(tl)[1] == min(bwd, key=lambda r: max(r[0] - mid, mid - r[1], 0))
        await pilot.press("up", "up")
        assert _event(tl)[0] == f"stream {S_FWD} annot"
        ann = [(_ns(e), e["name"]) for e in raw if e.get("cat") == "gpu_user_annotation"]
        assert (_event(tl)[1], _event(tl)[2]) in ann

    run(path, body)


def test_enter_opens_the_event_in_the_tree_and_the_tree_selection_shows_in_the_timeline(synth):
    path, raw = synth

    async def body(pilot, s):
        tl = await _timeline(pilot, s)
        await pilot.press("down", "down", "right")
        node = tl.node
        assert s.trace.kind(node) == "op"
        await pilot.press("enter")
        await pilot.pause()
        assert s.query_one("#views").current == "tree" and s.tree.has_focus
        assert s.current == node and s.tree.cursor_node.data.node == node
        # a kernel picked in the tree is the timeline's cursor
        k = int(np.nonzero(s.trace.tree.kind == K["kernel"])[0][5])
        s.jump(k)
        await pilot.pause()
        tl = await _timeline(pilot, s)
        assert tl.node == k and _event(tl)[0].startswith("stream ")
        # an inner op (aten::addmm, inside aten::linear) shows as the outermost op holding it
        mm = next(i for i in range(len(s.trace.tree.kind)) if s.trace.name(i) == "aten::addmm")
        s.jump(mm)
        await pilot.pause()
        tl = await _timeline(pilot, s)
        assert s.trace.name(tl.node) == "aten::linear" and s.trace.tree.parent[mm] == tl.node

    run(path, body)


def test_mouse_click_selects_and_the_wheel_zooms_around_the_pointer(synth):
    path, raw = synth

    async def body(pilot, s):
        tl = await _timeline(pilot, s)
        rows = tl._rows()
        y = HEAD_ROWS + rows.index(("lane", next(i for i, ln in enumerate(tl.lanes) if ln.label == f"stream {S_BWD}")))
        bwd = sorted(_ns(e) for e in raw if e.get("cat") == "kernel" and e["args"]["stream"] == S_BWD)
        target = max(bwd, key=lambda r: r[1] - r[0] if r[0] >= tl.lo and r[1] <= tl.hi else -1)
        lw = tl._label_w()
        w = tl.size.width - lw
        x = lw + int(((target[0] + target[1]) / 2 - tl.lo) / (tl.hi - tl.lo) * w)
        await pilot.click(Timeline, offset=(x, y))
        await pilot.pause()
        assert _event(tl)[0] == f"stream {S_BWD}" and _event(tl)[1] == target
        span = tl.hi - tl.lo
        at = tl.lo + (x - lw + 0.5) / w * span
        from textual import events  # Pilot has no wheel: the event the driver would send
        r = tl.region
        tl.post_message(events.MouseScrollUp(tl, x, y, 0, -1, 0, False, False, False, r.x + x, r.y + y))
        await pilot.pause()
        assert tl.hi - tl.lo == pytest.approx(span / 2)
        assert (at - tl.lo) / (tl.hi - tl.lo) == pytest.approx((x - lw + 0.5) / w, abs=1e-6)  # under the pointer

    run(path, body)


def test_a_range_by_keys_and_by_drag_shows_its_summary_and_table(synth):
    path, raw = synth

    async def body(pilot, s):
        tl = await _timeline(pilot, s)
        await pilot.press("down", "down")  # main ops
        a = _event(tl)[1]
        await pilot.press("m", "right", "right", "m")
        b = _event(tl)[1]
        assert tl.range == (a[0], b[1])
        table = s.query_one(RangeTable)
        await pilot.pause()
        assert table.display and table.row_count > 0
        cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        lo, hi = tl.range
        for sid in (S_FWD, S_BWD):
            busy = set()
            for e in raw:
                if e.get("cat") == "kernel" and e["args"]["stream"] == sid:
                    p, q = _ns(e)
                    busy.update(range(max(p, lo), min(q, hi)))
            row = next(r for r in cells if r[0] == "busy" and r[1].endswith(f"stream {sid}"))
            assert float(row[4]) == pytest.approx(100 * len(busy) / (hi - lo), abs=0.06)
        launches = sum(1 for e in raw if e.get("name") == "cudaLaunchKernel" and lo <= _ns(e)[0] < hi)
        assert next(r for r in cells if r[0] == "launches")[2] == str(launches)
        assert any(r[0] == "kernel" for r in cells) and any(r[0] == "op" for r in cells)
        await pilot.press("M")
        await pilot.pause()
        assert tl.range is None and not table.display
        # a drag across the lanes marks the range between the two pointer positions
        lw = tl._label_w()
        w = tl.size.width - lw
        x0, x1 = lw + 10, lw + 40
        await pilot.mouse_down(Timeline, offset=(x0, HEAD_ROWS + 2))
        await pilot.hover(Timeline, offset=(x1, HEAD_ROWS + 2))
        await pilot.mouse_up(Timeline, offset=(x1, HEAD_ROWS + 2))
        await pilot.pause()
        span = tl.hi - tl.lo
        assert tl.range == (int(tl.lo + (x0 - lw + 0.5) / w * span), int(tl.lo + (x1 - lw + 0.5) / w * span))
        assert table.display

    run(path, body)


def test_lane_labels_and_names_from_the_trace_are_plain_text(tmp_path):
    """A thread id is whatever the file says: an escape code must not reach the terminal."""
    tid = "\x1b[2J\x1b]0;x\x07"
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": tid, "ts": 0, "dur": 50},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm\x1b[31m", "pid": 1, "tid": tid, "ts": 1, "dur": 20}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = load_trace(p)

    async def go():
        app = TraceApp([p])
        async with app.run_test(size=(100, 20)) as pilot:
            s = await explorer(pilot)
            tl = await _timeline(pilot, s)
            await pilot.press("down", "right")
            text = "\n".join(strip.text for strip in tl.build_strips())
            assert "\x1b" not in text and "\x07" not in text and "\\x1b" in text
            assert t.name(tl.node).startswith("aten::mm")
    asyncio.run(go())


def test_every_taxonomy_class_has_its_own_colour_and_legend_entry():
    from tracetui.model.taxonomy import CLASSES
    from tracetui.ui.timeline import CLASS_COLOUR, LEGEND
    assert set(CLASSES) <= set(CLASS_COLOUR)
    assert len({CLASS_COLOUR[c] for c in CLASSES}) == len(CLASSES)  # its own colour
    assert [c for c, _ in LEGEND] == list(CLASSES)


def test_4_before_the_lanes_exist_builds_them_in_a_worker_and_keys_answer_meanwhile(synth, monkeypatch):
    """On a large trace (here: any, the threshold set to 0) whose lanes the prefetch has not built,
    `4` answers at once with a placeholder; the timeline's own keys wait, a view switch is answered
    while the worker runs, and the view opens on the tree's selection once the lanes are built."""
    import threading

    from textual.widgets import ContentSwitcher

    from tracetui.ui import timeline as tl_mod
    path, raw = synth
    steps = sorted((e for e in raw if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    gate = threading.Event()
    real = tl_mod.build_lanes

    def held(trace):  # the prefetch's build and `4`'s both wait here until the keys are checked
        assert gate.wait(30)
        return real(trace)

    monkeypatch.setattr(tl_mod, "BUILD_IN_WORKER", 0)
    monkeypatch.setattr(tl_mod, "build_lanes", held)

    async def body(pilot, s):
        views = s.query_one(ContentSwitcher)
        try:
            await pilot.press("4")
            await pilot.pause()
            tl = s.query_one(Timeline)
            assert views.current == "timeline" and not tl.ready
            assert tl.render_line(0).text.startswith(f"building the timeline of {len(s.trace.store):,} events")
            await pilot.press("plus", "right", "down", "w", "m")  # the timeline's keys wait for the lanes
            await pilot.pause()
            assert not tl.ready and tl.anchor is None
            await pilot.press("3")  # another view, answered while the worker runs
            await pilot.pause()
            assert views.current == "ops" and s.op_table.has_focus and not tl.ready
            await pilot.press("4")
            await pilot.pause()
            assert views.current == "timeline" and not tl.ready
        finally:
            gate.set()
        await wait_for(pilot, lambda: tl.ready and tl._pending is None)
        await pilot.pause()
        assert s.trace.name(s.current) == "ProfilerStep#0"
        assert tl.node == s.current and _event(tl) == ("steps", _ns(steps[0]), "ProfilerStep#0")
        a, b = _ns(steps[0])
        assert tl.lo <= a and tl.hi >= b and tl.hi - tl.lo < 1.2 * (b - a + 1_000_000)  # the step's view
        painted = [tl.render_line(y).text for y in range(tl.size.height)]
        assert "ProfilerStep#0" in painted[0] and any(line.startswith("steps") for line in painted)
        await pilot.press("right")  # and its keys work again
        assert _event(tl)[1:] == (_ns(steps[1]), "ProfilerStep#1")

    run(path, body)
