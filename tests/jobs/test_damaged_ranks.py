"""A job with ranks that cannot be read: each is left out and named, the rest analysed; a damaged
but readable rank keeps what was read and says what was repaired; a file named twice is read once
and said. References come from the raw JSON and from opening each bad file on its own."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tracetui.cli.main import main

from tests.conftest import DATA

from .conftest import gloo_annotations, raw

WORLD = 6
CUT_AT = 0.6
"""Where rank 2's file is cut: after this share of its events (it keeps the events before)."""


def run(capsys, *args) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    rc = main([*map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> dict:
    """Six generated ranks: 0 and 3 whole, 2 cut mid-events (readable), 1 not JSON, 4 cut before
    its first event, 5 empty; and a named pipe claiming rank 5 beside them (given explicitly)."""
    from tracetui.workloads.replicate import replicate
    src = tmp_path_factory.mktemp("src")
    gen = replicate(DATA / "gloo_rank0.pt.trace.json.gz", src, WORLD, per_host=2, seed=11)
    d = tmp_path_factory.mktemp("damaged")
    files = {r: d / f.name for r, f in enumerate(gen["files"])}
    files[0].write_bytes(gen["files"][0].read_bytes())
    doc3 = raw(gen["files"][3])  # readable, but two ops have ts as text and one has none
    ops = [e for e in doc3["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    ops[0]["ts"], ops[1]["ts"] = str(ops[0]["ts"]), str(ops[1]["ts"])
    del ops[2]["ts"]
    files[3].write_text(json.dumps(doc3))
    doc = raw(gen["files"][2])
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    events = doc["traceEvents"]
    k = int(len(events) * CUT_AT)
    text = json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events)
    cut = text.index(json.dumps(events[k]))  # in the middle of event k: events[:k] are whole
    files[2].write_text(text[:cut + len(json.dumps(events[k])) // 2])
    files[1].write_text("this is not a trace\n")
    files[4].write_text('{"distributedInfo": ' + json.dumps(dict(head["distributedInfo"], rank=4))
                        + ', "traceEvents": [')
    files[5].write_bytes(b"")
    fifo = tmp_path_factory.mktemp("fifo") / "pipe_rank-5.pt.trace.json"
    os.mkfifo(fifo)
    return {"dir": d, "files": files, "fifo": fifo, "kept_events": events[:k], "source": gen["files"]}


def alone_problem(capsys, path: Path) -> str:
    """The one-line problem ``tracetui summary FILE`` gives for the file on its own."""
    rc, _, err = run(capsys, "summary", path)
    assert rc == 2 and len(err) == 1, err
    return err[0].split(f"{path}: ", 1)[1]


def test_unreadable_ranks_are_skipped_and_named(damaged, capsys):
    files = damaged["files"]
    given = [files[r] for r in range(WORLD)] + [damaged["fifo"]]
    rc, out, err = run(capsys, "ranks", *given, "--json", "--workers", "2")
    assert rc == 0 and not err, err
    doc = json.loads(out)
    good = {raw(damaged["source"][r])["distributedInfo"]["rank"] for r in (0, 2, 3)}
    assert [p["rank"] for p in doc["per_rank"]] == sorted(good) == [0, 2, 3]
    assert {s["rank"] for s in doc["steps"]} == good
    assert {p["rank"] for c in doc["collectives"] for p in c["per_rank"]} == good
    diags = doc["diagnostics"]
    for r, path in [(1, files[1]), (4, files[4]), (5, files[5]), (5, damaged["fifo"])]:
        line = f"rank {r} ({path.name}): skipped: {alone_problem(capsys, path)}"
        assert diags.count(line) == 1, (line, diags)
    assert not [d for d in diags if "missing" in d]  # a skipped rank is named, not counted missing
    # the cut rank keeps every whole event: its collectives are the gloo annotations before the cut
    kept = [e for e in damaged["kept_events"] if e.get("ph") == "X" and e.get("cat") == "user_annotation"
            and e["name"].startswith("gloo:")]
    whole = gloo_annotations(damaged["source"][2])
    assert 0 < len(kept) < len(whole)
    assert next(p for p in doc["per_rank"] if p["rank"] == 2)["collectives"] == len(kept)
    # and what loading repaired in it is the job's diagnostic too, as `summary` says it of the file
    rc, s_out, _ = run(capsys, "summary", files[2], "--json")
    repairs = json.loads(s_out)["load"]["repairs"]
    assert rc == 0 and repairs
    for note in repairs:
        assert f"rank 2 ({files[2].name}): {note}" in diags
    # rank 3 lost events to wrong types and a missing ts: said as summary says it, counted from the raw JSON
    ev3 = raw(files[3])["traceEvents"]
    text_ts, no_ts = sum(isinstance(e.get("ts"), str) for e in ev3), sum("ts" not in e for e in ev3)
    rc, s_out, _ = run(capsys, "summary", files[3], "--json")
    s3 = json.loads(s_out)
    assert rc == 0 and s3["diagnostics"]["events_missing_fields"] == no_ts == 1
    assert any(f"left out {text_ts} event(s)" in n for n in s3["load"]["repairs"])
    for note in s3["load"]["repairs"]:
        assert f"rank 3 ({files[3].name}): {note}" in diags
    assert any(d.startswith(f"rank 3 ({files[3].name}): {no_ts} events without ts") for d in diags)


def test_index_leaves_the_skipped_ranks_out_and_says_so(damaged, capsys, tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    import pyarrow.parquet as pq
    idx = tmp_path / "job.idx"
    rc, out, err = run(capsys, "index", damaged["dir"], "-o", idx, "--workers", "2")
    assert rc == 0, err
    bad = {1: "rank 1 (", 4: "rank 4 (", 5: "rank 5 ("}
    assert "3 skipped" in out and sorted(e.split(")")[0] + ")" for e in err) == sorted(
        f"tracetui: {v}{damaged['files'][r].name})" for r, v in bad.items())
    man = json.loads((idx / "tracetui-index.json").read_text())
    assert [r["rank"] for r in man["ranks"]] == [0, 2, 3]
    assert sorted(pq.read_table(idx / "info.parquet").column("rank").to_pylist()) == [0, 2, 3]
    for t in ("steps", "collectives"):
        assert set(pq.read_table(idx / f"{t}.parquet").column("rank").to_pylist()) == {0, 2, 3}
    assert sorted(p.name for p in (idx / "ops").iterdir()) == [f"rank-{r:06d}.parquet" for r in (0, 2, 3)]
    rc, on_traces, _ = run(capsys, "ranks", damaged["dir"], "--json", "--workers", "1")
    rc2, on_index, _ = run(capsys, "ranks", idx, "--json")
    assert rc == rc2 == 0
    assert json.loads(on_index) == json.loads(on_traces)
    man_d = man["diagnostics"]  # the analysis adds its own (collectives the ranks disagree on) after them
    assert man_d == json.loads(on_traces)["diagnostics"][:len(man_d)]
    assert all(any(d.startswith(v) and "skipped" in d for d in man["diagnostics"]) for v in bad.values())


def test_a_job_of_no_readable_rank_is_one_line(damaged, capsys, tmp_path):
    files = damaged["files"]
    rc, _, err = run(capsys, "ranks", files[1], files[4], files[5])
    assert rc == 2 and len(err) == 1, err
    first = f"tracetui: error: {files[1].resolve()}: {alone_problem(capsys, files[1])}"
    assert err[0].startswith(first), err
    assert f"rank 4 ({files[4].name})" in err[0] and f"rank 5 ({files[5].name})" in err[0]
    rc, _, err = run(capsys, "ranks", files[5])  # one file: its own problem, as `summary` says it
    assert rc == 2 and err == [f"tracetui: error: {files[5].resolve()}: {alone_problem(capsys, files[5])}"]


def test_a_file_named_twice_is_read_once_and_said(damaged, capsys):
    files = damaged["files"]
    rc, out, _ = run(capsys, "ranks", files[0], files[0], files[3], "--json", "--workers", "1")
    doc = json.loads(out)
    assert rc == 0 and [p["rank"] for p in doc["per_rank"]] == [0, 3]
    assert f"{files[0]}: named 2 times: read once" in doc["diagnostics"]
    folder = damaged["dir"]
    other = folder / ".." / folder.name / files[3].name  # the same file, spelled another way
    rc, out, _ = run(capsys, "ranks", other, folder, "--json", "--workers", "1")
    doc = json.loads(out)
    assert rc == 0 and doc["ranks"] == 3  # the folder's readable ranks, 0, 2 and 3, rank 3 once
    assert f"{other}: named 2 times (also as {files[3]}): read once" in doc["diagnostics"]
    rc, out, _ = run(capsys, "ranks", folder, folder, "--json", "--workers", "1")  # a folder twice: one line
    doc = json.loads(out)
    n_files = len([f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz"))])
    again = [d for d in doc["diagnostics"] if "named" in d]
    assert again == [f"{n_files} files named more than once (e.g. {sorted(folder.iterdir())[0]}; a folder given "
                     f"twice?): each read once"], again


def test_an_unreadable_copy_of_a_rank_does_not_make_two_files_a_job(damaged, tmp_path):
    """Review: `tracetui a_rank0.json b_rank0.json` with b empty opened the job view on one rank
    (the skipped file counted as a second rank); two files of one rank are not a job."""
    from tracetui.jobs.ranks import is_job
    good = damaged["files"][0]
    a = tmp_path / f"a_{good.name}"
    a.write_bytes(good.read_bytes())
    b = tmp_path / f"b_{good.name}"
    b.write_bytes(b"")
    assert not is_job([a, b])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its permissions")
def test_a_rank_without_read_permission_is_skipped(damaged, capsys, tmp_path):
    f = tmp_path / damaged["files"][3].name
    f.write_bytes(damaged["files"][3].read_bytes())
    f.chmod(0)
    rc, out, _ = run(capsys, "ranks", damaged["files"][0], f, "--json", "--workers", "1")
    assert rc == 0
    line = next(d for d in json.loads(out)["diagnostics"] if d.startswith(f"rank 3 ({f.name}): skipped: "))
    assert "Permission denied" in line


def test_ray_skips_the_same_ranks(damaged, capsys, tmp_path):
    """The skip happens in the rank's task, so a local Ray instance writes the same index."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    pytest.importorskip("ray")
    local, on_ray = tmp_path / "local.idx", tmp_path / "ray.idx"
    assert run(capsys, "index", damaged["dir"], "-o", local, "--workers", "1")[0] == 0
    rc, _, err = run(capsys, "index", damaged["dir"], "-o", on_ray, "--engine", "ray", "--workers", "2")
    assert rc == 0, err
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(on_ray) for p in on_ray.rglob("*") if p.is_file())
    for f in files:
        assert (on_ray / f).read_bytes() == (local / f).read_bytes(), f
