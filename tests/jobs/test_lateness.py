"""The straggler verdict split into start skew and work imbalance, and each rank's alignment spread,
on a real gloo job recorded on the CPU in which rank 1 sleeps before each step's work and rank 2
computes twice as long; every figure against a reference computed here from the raw JSON."""
from __future__ import annotations

import re
from statistics import mean

import pytest

from .conftest import gloo_annotations, raw
from .test_ranks import ns, ranks_json

LATE, HEAVY = 1, 2
COMM_OPS = re.compile(r"^(?:record_param_comms|c10d::|c10d_functional::|_c10d_functional::|nccl:|symm_mem::)")
"""The ops that launch a collective (written here, not taken from tracetui's taxonomy)."""


@pytest.fixture(scope="module")
def late_job(tmp_path_factory):
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    out = tmp_path_factory.mktemp("late_job")
    return record_gloo_job(out, world=3, slow_rank=-1, steps=3, late=(LATE, 0.3), more_work=(HEAVY, 60))


def _union(iv) -> int:
    total, cur = 0, None
    for s, e in sorted(iv):
        if e <= s:
            continue
        if cur is None or s > cur[1]:
            if cur:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


def _rank_steps(path) -> dict:
    """Per step name: (when the rank's first non-collective op started, its work in ns): the
    union of those ops in the step less what the collective ops and gloo's annotations cover."""
    doc = raw(path)
    base = doc.get("baseTimeNanoseconds", 0)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    iv = lambda e: (ns(e["ts"]) + base, ns(e["ts"]) + ns(e["dur"]) + base)  # noqa: E731
    out = {}
    for st in (e for e in xs if e["name"].startswith("ProfilerStep#")):
        s0, s1 = iv(st)
        inside = [e for e in xs if s0 <= iv(e)[0] < s1]
        work = [(a, min(b, s1)) for e in inside if e.get("cat") == "cpu_op" and not COMM_OPS.match(e["name"])
                for a, b in [iv(e)]]
        comm = [(a, min(b, s1)) for e in inside for a, b in [iv(e)]
                if (e.get("cat") == "cpu_op" and COMM_OPS.match(e["name"]))
                or (e.get("cat") == "user_annotation" and e["name"].startswith("gloo:"))]
        out[st["name"]] = (min(a for a, _ in work), _union(work + comm) - _union(comm))  # |W| - |W n C|
    return out


def _reference(files) -> tuple[dict, dict]:
    """(rank, step) -> (start skew ns, work imbalance ns), and rank -> their means."""
    per = {r: _rank_steps(f) for r, f in enumerate(files)}
    split = {}
    for name in per[0]:
        first = min(per[r][name][0] for r in per)
        least = min(per[r][name][1] for r in per)
        for r in per:
            split[(r, name)] = (per[r][name][0] - first, per[r][name][1] - least)
    means = {r: (mean(v[0] for k, v in split.items() if k[0] == r), mean(v[1] for k, v in split.items() if k[0] == r))
             for r in per}
    return split, means


def test_start_skew_and_work_imbalance_against_the_raw_json(late_job, capsys):
    hosts = {raw(f).get("host_name") for f in late_job}
    assert len(hosts) == 1  # one host: one clock, every offset 0, so the reference needs none
    doc = ranks_json(capsys, late_job[0].parent)
    assert all(p["offset_us"] == 0 for p in doc["per_rank"])
    split, means = _reference(late_job)
    got = {(s["rank"], s["name"]): (s["start_skew_us"], s["work_imbalance_us"]) for s in doc["steps"]}
    assert set(got) == set(split)
    for k, (sk, wi) in split.items():
        assert abs(got[k][0] * 1000 - sk) <= 1 and abs(got[k][1] * 1000 - wi) <= 1, k
    for p in doc["per_rank"]:
        sk, wi = means[p["rank"]]
        assert abs(p["start_skew_us"] * 1000 - sk) <= 1 and abs(p["work_imbalance_us"] * 1000 - wi) <= 1
    # what the recording planted: rank 1 started 300 ms late, rank 2 ran twice the matmuls
    assert max(means, key=lambda r: means[r][0]) == LATE and means[LATE][0] >= 250e6
    assert max(means, key=lambda r: means[r][1]) == HEAVY
    from tracetui.jobs.lateness import cause
    assert cause(*means[LATE]) == "start skew" and cause(*means[HEAVY]) == "work imbalance"
    s = doc["straggler"]  # whichever of the two made the others wait most, its cause is its own
    assert s["rank"] in (LATE, HEAVY), s
    assert s["cause"] == ("start skew" if s["rank"] == LATE else "work imbalance")
    assert abs(s["start_skew_us"] * 1000 - means[s["rank"]][0]) <= 1
    assert abs(s["work_imbalance_us"] * 1000 - means[s["rank"]][1]) <= 1


def test_text_report_says_the_cause(late_job, capsys):
    from tracetui.cli.main import main
    capsys.readouterr()
    assert main(["ranks", str(late_job[0].parent), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    _, means = _reference(late_job)
    r = next(p["rank"] for p in ranks_json(capsys, late_job[0].parent)["per_rank"]
             if f"likely straggler: rank {p['rank']} -" in out)
    assert (f"cause: {'start skew' if r == LATE else 'work imbalance'} (per step, mean: start skew "
            f"{means[r][0] / 1e3:,.1f} µs, work imbalance {means[r][1] / 1e3:,.1f} µs)") in out


def test_alignment_spread_is_the_iqr_of_end_differences(late_job, capsys):
    """Each rank's spread: the interquartile range (lower quartiles) of (its collective's end -
    rank 0's end) over the collectives in order; on rank 0 itself, none."""
    doc = ranks_json(capsys, late_job[0].parent)
    ends = {}
    for r, f in enumerate(late_job):
        base = raw(f).get("baseTimeNanoseconds", 0)
        ends[r] = [ns(e["ts"]) + ns(e["dur"]) + base for e in gloo_annotations(f)]
    per = {p["rank"]: p for p in doc["per_rank"]}
    assert per[0]["offset_spread_us"] is None
    for r in (1, 2):
        d = sorted(a - b for a, b in zip(ends[r], ends[0]))
        n = len(d) - 1
        assert len(d) == per[r]["collectives"]
        assert per[r]["offset_spread_us"] * 1000 == pytest.approx(d[3 * n // 4] - d[n // 4], abs=1)
