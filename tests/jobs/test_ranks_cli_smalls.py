"""`ranks` / `index` command-line edges: options that were silently ignored, an unreachable Ray
address, one message for every bad --workers, the unrecorded group's one name, per-rank
collective rows in csv/md, and start/end times as the nearest float to the exact ns."""
from __future__ import annotations

import csv
import io
import json
import socket
import time
from fractions import Fraction

import pytest

from tracetui.cli.main import main

from .conftest import GLOO_WORLD, gloo_annotations, raw


def run(capsys, *argv) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    try:
        rc = main(list(map(str, argv)))
    except SystemExit as e:
        rc = e.code
    got = capsys.readouterr()
    return rc, got.out, got.err.strip().splitlines()


def exact_ns(path, us) -> int:
    """A raw µs timestamp (written with 3 decimals) on the epoch clock, in exact ns."""
    return raw(path).get("baseTimeNanoseconds", 0) + int(Fraction(str(us)) * 1000)


def test_address_without_ray_is_an_error(gloo_job, tmp_path, capsys):
    rc, _, err = run(capsys, "index", gloo_job[0].parent, "-o", tmp_path / "idx", "--address", "10.0.0.1:6379")
    assert rc == 2 and len(err) == 1 and "--engine ray" in err[0]
    assert not (tmp_path / "idx").exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_ray_address_fails_in_one_line_at_once(gloo_job, tmp_path, capsys):
    pytest.importorskip("ray")
    pytest.importorskip("pyarrow")
    addr = f"127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    rc, _, err = run(capsys, "index", gloo_job[0].parent, "-o", tmp_path / "idx", "--engine", "ray", "--address", addr)
    assert time.monotonic() - t0 < 15
    assert rc == 2 and len(err) == 1 and err[0] == f"tracetui: error: --address {addr}: no Ray cluster answers there " \
                                                  "(Connection refused)"
    assert not (tmp_path / "idx").exists()


def test_address_auto_with_no_cluster_running_is_one_line(gloo_job, tmp_path, capsys, monkeypatch):
    """Review: `--address auto` (which the probe leaves to Ray) with no cluster running printed
    Ray's 35-line ConnectionError traceback, exit 1."""
    pytest.importorskip("ray")
    pytest.importorskip("pyarrow")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "ray"))  # no cluster of another test's to find
    # nor one another test (tests/jobs/test_index.py, test_damaged_ranks.py) runs meanwhile in the
    # other pytest worker: for "auto" Ray also looks for any gcs_server process on the machine
    from ray._private import services
    def none_running() -> list:
        return []
    none_running.cache_clear = lambda: None  # Ray clears the cache of the function it replaces
    monkeypatch.setattr(services, "find_gcs_addresses", none_running)
    rc, _, err = run(capsys, "index", gloo_job[0].parent, "-o", tmp_path / "idx", "--engine", "ray", "--address", "auto")
    assert rc == 2 and len(err) == 1 and err[0].startswith("tracetui: error: --address auto: no Ray cluster to join (")
    assert not (tmp_path / "idx").exists()


def test_probe_lets_a_listening_address_through():
    from tracetui.jobs.index import EngineError, probe_address
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        probe_address(f"127.0.0.1:{s.getsockname()[1]}")
        probe_address(f"ray://127.0.0.1:{s.getsockname()[1]}")
    probe_address("auto")  # Ray's own lookup
    with pytest.raises(EngineError):
        probe_address(f"127.0.0.1:{_closed_port()}")


@pytest.mark.parametrize("cmd", ["ranks", "index"])
def test_every_bad_worker_count_gets_one_message(gloo_job, tmp_path, capsys, cmd):
    extra = ["-o", tmp_path / "idx"] if cmd == "index" else []
    msgs = set()
    for n in ("0", "-3"):
        rc, _, err = run(capsys, cmd, gloo_job[0], *extra, "--workers", n)
        assert rc == 2 and len(err) == 1
        msgs.add(err[0].replace(f"{n}:", "N:"))
    assert len(msgs) == 1 and "1 or more" in msgs.pop()


@pytest.fixture(scope="module")
def gloo_index(gloo_job, tmp_path_factory):
    pytest.importorskip("duckdb")
    out = tmp_path_factory.mktemp("idx") / "job.idx"
    assert main(["index", str(gloo_job[0].parent), "-o", str(out), "--workers", "1"]) == 0
    return out


@pytest.mark.parametrize("opt", [["--steps", "ProfilerStep.*"], ["--torch-version", "2.13"]])
def test_ranks_on_an_index_says_it_keeps_its_build_options(gloo_index, capsys, opt):
    for cmd in (["ranks"], []):  # `tracetui INDEX` opens the job view: refused before it starts
        rc, out, err = run(capsys, *cmd, gloo_index, *opt)
        assert rc == 2 and not out and len(err) == 1
        assert err[0].startswith(f"tracetui: error: {gloo_index}: {opt[0]}: an index keeps")


def test_unrecorded_group_has_one_name(gloo_job, capsys):
    rc, out, _ = run(capsys, "ranks", gloo_job[0].parent, "--json", "--workers", "1")
    doc = json.loads(out)
    groups = {c["group"] for c in doc["collectives"]}
    assert groups == set(doc["matched_by"]) == {"default"}
    rc, text, _ = run(capsys, "ranks", gloo_job[0].parent, "--workers", "1", "--top", "0")
    assert text.count("(default #") == len(doc["collectives"])


def test_collective_ranks_table_holds_every_rank_of_every_collective(gloo_job, capsys):
    """csv: one row per collective per rank, with start/end (the float nearest the exact epoch ns,
    written in full) and wait, all from the raw annotations; md lists the table too; the
    collectives table no longer writes its per-rank list as a count."""
    rc, out, _ = run(capsys, "ranks", gloo_job[0].parent, "--format", "csv", "--table", "collective_ranks",
                     "--workers", "1")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    anns = [gloo_annotations(p) for p in gloo_job]
    assert list(rows[0]) == ["group", "index", "name", "rank", "start_us", "end_us", "wait_us", "step"]
    assert len(rows) == sum(len(a) for a in anns) == GLOO_WORLD * len(anns[0])
    for row in rows:
        j, r = int(row["index"]), int(row["rank"])
        a = anns[r][j]
        s = exact_ns(gloo_job[r], a["ts"])
        e = s + int(Fraction(str(a["dur"])) * 1000)
        assert (row["group"], row["name"]) == ("default", a["name"])
        assert float(row["start_us"]) == float(Fraction(s, 1000))  # correctly rounded, not float64(ns) / 1e3
        assert float(row["end_us"]) == float(Fraction(e, 1000))
        starts = [exact_ns(gloo_job[q], anns[q][j]["ts"]) for q in range(GLOO_WORLD)]
        assert abs(float(row["wait_us"]) * 1000 - (max(starts) - s)) <= 1
    rc, out, _ = run(capsys, "ranks", gloo_job[0].parent, "--format", "csv", "--table", "collectives", "--workers", "1")
    assert "per_rank" not in out.splitlines()[0] and "items]" not in out
    rc, md, _ = run(capsys, "ranks", gloo_job[0].parent, "--format", "md", "--workers", "1")
    assert "## collective_ranks" in md and md.index("## collectives") < md.index("## collective_ranks")


def test_json_times_are_the_nearest_float_to_the_exact_ns(gloo_job, capsys):
    rc, out, _ = run(capsys, "ranks", gloo_job[0].parent, "--json", "--workers", "1")
    doc = json.loads(out)
    anns = [gloo_annotations(p) for p in gloo_job]
    n_off = 0
    for j, c in enumerate(doc["collectives"]):
        for pr in c["per_rank"]:
            assert pr["start_us"] == float(Fraction(exact_ns(gloo_job[pr["rank"]], anns[pr["rank"]][j]["ts"]), 1000))
            n_off += pr["start_us"] != float(exact_ns(gloo_job[pr["rank"]], anns[pr["rank"]][j]["ts"])) / 1e3
    assert n_off > 0  # the old float64(ns) / 1e3 differs on some: the test tells them apart
