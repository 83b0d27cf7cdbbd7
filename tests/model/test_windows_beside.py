"""The step windows built in a forked child beside the rollups (big trees, several workers) are
the windows built after them in one process: the same arrays, steps, processes and figures."""
from __future__ import annotations

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.model import trace as trace_mod
from tracetui.read import forked

from tests.conftest import DATA, TRACES

TRACES_WITH_STEPS = [TRACES / "transformer_eager.json.gz", TRACES / "mlp_compile.json.gz",
                     DATA / "h200_mlp_train_eager_op.json.gz", DATA / "cpu_autocast_train.json.gz",
                     DATA / "gloo_rank0.pt.trace.json.gz"]
"""Training steps with a backward thread, several streams, a compiled step and a gloo rank."""


@pytest.mark.skipif(not forked.available(), reason="fork-based parallelism is off here (one core or not Linux)")
@pytest.mark.parametrize("path", TRACES_WITH_STEPS, ids=lambda p: p.name)
def test_windows_built_beside_the_rollups_equal_those_built_after(path, monkeypatch):
    monkeypatch.setattr(trace_mod, "WINDOWS_FORK_MIN", 0)  # every tree counts as big
    beside = load_trace(path, workers=2, cache=False)
    after = load_trace(path, workers=1, cache=False)
    assert "rollup+windows (2 processes)" in beside.timings and "rollup" in after.timings
    assert after.n_steps > 0 and beside.steps == after.steps
    wa, wb = beside.windows, after.windows
    for a in trace_mod.model_cache.WINDOW_ARRAYS:
        assert np.array_equal(getattr(wa, a), getattr(wb, a)), a
    assert [(w.node, w.pid, w.start, w.end) for w in wa.windows] == [(w.node, w.pid, w.start, w.end) for w in wb.windows]
    assert wa.breakdowns() == wb.breakdowns()
    for col in ("device", "kernels", "cpu_self", "cpu_total", "step_of"):
        assert np.array_equal(getattr(beside.roll, col), getattr(after.roll, col)), col


def test_one_worker_builds_the_windows_in_this_process(monkeypatch):
    """``--workers 1`` is one process: no child, even for a big tree."""
    monkeypatch.setattr(trace_mod, "WINDOWS_FORK_MIN", 0)
    monkeypatch.setattr(forked, "spawn", lambda *a, **k: pytest.fail("forked with one worker"))
    t = load_trace(TRACES / "transformer_eager.json.gz", workers=1, cache=False)
    assert "rollup" in t.timings and t.n_steps > 0
