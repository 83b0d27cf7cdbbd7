"""`tracetui memory` and the memory part of `diff`, against figures read here from the raw JSON."""
from __future__ import annotations

import gzip
import json

from tracetui.cli.main import main

from tests.conftest import DATA, TRACES

MEM = DATA / "cpu_transformer_eager_memory.json.gz"


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _raw_memory(path):
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]


def test_memory_json_schema_and_figures(capsys):
    d = run_json(capsys, "memory", str(MEM), "--json", "--top", "0")
    raw = _raw_memory(MEM)
    assert d["instants"] == len(raw)
    (cpu,) = d["devices"]
    assert cpu["device"] == "CPU"
    assert cpu["peak_bytes"] == max(e["args"]["Total Allocated"] for e in raw)
    assert cpu["allocations"] == sum(e["args"]["Bytes"] > 0 for e in raw)
    assert cpu["frees"] == sum(e["args"]["Bytes"] < 0 for e in raw)
    for k in ("peak_bytes", "peak_reserved_bytes", "never_freed_bytes", "held_before_bytes"):
        assert isinstance(cpu[k], int)
    assert isinstance(cpu["peak_us"], float)
    # the holders at the peak account for the peak, whichever way they are grouped
    for by in ("op", "module", "step"):
        assert sum(r["bytes"] for r in cpu["holders"][by]) + cpu["held_before_bytes"] == cpu["peak_bytes"]
    assert [s["name"] for s in d["steps"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert all(isinstance(s["peak_bytes"], int) for s in d["steps"])
    assert max(s["peak_bytes"] for s in d["steps"]) <= cpu["peak_bytes"]
    row = next(o for o in d["ops"] if o["name"] == "aten::empty")
    assert set(row) == {"device", "name", "calls", "allocation_count", "allocation_bytes", "self_allocation_count",
                        "self_allocation_bytes", "size_increase_bytes", "self_size_increase_bytes"}


def test_memory_lists_the_planted_leak(capsys, cpu_memory_trace):
    d = run_json(capsys, "memory", str(cpu_memory_trace), "--json", "--top", "0")
    (cpu,) = d["devices"]
    leaks = [b for b in cpu["never_freed_blocks"] if b["module"] == "Leaky_0"]
    assert len(leaks) == 3 and all(b["bytes"] == 4000 and b["op"] == "aten::empty" for b in leaks)
    assert main(["memory", str(cpu_memory_trace)]) == 0
    out = capsys.readouterr().out
    assert "never freed (largest)" in out and "Leaky_0" in out


def test_memory_text_and_no_memory(capsys):
    assert main(["memory", str(MEM)]) == 0
    out = capsys.readouterr().out
    assert "CPU: peak" in out and "per op" in out and "Decoder_0" in out
    assert main(["memory", str(TRACES / "linear_eager.json.gz")]) == 0
    assert "no [memory] events" in capsys.readouterr().out


def test_memory_csv_without_memory_events_still_has_its_header(capsys):
    """`memory --format csv` on a trace with no [memory] events printed an empty line; the
    header is the same as on a trace that has them, so a script reading both sees one shape."""
    assert main(["memory", str(MEM), "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert main(["memory", str(TRACES / "linear_eager.json.gz"), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == [header]
    assert header.split(",")[:3] == ["device", "name", "calls"]


def test_memory_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert main(["memory", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracetui: error: ") and err.count("\n") == 1


def test_diff_reports_memory_only_when_both_have_it(capsys, cpu_memory_trace):
    d = run_json(capsys, "diff", str(MEM), str(cpu_memory_trace), "--json")
    m = d["memory"]
    raw_a, raw_b = _raw_memory(MEM), _raw_memory(cpu_memory_trace)
    (p,) = m["peaks"]
    assert p["a_bytes"] == max(e["args"]["Total Allocated"] for e in raw_a)
    assert p["b_bytes"] == max(e["args"]["Total Allocated"] for e in raw_b)
    assert p["change_bytes"] == p["b_bytes"] - p["a_bytes"]
    d = run_json(capsys, "diff", str(TRACES / "mlp_eager.json.gz"), str(MEM), "--json")
    assert "memory" not in d


PAIR = [DATA / "diff" / f"cpu_transformer_{k}_memory_v1021.json.gz" for k in ("eager", "compile")]


def test_memory_of_two_traces_is_the_memory_diff(capsys):
    """`tracetui memory A B`: per step and device, the peak in A and B (the raw JSON's highest
    Total Allocated in each ProfilerStep), what held it, in text, JSON, csv and md."""
    d = run_json(capsys, "memory", str(PAIR[0]), str(PAIR[1]), "--json", "--top", "0")
    assert d["steps"] and d["devices"] == ["CPU"]
    for side, path in (("a", PAIR[0]), ("b", PAIR[1])):
        raw = json.load(gzip.open(path, "rt"))["traceEvents"]
        steps = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")}
        for s in d["steps"]:
            lo, hi = steps[s[f"{side}_step"]]
            mem = sorted(_raw_memory(path), key=lambda e: e["ts"])  # stable: file order at equal ts
            inside = [e["args"]["Total Allocated"] for e in mem if lo <= e["ts"] < hi]
            carried = [e["args"]["Total Allocated"] for e in mem if e["ts"] < lo][-1:]  # the level at the step's start
            assert s[f"{side}_peak_bytes"] == max(inside + carried)
            assert sum(r[f"{side}_bytes"] for r in s["holders"]) == s[f"{side}_peak_bytes"]
    assert main(["memory", str(PAIR[0]), str(PAIR[1])]) == 0
    out = capsys.readouterr().out
    assert "memory: peak per device and step, A → B" in out and "no longer allocated in B" in out
    assert main(["memory", str(PAIR[0]), str(PAIR[1]), "--format", "csv"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("device,a_step,b_step,a_peak_bytes,b_peak_bytes,change_bytes")
    assert main(["memory", str(PAIR[0]), str(PAIR[1]), "--format", "md", "--table", "holders"]) == 0
    md = capsys.readouterr().out
    assert "## holders" in md and "| device | a_step | b_step | module | op | a_bytes | b_bytes |" in md


def test_memory_diff_without_memory_events_says_so(capsys):
    assert main(["memory", str(PAIR[0]), str(TRACES / "mlp_eager.json.gz")]) == 0
    assert "no [memory] events in" in capsys.readouterr().out
    d = run_json(capsys, "memory", str(PAIR[0]), str(TRACES / "mlp_eager.json.gz"), "--json")
    assert d["steps"] == [] and d["no_memory_events"] == [str(TRACES / "mlp_eager.json.gz")]


def test_memory_diff_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["memory", str(PAIR[0]), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracetui: error: ") and err.count("\n") == 1


def test_diff_shows_the_memory_section_per_step(capsys):
    """`diff` of two traces with [memory] events carries the same per-step memory diff."""
    d = run_json(capsys, "diff", str(PAIR[0]), str(PAIR[1]), "--json")
    m = run_json(capsys, "memory", str(PAIR[0]), str(PAIR[1]), "--json")
    assert d["memory"]["steps"] == m["steps"] and d["memory"]["peaks"] == m["peaks"]
    assert main(["diff", str(PAIR[0]), str(PAIR[1]), "--text"]) == 0
    assert "memory: peak per device and step" in capsys.readouterr().out
