"""HTA's late-start straggler metric on a job where the late rank never waits: its own copy of
each collective is short (on gloo, a collective's span is mostly the wait), so filtering each
rank's copy by duration dropped it and flagged the ranks that waited for it."""
from __future__ import annotations

from tracetui.jobs import ranks as R

COLS = ("rank", "name", "kind", "raw_name", "source", "group", "seq", "comms_id", "dtype", "msg_bytes",
        "group_size", "algorithm", "start_ns", "end_ns", "launch_ns", "stream", "step")


def _job(late: int, lag_ns: int):
    """Two ranks on one host, 3 steps of 100 ms, one all_reduce per step at 50 ms; rank ``late``
    starts it ``lag_ns`` after the other, which waits; all end together 0.1 ms after that."""
    info = {"rank": [0, 1], "host": ["n0", "n0"], "file": ["a", "b"], "device": ["", ""],
            "rank_from": ["distributedInfo"] * 2}
    coll = {c: [] for c in COLS}
    steps = {c: [] for c in ("rank",) + R.STEP_COLUMNS}
    for r in (0, 1):
        for s in range(3):
            t0 = s * 100_000_000
            start = t0 + 50_000_000 + (lag_ns if r == late else 0)
            end = t0 + 50_000_000 + lag_ns + 100_000
            row = dict(rank=r, name="all_reduce", kind="all_reduce", raw_name="gloo:all_reduce", source="annotation",
                       group="", seq=-1, comms_id="", dtype="Float", msg_bytes=4, group_size=2, algorithm="",
                       start_ns=start, end_ns=end, launch_ns=-1, stream=-1, step=s)
            for k, v in row.items():
                coll[k].append(v)
            step = dict(rank=r, step=s, name=f"ProfilerStep#{s}", start_ns=t0, end_ns=t0 + 100_000_000,
                        window_ns=100_000_000, kernels=0, verdict="")
            for k in steps:
                steps[k].append(step.get(k, -1))  # -1: a CPU rank's GPU figures
    return info, coll, steps


def test_the_late_rank_is_flagged_not_the_one_that_waited():
    for late in (0, 1):
        doc = R.analyze(*_job(late, lag_ns=20_000_000))  # the late rank's copy: 0.1 ms, 0.1% of a step
        flagged = {p["rank"]: p["hta_straggler_count"] for p in doc["per_rank"]}
        assert flagged == {late: 3, 1 - late: 0}, flagged
        assert doc["straggler"]["rank"] == late


def test_one_rank_alone_is_said_and_never_flagged():
    """A job of one rank (a single file): the report says there is nothing to compare, and HTA's
    metric flags no step (the only rank was 'latest' in every step)."""
    info, coll, steps = _job(late=1, lag_ns=20_000_000)
    keep = lambda t: {k: [v for v, r in zip(vals, t["rank"]) if r == 0] for k, vals in t.items()}  # noqa: E731
    doc = R.analyze(keep(info), keep(coll), keep(steps))
    assert [p["hta_straggler_count"] for p in doc["per_rank"]] == [0]
    assert doc["straggler"]["rank"] is None
    assert any(d.startswith("one rank only (rank 0)") for d in doc["diagnostics"])
