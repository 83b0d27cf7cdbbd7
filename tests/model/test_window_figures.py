"""Every step's breakdown, computed for all steps at once (window_figures.py), against a per-step
reference written here from the raw JSON; and its cost grows with the steps, not their square
(issue 35: a 250,000-step summary took 277 s)."""
from __future__ import annotations

import json
import random
import time

import pytest

from tracetui.model import load_trace
from tracetui.report.summary import summary_dict

from tests.model.test_windows import union

KERNEL_WAIT_NS = 5_000  # windows.KERNEL_WAIT_NS, the documented rule's constant


def _trace(rng: random.Random, steps: int) -> dict:
    """Steps on one thread launching kernels on two streams; the GPU lags behind, some kernels
    overlap, some have no launch, some launches come from a second thread."""
    evs, corr, t = [], 0, 0
    gpu_free = {7: 0, 8: 0}
    for i in range(steps):
        dur = rng.randint(50, 400)
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                    "ts": t, "dur": dur})
        for _ in range(rng.randint(0, 4)):
            corr += 1
            at = t + rng.randint(0, dur - 1)
            tid = rng.choice([1, 1, 2])
            ld = rng.randint(1, 8)
            evs.append({"ph": "X", "cat": "cuda_runtime", "name": rng.choice(["cudaLaunchKernel", "cudaMemcpyAsync"]),
                        "pid": 1, "tid": tid, "ts": at, "dur": ld, "args": {"correlation": corr}})
            stream = rng.choice([7, 8])
            ks = max(at + ld + rng.randint(0, 6), gpu_free[stream] + rng.choice([0, 0, 2, 9]))
            kd = rng.randint(1, 60)
            gpu_free[stream] = ks + kd
            evs.append({"ph": "X", "cat": rng.choice(["kernel", "kernel", "gpu_memcpy"]), "name": f"k{corr % 5}",
                        "pid": 0, "tid": stream, "ts": ks, "dur": kd,
                        "args": {"correlation": corr, "stream": stream, "device": 0}})
        if rng.random() < 0.1:  # activity whose launch is not in the file
            evs.append({"ph": "X", "cat": "kernel", "name": "lone", "pid": 0, "tid": 7, "ts": t + 3, "dur": 4,
                        "args": {"correlation": 10 ** 9 + i, "stream": 7, "device": 0}})
        t += dur + rng.choice([0, 5, 30])
    return {"traceEvents": evs}


def _reference(doc: dict) -> list[dict]:
    """Per step, from the JSON: window, busy, covered, the idle split and launch CPU (ns)."""
    xs = doc["traceEvents"]
    rt = {e["args"]["correlation"]: e for e in xs if e["cat"] == "cuda_runtime"}
    gpu = []
    for g in (e for e in xs if e["cat"] in ("kernel", "gpu_memcpy")):
        launch = rt.get(g["args"]["correlation"])
        gpu.append({"at": (launch or g)["ts"] * 1000, "s": g["ts"] * 1000, "e": (g["ts"] + g["dur"]) * 1000,
                    "enq": (launch["ts"] + launch["dur"]) * 1000 if launch else -1})
    by_start = sorted(gpu, key=lambda g: g["s"])  # stable: file order among equal starts
    out = []
    for s in (e for e in xs if e["cat"] == "user_annotation"):
        s0, s1 = s["ts"] * 1000, (s["ts"] + s["dur"]) * 1000
        own = [g for g in gpu if s0 <= g["at"] < s1]
        w1 = max([s1] + [g["e"] for g in own])
        clip = lambda gs: [(max(g["s"], s0), min(g["e"], w1)) for g in gs if min(g["e"], w1) > max(g["s"], s0)]  # noqa: E731
        merged = []
        for a, b in sorted(clip(gpu)):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        edges = [s0] + [x for ab in merged for x in ab] + [w1]
        split = {"host_wait": 0, "kernel_wait": 0, "other": 0}
        for gs, ge in zip(edges[::2], edges[1::2]):
            if ge <= gs:
                continue
            nxt = next((g for g in by_start if g["s"] >= ge), None)
            if ge >= w1 or nxt is None or nxt["enq"] > gs:
                split["host_wait"] += ge - gs
            elif nxt["enq"] < 0 or ge - gs > KERNEL_WAIT_NS:
                split["other"] += ge - gs
            else:
                split["kernel_wait"] += ge - gs
        launches = [e for e in xs if e["cat"] == "cuda_runtime" and s0 <= e["ts"] * 1000 < s1]
        out.append({"window_ns": w1 - s0, "busy_ns": union(clip(own)),
                    "other_steps_ns": union(clip(gpu)) - union(clip(own)), "idle_split_ns": split,
                    "gpu_events": len(own), "launch_cpu_ns": sum(e["dur"] * 1000 for e in launches),
                    "launches": len(launches)})
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_step_against_the_reference(tmp_path, seed):
    rng = random.Random(seed)
    doc = _trace(rng, rng.randint(1, 120))
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    t = load_trace(p)
    ref = _reference(doc)
    got = t.windows.breakdowns()
    assert len(got) == len(ref) == t.n_steps
    for k, (b, r) in enumerate(zip(got, ref)):
        assert {key: b[key] for key in r} == r, k
        assert b == t.step_breakdown(t.steps[k])  # one step alone gives the same figures


def _steps_trace(path, n: int) -> None:
    evs = []
    for i in range(n):
        t = i * 100
        evs += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t, "dur": 90},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 20,
                 "dur": 5, "args": {"correlation": i + 1}},
                {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 30, "dur": 20,
                 "args": {"correlation": i + 1, "stream": 7, "device": 0}}]
    path.write_text(json.dumps({"traceEvents": evs}))


def test_summary_cost_grows_linearly_with_steps(tmp_path):
    """Four times the steps costs about four times as much (the quadratic rule cost sixteen)."""
    def cost(n: int) -> float:
        p = tmp_path / f"s{n}.json"
        _steps_trace(p, n)
        best = float("inf")
        for _ in range(2):
            t = load_trace(p)
            t0 = time.process_time()
            d = summary_dict(t, top=0)
            best = min(best, time.process_time() - t0)
            assert d["steps"] == len(d["per_step"]) == n
        return best
    small, large = cost(4_000), cost(16_000)
    assert large < 9 * small, (small, large)
