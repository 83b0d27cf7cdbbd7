"""Issue 36 item 1: gloo's collectives are communication on every rank, whatever the device.

A real 2-process gloo recording (CPU, torch.distributed) whose collectives take most of each step
(``gloo_job``'s ``comm_heavy``): per rank and step, communication is the union of the gloo
annotations launched in the step, and the verdict says communication. The same recording with
GPU kernels written into each step (as a GPU rank's trace holds them, gloo still on its
``pt_gloo_runloop`` threads) keeps that communication, its overlap with the kernels measured.
References are computed here from the raw JSON."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from tracetui.cli.main import main

from .conftest import gloo_annotations, raw


def ns(us) -> int:
    return int(Fraction(str(us)) * 1000)


def union(iv: list) -> int:
    out, cur = 0, None
    for a, b in sorted(iv):
        if cur is None or a > cur[1]:
            out += (cur[1] - cur[0]) if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return out + ((cur[1] - cur[0]) if cur else 0)


@pytest.fixture(scope="module")
def heavy_job(tmp_path_factory) -> list[Path]:
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    return record_gloo_job(tmp_path_factory.mktemp("heavy"), world=2, slow_s=0.0, steps=2, comm_heavy=True)


def _doc(capsys, folder) -> dict:
    capsys.readouterr()
    assert main(["ranks", str(folder), "--json", "--workers", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def _steps(path) -> list:
    return [e for e in raw(path)["traceEvents"] if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")]


def test_cpu_gloo_steps_are_communication(heavy_job, capsys):
    doc = _doc(capsys, heavy_job[0].parent)
    rows = {(s["rank"], s["name"]): s for s in doc["steps"]}
    bound = 0
    for r, path in enumerate(heavy_job):
        anns = gloo_annotations(path)
        for st in _steps(path):
            s0, s1 = ns(st["ts"]), ns(st["ts"]) + ns(st["dur"])
            comm = union([(ns(a["ts"]), ns(a["ts"]) + ns(a["dur"])) for a in anns if s0 <= ns(a["ts"]) < s1])
            row = rows[(r, st["name"])]
            assert abs(row["comm_us"] * 1000 - comm) <= 1
            want = comm >= 0.5 * (s1 - s0)  # the rule (tables.COMM_BOUND), from the raw JSON
            assert row["verdict"] == ("communication-bound" if want else "CPU only"), (r, st["name"], comm, s1 - s0)
            bound += want
    # the recording's collectives take most of its steps (a loaded machine may stretch one step's compute)
    assert bound >= len(rows) / 2, bound


def _with_gpu_kernels(src: Path, dst: Path) -> list:
    """``src`` with two GPU kernels in each step, on stream 7: one over the step's first tenth,
    one over the middle of its longest gloo annotation. Returns the kernels' intervals (ns)."""
    doc = raw(src)
    anns = gloo_annotations(src)
    added = []
    for st in _steps(src):
        s0, dur = st["ts"], st["dur"]
        mine = [a for a in anns if s0 <= a["ts"] < s0 + dur]
        big = max(mine, key=lambda a: a["dur"])
        for ts, d in ((s0, dur / 10), (big["ts"] + big["dur"] / 4, big["dur"] / 2)):
            ts, d = round(ts, 3), round(d, 3)
            doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0,
                                       "tid": 7, "ts": ts, "dur": d,
                                       "args": {"device": 0, "stream": 7, "correlation": 0}})
            added.append((ns(ts), ns(ts) + ns(d)))
    dst.write_text(json.dumps(doc))
    return added


def test_gloo_on_gpu_ranks_is_communication(heavy_job, tmp_path, capsys):
    """It was 0 on every step, with the steps called CPU-bound (92% host wait)."""
    kernels = {r: _with_gpu_kernels(p, tmp_path / p.name) for r, p in enumerate(heavy_job)}
    doc = _doc(capsys, tmp_path)
    rows = {(s["rank"], s["name"]): s for s in doc["steps"]}
    bound = 0
    for r, path in enumerate(heavy_job):
        anns = gloo_annotations(path)
        for st in _steps(path):
            s0, s1 = ns(st["ts"]), ns(st["ts"]) + ns(st["dur"])
            iv = [(ns(a["ts"]), ns(a["ts"]) + ns(a["dur"])) for a in anns if s0 <= ns(a["ts"]) < s1]
            comp = [k for k in kernels[r] if s0 <= k[0] < s1]
            comm = union(iv)
            both = comm + union(comp) - union(iv + comp)
            row = rows[(r, st["name"])]
            assert row["busy_us"] is not None  # a GPU rank now
            assert abs(row["comm_us"] * 1000 - comm) <= 1
            assert abs(row["comm_overlapped_us"] * 1000 - both) <= 1
            assert abs(row["comm_exposed_us"] * 1000 - (comm - both)) <= 1
            assert both > 0
            if comm - both >= 0.5 * row["window_us"] * 1000:
                assert row["verdict"] == "communication-bound"
                bound += 1
            else:
                assert row["verdict"] != "communication-bound"
    assert bound >= len(rows) / 2, bound
