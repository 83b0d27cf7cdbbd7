"""The model's stages side by side in threads (read/together.py) build what one thread builds:
the tree, the rollups, the step windows and the tables, array for array, on traces with a
backward thread, frames cut to their op (the H200 custom op), several streams and processes."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read import forked

from tests.conftest import DATA, ROOT

PEER = ROOT.parent / "shared" / "peer-traces" / "hta"
TRACES = [ROOT / "traces/transformer_eager.json.gz", DATA / "h200_mlp_train_fused_op.json.gz",
          DATA / "gloo_rank0.pt.trace.json.gz", PEER / "call_stack_backward_thread.json",
          PEER / "trace_diff_control_control.json.gz"]


def _arrays(t) -> dict:
    tree, roll, win = t.tree, t.roll, t.windows
    out = {f: getattr(tree, f) for f in ("parent", "cparent", "child_off", "child_idx", "depth", "start", "dur")}
    out.update({f"roll.{f}": getattr(roll, f) for f in ("cpu_total", "cpu_self", "device", "kernels",
                                                        "step_of", "dup", "op_self")})
    out.update({f"windows.{f}": getattr(win, f) for f in ("gpu_flat", "gpu_at", "runtime_flat", "thread_flat")})
    return out


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """transformer_eager replicated to 150k events: stages long enough to run at once."""
    from benchmarks.make_large_trace import replicate
    out = tmp_path_factory.mktemp("threads") / "replica.json"
    replicate(ROOT / "traces/transformer_eager.json.gz", out, 150_000)
    return out


@pytest.mark.parametrize("path", [*TRACES, "replica"], ids=lambda p: getattr(p, "name", p))
def test_threads_build_what_one_thread_builds(path, monkeypatch, request):
    if path == "replica":
        path = request.getfixturevalue("replica")
    if not path.exists():
        pytest.skip(f"{path} not here (peer traces live in ../shared)")
    monkeypatch.setattr(forked, "available", lambda: True)  # threads even on a one-CPU runner
    started = []  # the names of the threads started meanwhile
    real = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(self.name), real(self))[1])
    one = load_trace(path, workers=1, cache=False)
    assert "tracetui-stage" not in started  # one worker: this thread alone
    four = load_trace(path, workers=4, cache=False)
    assert started.count("tracetui-stage") >= 3  # the link's stages, rollups beside windows, the rollups' parts
    a, b = _arrays(one), _arrays(four)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    assert one.tree.diagnostics == four.tree.diagnostics
    assert one.tree.fwd_of == four.tree.fwd_of
    rows = lambda t: [(r.name, r.count, r.cpu_total_us, r.cpu_self_us, r.device_total_us)  # noqa: E731
                      for r in t.op_table + t.kernel_table]
    assert rows(one) == rows(four)


@pytest.mark.parametrize("path", TRACES[:3], ids=lambda p: p.name)
def test_the_schedule_builds_what_the_stages_build_in_a_row(path, monkeypatch):
    """load_trace runs the display tree's finish beside the containment rollups and the step
    windows (trace._model); build_tree then rollups, one after the other in one thread, give
    the same tree and rollups (the steps' device figures are then set from their windows)."""
    from tracetui.model.stats import rollups
    from tracetui.model.tree import build_tree
    monkeypatch.setattr(forked, "available", lambda: True)
    t = load_trace(path, workers=4, cache=False)
    own = t.self_time.frames_own_time
    tree = build_tree(t.store, title=t.path.name, cut_frames=not own, workers=1)
    roll = rollups(tree, python_owns_time=own, workers=1)
    for f in ("parent", "cparent", "child_off", "child_idx", "depth", "start", "dur", "kind", "name_id"):
        assert np.array_equal(getattr(t.tree, f), getattr(tree, f)), f
    not_step = np.ones(len(tree.kind), dtype=bool)
    not_step[t.steps] = False
    for f in ("cpu_total", "cpu_self", "step_of", "dup", "op_self", "device", "kernels"):
        a, b = getattr(t.roll, f), getattr(roll, f)
        assert np.array_equal(a[not_step], b[not_step]), f
    assert t.tree.diagnostics == tree.diagnostics
