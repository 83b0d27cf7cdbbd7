"""The timeline on a trace whose only step lasts 0 µs (issue 44, item 6: 121 bytes, press `4`,
``ValueError: cannot convert float NaN to integer`` in the axis). Driven by Pilot at 80x24."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from tracetui.ui.app import TraceApp
from tracetui.ui.timeline import Timeline

from tests.ui.test_app import explorer, wait_for

ZERO_STEP = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 0}]
ZERO_INSIDE = ZERO_STEP + [  # a zero-length op and kernel at the same instant
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 0, "args": {"External id": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 0, "dur": 0,
     "args": {"stream": 7, "device": 0, "correlation": 1}},
]


@pytest.mark.parametrize("events", [ZERO_STEP, ZERO_INSIDE], ids=["only-step", "step-op-kernel"])
def test_timeline_of_a_zero_length_step(tmp_path, events):
    path = tmp_path / "zero.json"
    path.write_text(json.dumps({"traceEvents": events}))
    step = next(e for e in events if e["name"] == "ProfilerStep#1")
    at_ns = step["ts"] * 1000

    async def go():
        app = TraceApp([str(path)])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("4")
            tl = s.query_one(Timeline)
            await wait_for(pilot, lambda: tl.has_focus)
            await pilot.pause()

            def view_ok():
                assert np.isfinite(tl.lo) and np.isfinite(tl.hi) and tl.hi > tl.lo, (tl.lo, tl.hi)
                assert tl.lo <= at_ns <= tl.hi, (tl.lo, at_ns, tl.hi)
                lines = [strip.text for strip in tl.build_strips()]  # what the screen draws
                assert any("┃" in ln for ln in lines[:4]), lines[:4]  # the step's mark on the axis

            view_ok()
            lane = tl.lanes[tl.cur.lane]
            assert lane.name(tl.trace, tl.cur.index) == "ProfilerStep#1"
            for keys in (("plus", "plus"), ("minus",), ("left_square_bracket",), ("right_square_bracket",),
                         ("w",), ("m", "m", "z"), ("down", "right", "up", "left")):
                await pilot.press(*keys)
                await pilot.pause()
                view_ok()
            assert app.is_running
    asyncio.run(go())
