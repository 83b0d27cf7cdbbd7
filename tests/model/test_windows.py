"""Per-step windows against a reference written here from the raw JSON (never the model's code).

The reference follows the documented rule: a step owns every piece of GPU activity whose launch
(the runtime call with the same correlation, else the op or annotation with the same External id)
starts inside the step's host interval, on any thread of the step's process (and, for a marker
alone on its process, of every process with no markers of its own); activity with no launch counts
by its own start. Busy is the union of those intervals over streams and devices.
"""
from __future__ import annotations

import gzip
import json
import re
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from tracetui.model import load_trace

from tests.conftest import DATA, PEER, TRACES

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime"}
OP_CATS = {"cpu_op", "user_annotation", "operator"}
STEP = re.compile(r"^ProfilerStep#\d+$")
RF_STEP = re.compile(r"^train_step_\d+$")


def raw(path: Path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data, parse_float=Decimal)


def ns(x) -> int:
    """Exact nanoseconds from the digits as written (µs with up to 3 decimals)."""
    return int((Decimal(x) * 1000).to_integral_value(ROUND_HALF_EVEN))


def _id(v) -> int:
    return v if type(v) is int and v >= 0 else -1


def union(iv: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def reference(doc: dict, step: re.Pattern = STEP) -> list[dict]:
    """Per step marker (``ProfilerStep#N`` by default): name, the kernels and GPU events it launched, and their busy union (ns)."""
    xs = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    cat = lambda e: str(e.get("cat", "")).lower()  # noqa: E731
    first_rt, first_op = {}, {}
    for e in xs:
        a = e.get("args") or {}
        if cat(e) in LAUNCH_CATS and _id(a.get("correlation")) >= 0:
            first_rt.setdefault(a["correlation"], e)
        if cat(e) in OP_CATS and _id(a.get("External id")) >= 0:
            first_op.setdefault(a["External id"], e)
    gpu = []
    for g in (e for e in xs if cat(e) in GPU_CATS):
        a = g.get("args") or {}
        launch = first_rt.get(_id(a.get("correlation"))) or first_op.get(_id(a.get("External id")))
        at, pid = (ns(launch["ts"]), launch["pid"]) if launch else (ns(g["ts"]), None)
        gpu.append((at, pid, ns(g["ts"]), ns(g["ts"]) + ns(g.get("dur", 0)), cat(g) == "kernel"))
    out = []
    steps = [e for e in xs if cat(e) == "user_annotation" and step.match(str(e.get("name", "")))]
    # a marker alone on its process (no other host event there) also marks the work of every
    # process with host events and no markers of its own (HTA's triton_example)
    marked = {e["pid"] for e in steps}
    working = {e["pid"] for e in xs if cat(e) in OP_CATS | LAUNCH_CATS | {"python_function"} and e not in steps}
    for s in sorted(steps, key=lambda e: ns(e["ts"])):
        s0, s1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
        pids = {s["pid"], None} | (working - marked if s["pid"] not in working else set())
        own = [g for g in gpu if s0 <= g[0] < s1 and g[1] in pids]
        out.append({"name": s["name"], "kernels": sum(g[4] for g in own), "events": len(own),
                    "device": sum(g[3] - g[2] for g in own),
                    "busy": union([(g[2], g[3]) for g in own]), "host": s1 - s0})
    return out


def _training_traces() -> list[Path]:
    paths = sorted(TRACES.glob("*.json.gz")) + sorted(DATA.glob("*.json.gz"))
    if PEER.is_dir():
        paths += sorted(PEER.glob("*.json*"))
    return paths


@pytest.mark.parametrize("path", _training_traces(), ids=lambda p: p.name)
def test_step_windows_match_reference(path):
    doc = raw(path)
    ref = reference(doc) or reference(doc, RF_STEP)  # record_function markers where no prof.step()
    if not ref:
        pytest.skip("no step markers in this trace")
    t = load_trace(path)
    assert [t.name(s) for s in t.steps] == [r["name"] for r in ref]
    for s, r in zip(t.steps, ref):
        b = t.step_breakdown(s)
        assert b["kernels"] == r["kernels"], (r["name"], b["kernels"], r["kernels"])
        assert b["gpu_events"] == r["events"], r["name"]
        assert b["busy_ns"] == r["busy"], (r["name"], b["busy_ns"], r["busy"])
        assert b["cpu_ns"] == r["host"]
        # every nanosecond of the window is exactly one of: own work, other steps' work, idle
        assert b["busy_ns"] + b["other_steps_ns"] + b["idle_ns"] == b["window_ns"]
        assert 0 <= b["idle_ns"] <= b["window_ns"]
        assert min(b["idle_split_ns"].values()) >= 0
        assert sum(b["idle_split_ns"].values()) == b["idle_ns"]
        # the step's tree node carries the window's totals
        assert int(t.roll.kernels[s]) == r["kernels"]


def test_backward_thread_kernels_count_for_their_step(peer_dir):
    """HTA's call_stack_backward_thread: the step's only kernel is launched from the autograd thread."""
    path = peer_dir / "call_stack_backward_thread.json"
    doc = raw(path)
    step = next(e for e in doc["traceEvents"] if STEP.match(str(e.get("name", ""))))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    launch_tids = {e["tid"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"
                   and (e.get("args") or {}).get("correlation") in {k["args"]["correlation"] for k in kernels}}
    assert step["tid"] not in launch_tids  # the premise: launched from another thread
    t = load_trace(path)
    (s,) = t.steps
    assert t.step_breakdown(s)["kernels"] == len(kernels) > 0
    # and the tree reaches it from the step, through the other thread's group
    under = t.gpu_descendants(0)
    assert under.size == len(kernels)
    kids = [int(c) for c in t.tree.children(s)]
    assert any(t.kind(c) == "thread" for c in kids)
