"""A real 3-process gloo job with a ring of isend/irecv between the world's collectives: gloo's
send/recv annotations name no peer, so they are left out of matching (named in a diagnostic)
instead of being matched by order as if every rank's send were one collective. References
come from the raw JSON, never through tracetui's model."""
from __future__ import annotations

import json

import pytest

from tracetui.cli.main import main

from .conftest import assert_sql_agrees, gloo_annotations

WORLD, SLOW = 3, 2


@pytest.fixture(scope="module")
def p2p_job(tmp_path_factory):
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    return record_gloo_job(tmp_path_factory.mktemp("p2p_job"), world=WORLD, slow_rank=SLOW, slow_s=0.01,
                           steps=2, p2p=True)


def _p2p(a) -> bool:
    return a["name"] in ("gloo:send", "gloo:recv")


def test_sends_and_recvs_are_not_matched_as_collectives(p2p_job, capsys):
    capsys.readouterr()
    assert main(["ranks", str(p2p_job[0].parent), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    anns = [gloo_annotations(f) for f in p2p_job]
    n_p2p = [sum(map(_p2p, a)) for a in anns]
    assert all(n > 0 for n in n_p2p)
    assert not any(c["name"] in ("send", "recv", "gloo:send", "gloo:recv") or c["kind"] == "p2p"
                   for c in doc["collectives"])
    line = next(d for d in doc["diagnostics"] if "point-to-point" in d)
    assert line.startswith(f"{sum(n_p2p)} point-to-point transfer(s) left out")
    assert all(f"rank {r}: {n}" in line for r, n in enumerate(n_p2p))
    world = [[a for a in anns[r] if not _p2p(a)] for r in range(WORLD)]
    assert [p["collectives"] for p in doc["per_rank"]] == [len(w) for w in world]
    assert all(c["ranks"] == WORLD for c in doc["collectives"])
    assert not any("disagree" in d for d in doc["diagnostics"]), doc["diagnostics"]
    assert doc["straggler"]["rank"] == SLOW


def test_the_index_sql_leaves_them_out_too(p2p_job, tmp_path, capsys):
    pytest.importorskip("duckdb")
    from tracetui.jobs import index as ix
    out = tmp_path / "idx"
    assert main(["index", str(p2p_job[0].parent), "-o", str(out), "--workers", "1"]) == 0
    doc = ix.analyze_index(out)
    assert_sql_agrees(ix.straggler_query(out), doc)
