"""`tracetui ranks` on a recorded gloo job and on generated jobs, against references computed here
from the raw JSON (never through tracetui's model)."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from statistics import median_low

import pytest

from tracetui.cli.main import main

from .conftest import GLOO_SLOW, GLOO_WORLD, copy, gloo_annotations, raw


def ranks_json(capsys, *paths) -> dict:
    capsys.readouterr()
    assert main(["ranks", *map(str, paths), "--json", "--workers", "1"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def gloo_doc(gloo_job):
    from tracetui.jobs.ranks import analyze_tables, load_job
    job, tables = load_job([gloo_job[0].parent], workers=2)
    return analyze_tables(job, tables)


def ns(us: float) -> int:
    """µs as written in the trace (3 decimals) -> exact ns."""
    return int(Fraction(str(us)) * 1000)


def test_gloo_names_the_slow_rank(gloo_doc):
    assert gloo_doc["straggler"]["rank"] == GLOO_SLOW
    slow = next(p for p in gloo_doc["per_rank"] if p["rank"] == GLOO_SLOW)
    assert slow["last_count"] == max(p["last_count"] for p in gloo_doc["per_rank"])
    assert str(GLOO_SLOW) in gloo_doc["straggler"]["evidence"]


def test_gloo_every_collective_matched_on_every_rank(gloo_job, gloo_doc):
    counts = [len(gloo_annotations(p)) for p in gloo_job]
    assert counts[0] > 0 and len(set(counts)) == 1
    assert [p["collectives"] for p in gloo_doc["per_rank"]] == counts
    assert len(gloo_doc["collectives"]) == counts[0]
    assert all(c["ranks"] == GLOO_WORLD for c in gloo_doc["collectives"])
    assert not [d for d in gloo_doc["diagnostics"] if "different numbers" in d or "disagree" in d]


def test_gloo_waits_agree_with_the_raw_json(gloo_job, gloo_doc):
    """Same host, same clock: wait = latest start - own start, on the recorded times."""
    anns = [gloo_annotations(p) for p in gloo_job]
    assert {raw(p).get("host_name") for p in gloo_job} == {raw(gloo_job[0])["host_name"]}
    for p in gloo_doc["per_rank"]:
        assert p["offset_us"] == 0
    for j, c in enumerate(gloo_doc["collectives"]):
        starts = [ns(a[j]["ts"]) for a in anns]
        assert c["name"] == anns[0][j]["name"]
        for pr in c["per_rank"]:
            want = max(starts) - starts[pr["rank"]]
            assert abs(pr["wait_us"] * 1000 - want) <= 1, (j, pr)
        assert c["last_rank"] == max(range(GLOO_WORLD), key=lambda r: starts[r])
        durs = [ns(a[j]["dur"]) for a in anns]
        assert abs(c["latency_us"] * 1000 - min(durs)) <= 1
    # one host, one clock: nothing estimated between its ranks (issue 32)
    assert all(p["offset_rank_us"] is None and p["offset_from"] == 0 for p in gloo_doc["per_rank"])


def test_gloo_rank_clocks_when_asked(gloo_job, capsys):
    """``--rank-clocks``: every rank its own clock, its offset the median end difference vs rank 0."""
    anns = [gloo_annotations(p) for p in gloo_job]
    capsys.readouterr()
    assert main(["ranks", str(gloo_job[0].parent), "--json", "--workers", "1", "--rank-clocks"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for p in doc["per_rank"]:
        d = [ns(a["ts"]) + ns(a["dur"]) - ns(b["ts"]) - ns(b["dur"]) for a, b in zip(anns[p["rank"]], anns[0])]
        want = 0 if p["rank"] == 0 else median_low(d)
        assert abs(p["offset_us"] * 1000 - want) <= 1
        assert p["clock"] == f"rank {p['rank']}"


def test_gloo_message_size_and_bus_bandwidth(gloo_job, gloo_doc):
    anns = gloo_annotations(gloo_job[0])
    size = {"float": 4, "int": 4, "long": 8}
    for j, c in enumerate(gloo_doc["collectives"]):
        a = anns[j]["args"]
        if "Input Dims" not in a:
            assert c["msg_bytes"] is None
            continue
        nel = 1
        for d in a["Input Dims"][0]:
            nel *= d
        want = nel * size[a["Input type"][0]] * (GLOO_WORLD if anns[j]["name"] == "gloo:all_gather" else 1)
        assert c["msg_bytes"] == want
        factor = {"gloo:all_reduce": 2 * (GLOO_WORLD - 1) / GLOO_WORLD,
                  "gloo:all_gather": (GLOO_WORLD - 1) / GLOO_WORLD, "gloo:broadcast": 1.0}[anns[j]["name"]]
        assert c["busbw_gbps"] == pytest.approx(want / (c["latency_us"] * 1000) * factor)


def test_gloo_per_step_figures(gloo_job, gloo_doc):
    """Step time, communication (union of the backend's intervals launched in the step) and the
    waits of the step's collectives, from the raw JSON."""
    anns = [gloo_annotations(p) for p in gloo_job]
    waits = {}
    for j, c in enumerate(gloo_doc["collectives"]):
        starts = [ns(a[j]["ts"]) for a in anns]
        for r in range(GLOO_WORLD):
            waits[(r, j)] = max(starts) - starts[r]
    rows = {(s["rank"], s["name"]): s for s in gloo_doc["steps"]}
    for r, path in enumerate(gloo_job):
        steps = [e for e in raw(path)["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        assert steps
        for st in steps:
            s0, s1 = ns(st["ts"]), ns(st["ts"]) + ns(st["dur"])
            row = rows[(r, st["name"])]
            assert abs(row["step_us"] * 1000 - (s1 - s0)) <= 1
            mine = [(j, ns(a["ts"]), ns(a["ts"]) + ns(a["dur"])) for j, a in enumerate(anns[r]) if s0 <= ns(a["ts"]) < s1]
            union, cur_s, cur_e = 0, None, None
            for _, a, b in sorted(mine, key=lambda x: x[1]):
                if cur_e is None or a > cur_e:
                    union += (cur_e - cur_s) if cur_e is not None else 0
                    cur_s, cur_e = a, b
                else:
                    cur_e = max(cur_e, b)
            union += (cur_e - cur_s) if cur_e is not None else 0
            assert abs(row["comm_us"] * 1000 - union) <= 1
            assert row["collectives"] == len(mine)
            assert abs(row["wait_us"] * 1000 - sum(waits[(r, j)] for j, _, _ in mine)) <= len(mine)


def test_generated_job_offsets_waits_and_straggler(gen_job, capsys):
    doc = ranks_json(capsys, gen_job["files"][0].parent)
    truth = gen_job["offsets_ns"]
    for p in doc["per_rank"]:
        assert abs(p["offset_us"] * 1000 - (truth[p["rank"]] - truth[0])) <= 5_000
        assert p["clock"] == f"node{p['rank'] // 2}"
    assert doc["straggler"]["rank"] == gen_job["straggler"]
    arr = gen_job["arrivals_ns"]
    assert len(doc["collectives"]) == len(arr)
    for j, c in enumerate(doc["collectives"]):
        for pr in c["per_rank"]:
            want = max(arr[j]) - arr[j][pr["rank"]]
            assert abs(pr["wait_us"] * 1000 - want) <= 5, (j, pr)  # µs written with 3 decimals
        assert c["last_rank"] == gen_job["straggler"]


def test_job_diagnostics_name_what_was_left_out(gen_job, tmp_path, capsys):
    """Missing, duplicated, foreign and unplaceable files are named, never guessed silently."""
    from tracetui.workloads.replicate import replicate
    files = gen_job["files"]
    d = tmp_path / "job"
    d.mkdir()
    for f in files:
        if f.name != "gen_rank-3.pt.trace.json":
            copy(f, d / f.name)
    copy(files[2], d / "copy_of_two.pt.trace.json")           # a duplicate of rank 2
    other = replicate(files[0], tmp_path / "other", 2, seed=1)  # another job (world size 2)
    copy(other["files"][1], d / "other_job_rank-1.pt.trace.json")
    doc = raw(files[0])
    del doc["distributedInfo"]
    (d / "mystery.pt.trace.json").write_text(json.dumps(doc))
    out = ranks_json(capsys, d)
    diags = "\n".join(out["diagnostics"])
    assert "1 of 6 ranks missing: 3" in diags
    import os
    older = d / "gen_rank-2.pt.trace.json"
    os.utime(older, (older.stat().st_atime, (d / "copy_of_two.pt.trace.json").stat().st_mtime - 60))
    out = ranks_json(capsys, d)  # of two files of rank 2, the newer is kept, the older named
    diags = "\n".join(out["diagnostics"])
    assert "gen_rank-2.pt.trace.json: rank 2 again, older than copy_of_two.pt.trace.json" in diags
    assert next(p["file"] for p in out["per_rank"] if p["rank"] == 2).endswith("copy_of_two.pt.trace.json")
    assert "other_job_rank-1.pt.trace.json: from another job" in diags
    other_info, job_info = raw(other["files"][1])["distributedInfo"], raw(files[0])["distributedInfo"]
    line = next(ln for ln in out["diagnostics"] if ln.startswith("other_job_rank-1"))
    assert f"(world size {other_info['world_size']}, backend {other_info['backend']}" in line
    assert f"the job's: world size {job_info['world_size']}, backend {job_info['backend']}" in line
    assert "None" not in line
    assert "mystery.pt.trace.json: no distributedInfo and no rank in its name" in diags
    assert [p["rank"] for p in out["per_rank"]] == [0, 1, 2, 4, 5]


def test_metadata_disagreement_is_a_diagnostic(gen_job, tmp_path, capsys):
    d = tmp_path / "job"
    d.mkdir()
    for f in gen_job["files"][:2]:
        copy(f, d / f.name)
    doc = raw(d / gen_job["files"][1].name)
    first = min((e for e in doc["traceEvents"] if e.get("name", "").startswith("gloo:") and "Input Dims" in e.get("args", {})),
                key=lambda e: e["ts"])
    first["args"]["Input Dims"] = [[123457]]
    (d / gen_job["files"][1].name).write_text(json.dumps(doc))
    out = ranks_json(capsys, d)
    assert any("disagree on size" in x for x in out["diagnostics"])


def test_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "rank-0.pt.trace.json"
    bad.write_text("not json")
    assert main(["ranks", str(bad), str(tmp_path / "missing_rank-1.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tracetui: error:")


def test_hta_sampled_ranks(peer_dir, capsys):
    """Two ranks of a 128-rank NCCL job: kernels matched per communicator stream, 126 missing ranks
    named, NCCL's algorithm read from the kernel name, bus bandwidth with n = 128."""
    files = [peer_dir / f"trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]
    out = ranks_json(capsys, *files)
    assert out["world_size"] == 128 and out["ranks"] == 2
    assert any("126 of 128 ranks missing: 2-127" == x for x in out["diagnostics"])
    import gzip
    ev = json.loads(gzip.decompress(files[0].read_bytes()))["traceEvents"]
    nccl = [e for e in ev if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    assert sum(p["rank"] == 0 for c in out["collectives"] for p in c["per_rank"]) == len(nccl)
    ar = [c for c in out["collectives"] if c["kind"] == "all_reduce" and c["msg_bytes"]]
    assert ar and all(c["algorithm"] == "RING_SIMPLE" for c in ar)
    for c in ar:
        assert c["busbw_gbps"] == pytest.approx(c["msg_bytes"] / (c["latency_us"] * 1000) * 2 * 127 / 128)


def test_text_report_names_the_straggler(gen_job, capsys):
    capsys.readouterr()
    assert main(["ranks", str(gen_job["files"][0].parent), "--workers", "1", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"likely straggler: rank {gen_job['straggler']} -" in out
    assert "collectives by total wait (top 3 of 12)" in out
    assert out.count("node") >= len(gen_job["files"])  # every rank's clock (host) is listed


@pytest.mark.parametrize("key", ["Seq", "Comms Id"])
def test_collectives_matched_on_seq_or_comms_id_not_order(gen_job, tmp_path, capsys, key):
    """With Process Group Name + Seq (or Comms Id) on every record, a rank that ran two
    collectives in the other order is still matched collective by collective."""
    d = tmp_path / "job"
    d.mkdir()
    idents = {}
    for r, f in enumerate(gen_job["files"][:3]):
        doc = raw(f)
        anns = sorted((e for e in doc["traceEvents"] if e.get("name", "").startswith("gloo:")), key=lambda e: e["ts"])
        for k, e in enumerate(anns):
            e["args"]["Process Group Name"] = "0"
            e["args"][key] = k if key == "Seq" else f"id-{k}"
        if r == 2:  # rank 2 ran collectives 3 and 4 the other way round
            a, b = anns[3], anns[4]
            a["ts"], b["ts"] = b["ts"], a["ts"]
            a["dur"], b["dur"] = b["dur"], a["dur"]
        idents[r] = {(e["args"][key]): ns(e["ts"]) for e in anns}
        (d / f.name).write_text(json.dumps(doc))
    out = ranks_json(capsys, d)
    assert out["matched_by"] == {"0": "seq" if key == "Seq" else "comms_id"}
    assert len(out["collectives"]) == len(idents[0])
    offs = {p["rank"]: round(p["offset_us"] * 1000) for p in out["per_rank"]}
    for c in out["collectives"]:
        k = c["index"]
        starts = {r: idents[r][k] - offs[r] for r in idents}
        for pr in c["per_rank"]:
            assert abs(pr["wait_us"] * 1000 - (max(starts.values()) - starts[pr["rank"]])) <= 1


def _union(iv):
    total, cur = 0, None
    for a, b in sorted(iv):
        if cur is None or a > cur[1]:
            total += (cur[1] - cur[0]) if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + ((cur[1] - cur[0]) if cur else 0)


def _clip(iv, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in iv if min(b, hi) > max(a, lo)]


def test_gpu_per_step_figures_on_nccl_ranks(peer_dir, capsys):
    """HTA's sampled NCCL ranks: per step, communication, its exposed part, compute and memcpy over
    the step's window, from the raw JSON (kernels launched inside the step on any thread, HTA's rule)."""
    import gzip
    files = [peer_dir / f"trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]
    out = ranks_json(capsys, *files)
    rows = {(s["rank"], s["name"]): s for s in out["steps"]}
    for r, f in enumerate(files):
        ev = [e for e in json.loads(gzip.decompress(f.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
        launch = {e["args"]["correlation"]: ns(e["ts"]) for e in ev
                  if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
        gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
        assert steps
        for st in steps:
            s0, s1 = ns(st["ts"]), ns(st["ts"]) + ns(st["dur"])
            mine = [e for e in gpu if s0 <= launch.get(e["args"].get("correlation"), ns(e["ts"])) < s1]
            iv = lambda es: [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in es]  # noqa: E731
            w1 = max([s1] + [b for _, b in iv(mine)])
            comm = _clip(iv([e for e in mine if e["cat"] == "kernel" and "nccl" in e["name"].lower()]), s0, w1)
            comp = _clip(iv([e for e in mine if e["cat"] == "kernel" and "nccl" not in e["name"].lower()]), s0, w1)
            mcpy = _clip(iv([e for e in mine if e["cat"] == "gpu_memcpy"]), s0, w1)
            both = _union(comm) + _union(comp) - _union(comm + comp)
            row = rows[(r, st["name"])]
            assert abs(row["window_us"] * 1000 - (w1 - s0)) <= 1
            assert abs(row["comm_us"] * 1000 - _union(comm)) <= 1
            assert abs(row["compute_us"] * 1000 - _union(comp)) <= 1
            assert abs(row["comm_exposed_us"] * 1000 - (_union(comm) - both)) <= 1  # epoch-µs ts, read exactly
            assert abs(row["comm_overlapped_us"] * 1000 - both) <= 1
            assert abs(row["memcpy_us"] * 1000 - _union(mcpy)) <= 1
            assert row["overlap_ratio"] == pytest.approx(both / _union(comm))


def test_text_report_of_a_large_job_lists_the_straggler_and_the_most_waiting(gen_job, capsys, monkeypatch):
    from tracetui.report import ranks as ranks_report
    monkeypatch.setattr(ranks_report, "MAX_RANK_ROWS", 3)
    capsys.readouterr()
    assert main(["ranks", str(gen_job["files"][0].parent), "--workers", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["ranks", str(gen_job["files"][0].parent), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split()[0] for ln in out.splitlines() if ln[:5].strip().isdigit() and "node" in ln]
    most = sorted(doc["per_rank"], key=lambda p: -p["wait_total_us"])
    want = {gen_job["straggler"]} | {p["rank"] for p in most[:2]}
    assert sorted(map(int, rows)) == sorted(want)
    assert "of 6; --json lists every rank" in out


def test_rank_files_are_placed_from_their_heads(gloo_job, tmp_path, monkeypatch):
    """A rank is placed from the first MiB of its JSON (gunzipped only that far), with the rank,
    world and backend the whole file gives; host and base time come from the rank's own load; a
    file whose distributedInfo follows its events is decoded whole and placed the same."""
    import gzip
    from tracetui.jobs import placement as P, ranks as R
    monkeypatch.setattr(P, "HEAD_BYTES", 64 << 10)
    doc = raw(gloo_job[2])
    doc["traceEvents"] = doc["traceEvents"] * 4
    plain = tmp_path / "big_rank-2.pt.trace.json"
    plain.write_text(json.dumps(doc))
    packed = tmp_path / "big_rank-2.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert plain.stat().st_size > 4 * P.HEAD_BYTES
    whole = R.header_of
    monkeypatch.setattr(P, "header_of", lambda data: pytest.fail("decoded whole"))
    di = doc["distributedInfo"]
    for f in (plain, packed):
        rf = R.read_rank_file(f)
        assert (rf.rank, rf.world, rf.backend, rf.rank_from) == (2, di["world_size"], di["backend"], "distributedInfo")
    monkeypatch.setattr(P, "header_of", whole)
    tables = R.load_rank(R.read_rank_file(packed), di["world_size"])
    assert tables["info"]["host"] == [doc["host_name"]] and tables["info"]["base_ns"] == [doc["baseTimeNanoseconds"]]
    late = {k: v for k, v in doc.items() if k != "distributedInfo"}
    late["distributedInfo"] = di  # after traceEvents: the head cannot tell, so the file is decoded whole
    plain.write_text(json.dumps(late))
    seen = []
    monkeypatch.setattr(P, "header_of", lambda data: seen.append(1) or whole(data))
    rf = R.read_rank_file(plain)
    assert seen and (rf.rank, rf.world, rf.host, rf.base_ns) == (2, di["world_size"], doc["host_name"],
                                                                 doc["baseTimeNanoseconds"])

@pytest.mark.parametrize("base", [1_733_000_000_123_456_789, "1733000000123456789", 1.7330000001234568e18, True, None])
@pytest.mark.parametrize("host", ["node-3", 7, ["node-3"]])
def test_odd_header_fields_never_unplace_a_rank(gloo_job, tmp_path, base, host):
    """Where distributedInfo follows the events (the file is decoded whole to place it), a
    host_name or baseTimeNanoseconds of an odd type is left out, not the rank; and the base time
    is read as the loader reads it, so both placings give one clock (a float's digits, not its
    binary value)."""
    from decimal import Decimal
    from tracetui.jobs import ranks as R
    doc = raw(gloo_job[1])
    di = doc.pop("distributedInfo")
    doc.update(host_name=host, baseTimeNanoseconds=base, distributedInfo=di)  # after traceEvents
    f = tmp_path / "odd.pt.trace.json"
    f.write_text(json.dumps(doc))
    rf = R.read_rank_file(f)
    assert (rf.rank, rf.world, rf.rank_from) == (di["rank"], di["world_size"], "distributedInfo")
    assert rf.host == (host if isinstance(host, str) else None)
    text = base if isinstance(base, str) else json.dumps(base)  # the number's digits as the file holds them
    want = int(Decimal(text)) if isinstance(base, (int, float, str)) and not isinstance(base, bool) else 0
    assert rf.base_ns == want
    head_first = {"distributedInfo": di, **{k: v for k, v in doc.items() if k != "distributedInfo"}}
    g = tmp_path / "head.pt.trace.json"
    g.write_text(json.dumps(head_first))
    tables = R.load_rank(R.read_rank_file(g), di["world_size"])
    assert tables["info"]["base_ns"] == [want]


def test_workers_must_be_one_or_more(gloo_job, capsys):
    for cmd in (["ranks", str(gloo_job[0])], ["index", str(gloo_job[0]), "-o", "/tmp/never-written"]):
        with pytest.raises(SystemExit) as e:
            main([*cmd, "--workers", "0"])
        assert e.value.code == 2 and "1 or more" in capsys.readouterr().err
