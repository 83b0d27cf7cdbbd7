"""CLI output a new user misread on third-party traces (the QA pass), each with its test.
Expected values come from the raw JSON, never through tracetui's model."""
from __future__ import annotations

import gzip
import json

from tracetui.cli.main import main


def _raw(path):
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def test_summary_per_step_rows_show_whole_step_names(peer_dir, capsys):
    """`ProfilerStep#1009` was cut to `ProfilerStep#100` in the per-step table (a 16-column
    field), a different step's name, while the verdict line under it said #1009."""
    path = peer_dir / "distributed_info_unavailable_distributed_info_not_found.json.gz"
    steps = [e["name"] for e in _raw(path)["traceEvents"]
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    assert steps and max(map(len, steps)) > 16
    assert main(["summary", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("step ") and "window" in ln)
    rows = lines[head + 1: head + 1 + len(steps)]
    assert [r.split()[0] for r in rows] == steps
    # the header's "window" ends where the rows' window figure ends
    assert lines[head].index("window") + len("window") == rows[0].index(rows[0].split()[1]) + len(rows[0].split()[1])


def test_summary_table_headers_sit_over_their_columns(peer_dir, capsys):
    """`count   total µs    mean µs` sat 40 columns left of the figures in the kernel table."""
    path = peer_dir / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    ev = [e for e in _raw(path)["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    memcpy = [e for e in ev if e["name"].startswith("Memcpy HtoD")]
    assert main(["summary", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    title = next(ln for ln in lines if "top kernels by device time" in ln)
    head = lines[lines.index(title) + 1]  # the header line under the title (names last)
    row = next(ln for ln in lines[lines.index(head):] if ln.split()[3:4] and ln.split()[3].startswith("Memcpy"))
    count, total = row.split()[0], row.split()[1]
    assert int(count) == len(memcpy) and abs(float(total) - sum(e["dur"] for e in memcpy)) < 0.1
    assert head.index("count") + len("count") == row.index(count) + len(count)  # the row's first figure
    assert head.index("total µs") + len("total µs") == row.index(" " + total) + 1 + len(total)
    ops = lines[lines.index(next(ln for ln in lines if ln.strip().startswith("top ops"))) + 1]
    prof = next(ln for ln in lines[lines.index(ops):] if ln.strip().endswith("ProfilerStep*"))
    assert ops.index("count") + len("count") == prof.index(prof.split()[0]) + len(prof.split()[0])


def test_diff_files_a_same_name_kernel_that_got_slower_as_timing_not_implementation(peer_dir, capsys):
    """HTA's control/test pair: ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t, in both traces,
    paired with itself and slower in B, was listed under "GEMM/attention implementation" (the
    same work run by *another* kernel). A kernel paired with one of its own name is a timing
    change; "implementation" keeps only pairs whose names differ (or that absorbed others)."""
    a, b = peer_dir / "trace_diff_control_control.json.gz", peer_dir / "trace_diff_test_test.json.gz"
    names = [{e["name"] for e in _raw(p)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"} for p in (a, b)]
    nccl = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"  # written with "(ncclWorkElem)", shown without
    assert nccl + "(ncclWorkElem)" in names[0] and nccl + "(ncclWorkElem)" in names[1]
    assert main(["diff", str(a), str(b), "--json", "--top", "0"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = d["kernels"]
    for c in d["changes"]:
        if c["kind"] != "implementation":
            continue
        for i in c["rows"]:
            r = rows[i]
            assert r["replaces"] or (r["a_name"] or r["name"]) != r["name"], (c["title"], r["name"])
    same = [c for c in d["changes"] if c["title"] == nccl and c["kind"] in ("implementation", "timing")]
    assert same and all(c["kind"] == "timing" for c in same)


def test_diff_calls_a_gpu_trace_without_device_properties_gpu_not_cpu(peer_dir, capsys):
    """HTA's call_stack_backward_thread.json ran a cutlass GEMM on the GPU but has no
    deviceProperties: the diff's header called it "CPU" and its kernel time "compute (CPU ops)"."""
    a = peer_dir / "call_stack_backward_thread.json"
    b = peer_dir / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    ra, rb = _raw(a), _raw(b)
    gpu_a = [e for e in ra["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert gpu_a and "deviceProperties" not in ra
    assert not any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in rb["traceEvents"])
    assert main(["diff", str(a), str(b), "--text"]) == 0
    out = capsys.readouterr().out.splitlines()
    # the verdict and comparability lines come first; the A/B header follows them
    h = next(i for i, line in enumerate(out) if line.startswith("A: "))
    assert out[h].endswith("(GPU (name not recorded), 1 step)") and out[h + 1].endswith("(CPU, 1 step)")
    assert out[h + 2].startswith(f"per step: device {sum(e['dur'] for e in gpu_a):,.1f} → 0.0 µs")
    assert main(["diff", str(a), str(b), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["a"]["gpu"], d["b"]["gpu"]) == (True, False)


def test_ranks_on_stdin_says_why_not_no_such_file(peer_dir, capsys, monkeypatch):
    """`cat rank.json | tracetui ranks -` said "-: no such file", after the README's "`-` in
    place of a trace reads it from stdin"; `ranks` reads files, and now says so."""
    import io
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((peer_dir / "call_stack_backward_thread.json").read_bytes())))
    assert main(["ranks", "-"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("tracetui: error: -: ") and "stdin" in err


def test_ranks_of_a_trace_without_collectives_says_so(peer_dir, capsys):
    """The job line read "collectives matched by ; clocks aligned ..." for a rank with none."""
    path = peer_dir / "call_stack_backward_thread.json"
    raw = _raw(path)
    assert not any("nccl" in str(e.get("name", "")).lower() or "gloo" in str(e.get("name", "")).lower()
                   for e in raw["traceEvents"])
    assert main(["ranks", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "matched by ;" not in first and "no collectives" in first


def test_negative_top_and_depth_are_refused(peer_dir, capsys):
    """`summary --top -5` listed the first op of six (a Python slice [:-5]) without a word."""
    import pytest
    path = peer_dir / "call_stack_backward_thread.json"
    for argv in (["summary", "--top", "-5"], ["memory", "--top", "-1"], ["tree", "--depth", "-1"],
                 ["ranks", "--top", "-2"], ["summary", "--top", "x"]):
        with pytest.raises(SystemExit) as e:
            main([*argv, str(path)])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("negative" in err or "whole number" in err)


def test_steps_regex_that_matches_nothing_says_so(peer_dir, capsys):
    """`--steps nomatch` printed "0 step(s)" and the rule, with no word that the regex found
    nothing (the per-step table just vanished)."""
    import re
    path = peer_dir / "call_stack_backward_thread.json"
    names = {e.get("name") for e in _raw(path)["traceEvents"] if e.get("cat") == "user_annotation"}
    assert names and not any(re.search("nomatch", n) for n in names)
    assert main(["summary", "--steps", "nomatch", str(path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("steps:"))
    assert "none matched" in line
    hit = sorted(n for n in names if "backward" in n)[0]
    assert main(["summary", "--steps", "backward", "--json", str(path)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["steps"] == 1 and "none matched" not in d["step_marker"]["description"]
    assert [s["name"] for s in d["per_step"]] == [hit]


def test_a_torch_version_that_is_not_one_is_refused(peer_dir, capsys):
    """`--torch-version abc` was taken and silently ignored (the rule fell back to the recorded
    version); a real version, with a local suffix, still sets the rule."""
    import pytest
    from tracetui.mcp import tools as mcp_tools
    path = peer_dir / "call_stack_backward_thread.json"
    with pytest.raises(SystemExit) as e:
        main(["summary", "--torch-version", "abc", str(path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "'abc' is not a torch version" in err
    from tests.conftest import TRACES
    with_frames = TRACES / "transformer_eager.json.gz"  # recorded with Python frames, by torch 2.11
    assert main(["summary", "--torch-version", "2.13.0+cpu", str(with_frames)]) == 0
    assert "--torch-version 2.13.0+cpu" in capsys.readouterr().out
    with pytest.raises(mcp_tools.ToolInputError, match="not a torch version"):
        mcp_tools.open_trace(str(path), torch_version="abc")
