"""The ranks timeline's lanes (jobs/lanes.py) on the recorded gloo job: each CPU rank's
communication and compute time against the raw JSON, the same lanes from an index as from the
traces, and cell coverage that adds up to the totals."""
from __future__ import annotations

import re

import numpy as np
import pytest

from .conftest import raw
from .test_lateness import COMM_OPS, _union
from .test_ranks import ns


@pytest.fixture(scope="module")
def loaded(late_job):
    from tracetui.jobs.ranks import analyze_tables, load_job
    job, tables = load_job([late_job[0].parent], workers=1)
    return tables, analyze_tables(job, tables)


def _reference(path) -> tuple[int, int]:
    """(communication ns, compute ns) of a CPU rank: gloo's annotations and the collective ops;
    the other ops' time outside them."""
    doc = raw(path)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    iv = lambda e: (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))  # noqa: E731
    comm = [iv(e) for e in xs if (e.get("cat") == "cpu_op" and COMM_OPS.match(e["name"]))
            or (e.get("cat") == "user_annotation" and e["name"].startswith("gloo:"))]
    work = [iv(e) for e in xs if e.get("cat") == "cpu_op" and not COMM_OPS.match(e["name"])]
    return _union(comm), _union(work + comm) - _union(comm)


def test_cpu_lanes_against_the_raw_json(late_job, loaded):
    from tracetui.jobs.lanes import from_tables, offsets_of
    tables, doc = loaded
    lanes = from_tables(tables, offsets_of(doc))
    assert lanes.ranks == [0, 1, 2]
    for r, f in enumerate(late_job):
        comm, work = _reference(f)
        ln = lanes.lanes[r]
        assert (ln.total("comm"), ln.total("compute"), ln.total("copy")) == (comm, work, 0)
        tids = {str(e["tid"]) for e in raw(f)["traceEvents"] if e.get("cat") == "cpu_op"}
        assert {s.sub for s in lanes.subs[r]} == {f"tid {t}" for t in tids} | {"backend"}
        # every cell's coverage adds up to the lane's total over the whole job
        edges = lanes.start + np.linspace(0, lanes.end + 1 - lanes.start, 97).round().astype(np.int64)
        cov = ln.cover(edges)
        assert int(cov["comm"].sum()) == comm and int(cov["compute"].sum()) == work


def test_lanes_from_an_index_are_the_lanes_from_the_traces(late_job, loaded, tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    from tracetui.cli.main import main
    from tracetui.jobs.lanes import from_index, from_tables, offsets_of
    tables, doc = loaded
    idx = tmp_path / "job.idx"
    assert main(["index", str(late_job[0].parent), "-o", str(idx), "--workers", "1"]) == 0
    a, b = from_tables(tables, offsets_of(doc)), from_index(idx, offsets_of(doc))
    assert (a.ranks, a.start, a.end) == (b.ranks, b.start, b.end)
    for r in a.ranks:
        for k in ("compute", "comm", "copy"):
            assert np.array_equal(a.lanes[r].ivs[k][0], b.lanes[r].ivs[k][0])
            assert np.array_equal(a.lanes[r].ivs[k][1], b.lanes[r].ivs[k][1])
        assert [s.sub for s in a.subs[r]] == [s.sub for s in b.subs[r]]


def test_names_are_plain_text(loaded):
    """A thread id is shown as written (the lanes keep the table's text, the screen makes it visible)."""
    from tracetui.jobs.lanes import from_tables, offsets_of
    tables, doc = loaded
    lanes = from_tables(tables, offsets_of(doc))
    assert all(re.fullmatch(r"tid \S+|backend", s.sub) for r in lanes.ranks for s in lanes.subs[r])
