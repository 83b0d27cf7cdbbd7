"""A step's window holds its own process's work: two processes at the same times, checked
against the raw JSON (the windows and the diff's per-step ops both go by process)."""
from __future__ import annotations

from tracetui.model import load_trace

from tests.conftest import DATA


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


def test_step_windows_hold_their_own_process_only(tmp_path):
    """Against the raw JSON: per step (each process has its own), the ops and runtime calls on
    that step's process that start inside it, and the threads they ran on."""
    import json
    from decimal import Decimal

    from tracetui.compare.items import _window_ops

    p = _two_processes(tmp_path)
    t = load_trace(p, cache=False)
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
