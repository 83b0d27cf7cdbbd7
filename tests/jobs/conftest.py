"""Fixtures for the many-ranks tests: one gloo job recorded per session, and generated jobs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import built_once

GLOO_WORLD = 3
GLOO_SLOW = 1


@pytest.fixture(scope="session")
def gloo_job(tmp_path_factory) -> list[Path]:
    """A 3-process gloo job (DDP + explicit collectives) recorded on CPU; rank 1 slowed on purpose."""
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    return built_once(tmp_path_factory, "gloo_job", lambda out: record_gloo_job(
        out, world=GLOO_WORLD, slow_rank=GLOO_SLOW, slow_s=0.02, steps=3))


LATE, HEAVY = 1, 2
"""In ``late_job``: the rank that starts each step 800 ms late, the rank that computes twice as long."""


@pytest.fixture(scope="session")
def late_job(tmp_path_factory) -> list[Path]:
    """A 3-process gloo job on CPU: rank 1 sleeps 800 ms before each step's work (far past what
    contention on a loaded 2-core machine does to the others' compute: 300 ms was not, once), rank 2 runs twice
    the matmuls of the others (the straggler split's two causes)."""
    pytest.importorskip("torch.distributed")
    from tracetui.workloads.gloo_job import record_gloo_job
    return built_once(tmp_path_factory, "late_job", lambda out: record_gloo_job(
        out, world=3, slow_rank=-1, steps=3, late=(LATE, 0.8), more_work=(HEAVY, 60)))


@pytest.fixture(scope="session")
def gen_job(gloo_job, tmp_path_factory) -> dict:
    """Rank 0 of the gloo job replicated into 6 ranks on 3 hosts, rank 4 a planted straggler."""
    from tracetui.workloads.replicate import replicate
    return built_once(tmp_path_factory, "gen_job", lambda out: replicate(
        gloo_job[0], out, 6, per_host=2, straggler=4, delay_ns=300_000, seed=7))


def raw(path) -> dict:
    return json.loads(Path(path).read_text())


def gloo_annotations(path) -> list[dict]:
    """The gloo:* annotations of one rank, every worker thread merged, in start order."""
    ev = raw(path)["traceEvents"]
    return sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and e["name"].startswith("gloo:")), key=lambda e: (e["ts"], e["ts"] + e["dur"]))


def copy(src, dst) -> Path:
    shutil.copyfile(src, dst)
    return Path(dst)


def assert_sql_agrees(rows: list[dict], doc: dict) -> None:
    """``index.straggler_query`` rows and the analysis' ``per_rank`` (``ranks --json``) say the
    same per rank: collectives, arrivals last, total wait and the waiting caused (ns vs µs)."""
    assert [(r["rank"], r["collectives"], r["last_count"], r["wait_total_ns"], r["caused_wait_ns"]) for r in rows] == \
        [(p["rank"], p["collectives"], p["last_count"], round(p["wait_total_us"] * 1000), round(p["caused_wait_us"] * 1000))
         for p in doc["per_rank"]]


def without_shapes(files, folder: Path) -> Path:
    """Copies of ``files`` in ``folder`` as a recording with record_shapes=False would write them."""
    folder.mkdir()
    for f in files:
        doc = raw(f)
        for e in doc["traceEvents"]:
            for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                e.get("args", {}).pop(k, None)
        (folder / f.name).write_text(json.dumps(doc))
    return folder
