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


def _two_processes(tmp_path):
    """A GPU training recording beside a copy of its host work (steps, ops, Python frames) in a
    second process at the same times: a step's window must hold its own process's work only."""
    import gzip
    import json
    src = DATA / "h200_mlp_train_eager_op.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    host = [e for e in doc["traceEvents"] if e.get("ph") == "X"
            and e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    twin = [dict(e, pid=e["pid"] + 1, args={k: v for k, v in (e.get("args") or {}).items()
                                            if k not in ("External id", "correlation")}) for e in host]
    doc["traceEvents"] += twin
    p = tmp_path / "two_processes.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("beside", [True, False], ids=["beside", "serial"])
def test_step_windows_hold_their_own_process_only(tmp_path, monkeypatch, beside):
    """Against the raw JSON: per step (each process has its own), the ops and runtime calls on
    that step's process that start inside it, and the threads they ran on."""
    import json
    from decimal import Decimal

    from tracetui.compare.items import _window_ops

    if beside and not forked.available():
        pytest.skip("fork-based parallelism is off here")
    monkeypatch.setattr(trace_mod, "WINDOWS_FORK_MIN", 0)
    p = _two_processes(tmp_path)
    t = load_trace(p, workers=2 if beside else 1, cache=False)
    assert ("rollup+windows (2 processes)" in t.timings) == beside
    raw = [e for e in json.loads(p.read_text(), parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    ns = lambda us: int(Decimal(us) * 1000)  # noqa: E731
    steps = sorted((e for e in raw if str(e["name"]).startswith("ProfilerStep#")), key=lambda e: (ns(e["ts"]), e["pid"]))
    assert len(steps) == len(t.windows.windows) and len({e["pid"] for e in steps}) == 2
    store = t.store
    for w in t.windows.windows:
        e = next(s for s in steps if s["pid"] == w.pid and ns(s["ts"]) == w.start)
        lo, hi = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        mine = [x for x in raw if x["pid"] == w.pid and lo <= ns(x["ts"]) < hi]
        k = t.windows._index[w.node]
        runtime = t.windows.runtime_flat[t.windows.runtime_at[k]:t.windows.runtime_at[k + 1]]
        assert runtime.size == sum(x["cat"] in ("cuda_runtime", "cuda_driver") for x in mine)
        assert _window_ops(t, w).size == sum(x["cat"] == "cpu_op" for x in mine) > 0
        tracks = t.windows.thread_flat[t.windows.thread_at[k]:t.windows.thread_at[k + 1]]
        assert {store.track_keys[i] for i in tracks.tolist()} == {(x["pid"], x["tid"]) for x in mine}
