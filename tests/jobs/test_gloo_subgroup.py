"""A real 4-process gloo job with a `new_group([0, 1])` all-reduce between the world's collectives:
gloo's annotations name no group, so the subgroup's collectives are placed by which ranks hold
them (`distributedInfo.pg_config`), and every collective matches with equal counts per group.
References come from the raw JSON, never through tracetui's model."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from tracetui.cli.main import main

from .conftest import assert_sql_agrees, gloo_annotations, raw, without_shapes

WORLD, SUB, SLOW = 4, (0, 1), 2


def ns(us: float) -> int:
    return int(Fraction(str(us)) * 1000)


@pytest.fixture(scope="module")
def sub_job(tmp_path_factory):
    """The recording as gloo writes it: ranks 2 and 3 list only the world group in pg_config."""
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    files = record_gloo_job(tmp_path_factory.mktemp("sub_job"), world=WORLD, slow_rank=SLOW, slow_s=0.005,
                            steps=2, subgroup=SUB)
    assert [len(raw(f)["distributedInfo"]["pg_config"]) for f in files] == [2, 2, 1, 1]
    return files


def _c10d_ops(path) -> list[dict]:
    return sorted((e for e in raw(path)["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("c10d::")),
                  key=lambda e: e["ts"])


def _reference(files):
    """Per group, per rank, the annotations in start order: the subgroup's are the float64 ones
    this job runs only on ranks 0 and 1, the rest are the world's."""
    out = {"1": {}, "default": {}}
    for r, f in enumerate(files):
        anns = gloo_annotations(f)
        sub = [a for a in anns if a.get("args", {}).get("Input type") == ["double"]]
        out["default"][r] = [a for a in anns if a not in sub]
        if r in SUB:
            out["1"][r] = sub
        else:
            assert not sub
    return out


def test_subgroup_collectives_match_within_their_group(sub_job, capsys):
    capsys.readouterr()
    assert main(["ranks", str(sub_job[0].parent), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = _reference(sub_job)
    assert {k: len(v[0]) for k, v in ref.items()} == {"1": 2, "default": len(ref["default"][0])}
    assert doc["matched_by"] == {"1": "order", "default": "order"}
    assert not [d for d in doc["diagnostics"] if "different numbers" in d or "disagree" in d]
    assert [p["collectives"] for p in doc["per_rank"]] == [len(gloo_annotations(f)) for f in sub_job]
    by = {(c["group"], c["index"]): c for c in doc["collectives"]}
    assert len(by) == len(doc["collectives"]) == sum(len(v[0]) for v in ref.values())
    assert all(p["offset_us"] == 0 for p in doc["per_rank"])  # one host: waits on the recorded times
    for g, per in ref.items():
        for j in range(len(per[0])):
            c = by[(g, j)]
            starts = {r: ns(a[j]["ts"]) for r, a in per.items()}
            assert sorted(p["rank"] for p in c["per_rank"]) == sorted(per)
            assert c["group_size"] == len(per)
            for pr in c["per_rank"]:
                assert abs(pr["wait_us"] * 1000 - (max(starts.values()) - starts[pr["rank"]])) <= 1
            assert c["last_rank"] == max(starts, key=starts.get)
    assert doc["straggler"]["rank"] == SLOW


def test_reduce_scatter_is_named_by_its_c10d_op(sub_job, capsys):
    """gloo runs reduce_scatter_tensor as gloo:all_reduce of the whole input; the c10d op that
    queued it names it, and its size is the full input (the raw op's second Input Dims)."""
    capsys.readouterr()
    assert main(["ranks", str(sub_job[0].parent), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rs_ops = [e for e in _c10d_ops(sub_job[0]) if "reduce_scatter" in e["name"]]
    assert len(rs_ops) == 2
    got = [c for c in doc["collectives"] if c["kind"] == "reduce_scatter"]
    assert [c["name"] for c in got] == [e["name"] for e in rs_ops]
    full = rs_ops[0]["args"]["Input Dims"][1][0]
    assert all(c["msg_bytes"] == full * 4 and c["ranks"] == WORLD for c in got)
    assert got[0]["busbw_gbps"] == pytest.approx(full * 4 / (got[0]["latency_us"] * 1000) * (WORLD - 1) / WORLD)
    # the all-reduces are still all-reduces: one per raw c10d::allreduce_ op of the default group
    n_ar = sum(e["name"] == "c10d::allreduce_" for e in _c10d_ops(sub_job[2]))
    assert sum(c["kind"] == "all_reduce" and c["group"] == "default" for c in doc["collectives"]) == n_ar


def test_index_and_sql_agree_on_the_subgroup_job(sub_job, tmp_path, capsys):
    pytest.importorskip("duckdb")
    from tracetui.jobs import index as ix
    out = tmp_path / "sub.idx"
    assert main(["index", str(sub_job[0].parent), "-o", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["ranks", str(sub_job[0].parent), "--json", "--workers", "1"]) == 0
    from_traces = json.loads(capsys.readouterr().out)
    from tracetui.report.output import round_us
    doc = ix.analyze_index(out)
    assert json.loads(json.dumps(round_us(doc))) == from_traces  # --json writes µs to the ns
    assert_sql_agrees(ix.straggler_query(out), doc)


def test_reduce_scatter_named_without_recorded_shapes(sub_job, tmp_path, capsys):
    """record_shapes off: no Input Dims to compare, the op still names the reduce-scatter (the
    one kind gloo runs as another), and no all-reduce is taken for one."""
    d = without_shapes(sub_job, tmp_path / "noshapes")
    from tracetui.jobs.ranks import load_job
    _, tables = load_job([d], workers=1)
    for r, t in enumerate(tables):
        c = t["collectives"]
        rs_ops = [e["name"] for e in _c10d_ops(sub_job[r]) if "reduce_scatter" in e["name"]]
        assert len(rs_ops) == 2
        got = [(n, raw_name) for n, k, raw_name in zip(c["name"], c["kind"], c["raw_name"]) if k == "reduce_scatter"]
        assert got == [(n, "gloo:all_reduce") for n in rs_ops]
        n_ar = sum(e["name"] == "c10d::allreduce_" for e in _c10d_ops(sub_job[r]))
        assert sum(k == "all_reduce" for k in c["kind"]) == n_ar


def test_a_subgroup_member_missing_from_the_folder_keeps_the_world_aligned(sub_job, tmp_path, capsys):
    """QA round 2: with rank 1 of the [0, 1] subgroup missing, rank 0's subgroup collectives were
    no longer held by 'exactly the group's ranks' and fell into the world's order, misaligning it
    (15 false 'ranks disagree' lines). The group's members present in the job decide now; the
    world's collectives match with equal counts, the index's SQL agreeing."""
    import shutil
    d = tmp_path / "job"
    d.mkdir()
    for r, f in enumerate(sub_job):
        if r != 1:
            shutil.copy(f, d / f.name)
    capsys.readouterr()
    assert main(["ranks", str(d), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = _reference(sub_job)
    world = [c for c in doc["collectives"] if c["group"] == "default"]
    assert len(world) == len(ref["default"][0]) and all(c["ranks"] == 3 for c in world)
    # rank 0's subgroup collectives are its alone now: no one to be last against
    assert sum(p["last_count"] for p in doc["per_rank"]) == len(world)
    assert not any("disagree" in x or "different numbers" in x for x in doc["diagnostics"]), doc["diagnostics"]
    for c in world:  # each wait from the raw JSON of the collective's index on each rank
        starts = {p["rank"]: ns(ref["default"][p["rank"]][c["index"]]["ts"]) + raw(sub_job[p["rank"]])["baseTimeNanoseconds"]
                  for p in c["per_rank"]}
        assert {p["rank"]: p["wait_us"] for p in c["per_rank"]} == pytest.approx(
            {r: (max(starts.values()) - s) / 1e3 for r, s in starts.items()}, abs=1e-3)
    pytest.importorskip("duckdb")
    from tracetui.jobs import index as ix
    out = tmp_path / "idx"
    assert main(["index", str(d), "-o", str(out), "--workers", "1"]) == 0
    assert_sql_agrees(ix.straggler_query(out), doc)


def test_ranks_without_collectives_do_not_turn_the_world_into_a_subgroup(sub_job, tmp_path, capsys):
    """Review: with ranks 2 and 3 holding no collective (their annotations cut away), every world
    collective was held by exactly {0, 1}, the subgroup's ranks, and was relabelled group 1
    (size 2: bus bandwidth and the all-gather's size halved). Only ranks that hold collectives
    decide a subgroup now; the idle ranks are named, and the SQL lists them too."""
    d = tmp_path / "job"
    d.mkdir()
    for r, f in enumerate(sub_job):
        doc = raw(f)
        if r >= 2:
            doc["traceEvents"] = [e for e in doc["traceEvents"]
                                  if not str(e.get("name", "")).startswith(("gloo:", "c10d::"))]
        (d / f.name).write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["ranks", str(d), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = _reference(sub_job)
    world = [c for c in doc["collectives"] if c["group"] == "default"]
    # with only ranks 0 and 1 communicating, their subgroup is every rank that holds collectives:
    # its all-reduces cannot be told from the world's and stay in the world's order
    assert len(world) == len(ref["default"][0]) + len(ref["1"][0]) and all(c["group_size"] == WORLD for c in world)
    gathers = [a for a in ref["default"][0] if a["name"] == "gloo:all_gather"]
    assert [c["msg_bytes"] for c in world if c["kind"] == "all_gather"] == [
        4 * WORLD * a["args"]["Input Dims"][0][0] for a in gathers]  # float32, the gathered output
    assert any(x.startswith("rank(s) 2-3 hold no collective") for x in doc["diagnostics"])
    pytest.importorskip("duckdb")
    from tracetui.jobs import index as ix
    out = tmp_path / "idx"
    assert main(["index", str(d), "-o", str(out), "--workers", "1"]) == 0
    assert_sql_agrees(ix.straggler_query(out), doc)


def test_a_subgroup_that_cannot_be_told_apart_is_said(sub_job, tmp_path, capsys):
    """QA round 2: without record_shapes every all-reduce looks alike, the subgroup's collectives
    sat in the world's order with no word. pg_config lists the group: the job now says it."""
    d = without_shapes(sub_job, tmp_path / "noshapes")
    capsys.readouterr()
    assert main(["ranks", str(d), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    groups = {g["pg_name"] for f in sub_job for g in raw(f)["distributedInfo"]["pg_config"] if g["pg_size"] < WORLD}
    assert groups == {"1"}
    assert not any(c["group"] == "1" for c in doc["collectives"])
    assert any(x.startswith("process group(s) 1 (smaller than the job, in pg_config) hold no collective told apart")
               for x in doc["diagnostics"]), doc["diagnostics"]
    capsys.readouterr()
    assert main(["ranks", str(sub_job[0].parent), "--json", "--workers", "1"]) == 0  # with shapes: told apart, no line
    assert not any("told apart" in x for x in json.loads(capsys.readouterr().out)["diagnostics"])
