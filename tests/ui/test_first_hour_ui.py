"""What a new user met in the app on a CPU-only trace (``ProfilerActivity.CPU`` only): the
Kernels view (2) was a header over an empty table, with nothing saying why."""
from __future__ import annotations

import asyncio
import json

from textual.widgets._toast import Toast

from tracetui.ui.app import TraceApp

from tests.ui.test_app import explorer, wait_for


def _cpu_trace(path):
    ev = [{"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {"name": "python"}}]
    for k in range(2):
        t = 100.0 + k * 500
        ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 9, "tid": 9, "ts": t, "dur": 400.0},
               {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 9, "ts": t + 10, "dur": 200.0},
               {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 9, "tid": 9, "ts": t + 220, "dur": 50.0}]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}))
    return ev


def test_the_kernels_view_of_a_cpu_only_trace_says_why_it_is_empty(tmp_path):
    p = tmp_path / "cpu.json"
    ev = _cpu_trace(p)
    assert not [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]  # no GPU work at all

    async def run():
        app = TraceApp([p])
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            await wait_for(pilot, lambda: any(t.render().plain.startswith("no GPU kernels") for t in app.screen.query(Toast)))
            assert s.kernel_table.row_count == 0
            await pilot.press("3")  # the ops table holds the trace's ops
            await pilot.pause()
            names = {s.op_table.cell_text(r, "name") for r in range(s.op_table.row_count)}
            assert {"aten::addmm", "aten::relu"} <= names
        assert app._exception is None
    asyncio.run(run())
