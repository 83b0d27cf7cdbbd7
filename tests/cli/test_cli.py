"""The CLI on bundled and freshly generated traces: summary/tree JSON schemas, gen on the CPU."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from tracetui.cli.main import main
from tracetui.model import load_trace

from tests.conftest import TRACES


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_summary_json_schema(capsys):
    d = run_json(capsys, "summary", str(TRACES / "mlp_eager.json.gz"), "--json")
    assert d["device"] == "NVIDIA H200" and d["steps"] == 3
    for k in d["kernels"]:
        assert {"name", "count", "total_us"} <= set(k)
    for o in d["ops"]:
        assert {"name", "count", "cpu_total_us", "cpu_self_us", "device_total_us"} <= set(o)
    assert d["kernel_classes"]["gemm"]["count"] == 9
    first = d["first_step_kernels"]
    gemms = [k for k in first if k["class"] == "gemm"]
    assert len(gemms) == 3 and all(k["ops"][0] == "aten::linear" for k in gemms)
    assert sorted(k["ops"][0] for k in first if k["class"] == "pointwise") == ["aten::gelu", "aten::mul"]


def test_summary_text_lists_kernels_per_step(capsys):
    assert main(["summary", str(TRACES / "mlp_eager.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "kernels in ProfilerStep#" in out and out.count("<- aten::linear") == 3
    assert "<- aten::gelu" in out and "<- aten::mul" in out


def test_tree_json_and_filter(capsys):
    d = run_json(capsys, "tree", str(TRACES / "linear_eager.json.gz"), "--json", "--filter", "nvjet")
    assert {"name", "kind", "cpu_us", "device_us", "children"} <= set(d)
    node, kinds = d, []
    while node["children"]:
        node = node["children"][0]
        kinds.append(node["kind"])
    assert kinds[-1] == "kernel" and "op" in kinds and "runtime" in kinds and "step" in kinds
    assert main(["tree", str(TRACES / "linear_eager.json.gz"), "--depth", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(l) - len(l.lstrip()) for l in lines) <= 4


def test_tree_filter_keeps_what_a_match_launched(capsys):
    """--filter addmm: the path down to each aten::addmm and what it launched (its GEMM), not its siblings."""
    assert main(["tree", str(TRACES / "linear_eager.json.gz"), "--filter", "addmm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [l.strip().split(" [")[0] for l in lines]
    assert names.count("aten::addmm") == 3 and "aten::t" not in names
    for i, l in enumerate(lines):
        if l.strip().startswith("aten::addmm"):
            indent = len(l) - len(l.lstrip())
            below = []
            for m in lines[i + 1:]:
                if len(m) - len(m.lstrip()) <= indent:
                    break
                below.append(m)
            assert any("[kernel]" in m for m in below) and any("[runtime]" in m for m in below)


def test_control_characters_never_reach_the_terminal(tmp_path, capsys):
    evil = "aten::\x1b[31mred\x1b]0;pwned\x07"
    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": evil, "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}
    p = tmp_path / "evil.json"
    p.write_text(json.dumps(trace))
    assert main(["tree", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b[31mred" in out
    # summary and diff print devices, provenance and op chains from the file too
    gpu = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0},
           {"ph": "X", "cat": "cpu_op", "name": evil, "pid": 1, "tid": 1, "ts": 1.0, "dur": 20.0, "args": {"External id": 1}},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm\x1b[2J", "pid": 1, "tid": 1, "ts": 2.0, "dur": 10.0,
            "args": {"External id": 2}},
           {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3.0, "dur": 2.0,
            "args": {"correlation": 5, "External id": 2}},
           {"ph": "X", "cat": "kernel", "name": "k\x1b[5m", "pid": 0, "tid": 7, "ts": 6.0, "dur": 4.0,
            "args": {"correlation": 5, "External id": 2, "stream": 7}}]
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"traceEvents": gpu, "deviceProperties": [{"name": "GPU\x1b[2J"}],
                             "tracetui": {"workload": "w\x1b[1m", "impl": "eager"}}))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"traceEvents": [e for e in gpu if e["name"] != evil]}))
    for argv in (["summary", str(a)], ["diff", str(a), str(b), "--text"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\\x1b[" in out, argv


def test_gen_compile_on_cpu_loads_with_modules(tmp_path):
    """Issue 3's check: gen mlp --impl compile on the CPU, then the model shows modules and ops."""
    pytest.importorskip("torch")
    out = tmp_path / "x.json.gz"
    r = subprocess.run([sys.executable, "-m", "tracetui", "gen", "mlp", "--impl", "compile", "--device", "cpu",
                        "--batch", "2", "--seq", "8", "--dim", "32", "--hidden", "64", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert str(out) in r.stdout and "warm-up" in r.stderr
    t = load_trace(out)
    assert t.provenance["impl"] == "compile" and t.provenance["workload"] == "mlp"
    mods = [i for i in range(len(t.tree)) if t.kind(i) == "module"]
    assert mods
    names = {t.name(i) for i in mods}
    assert any(n.startswith("nn.Module: ") for n in names)
    # ATen ops nest under the module scopes
    op_under_module = [i for i in range(len(t.tree)) if t.kind(i) == "op" and t.name(i).startswith("aten::")
                       and t.scope_module(i) is not None]
    assert op_under_module


def test_gen_eager_cpu_has_geglu_and_linear_scopes(cpu_traces):
    t = load_trace(cpu_traces["mlp_eager_stack"])
    mods = {t.name(i) for i in range(len(t.tree)) if t.kind(i) == "module"}
    assert "nn.Module: GeGLU_0" in mods and {"nn.Module: Linear_0", "nn.Module: Linear_1", "nn.Module: Linear_2"} <= mods
    gelu = [i for i in range(len(t.tree)) if t.name(i) == "aten::gelu"]
    assert gelu and t.name(t.scope_module(gelu[0])) == "nn.Module: GeGLU_0"


def test_gen_rejects_unknown_combination(capsys):
    assert main(["gen", "linear", "--impl", "triton", "--device", "cpu"]) == 2
    assert "has no impl" in capsys.readouterr().err


def test_folder_opens_newest_and_says_so(tmp_path, capsys):
    import os
    import shutil
    for i, name in enumerate(("w.1.pt.trace.json.gz", "w.2.pt.trace.json.gz")):
        dst = tmp_path / name
        shutil.copy(TRACES / ("linear_eager.json.gz" if i == 0 else "mlp_eager.json.gz"), dst)
        os.utime(dst, (1_000_000 + i, 1_000_000 + i))
    d = run_json(capsys, "summary", str(tmp_path), "--json")
    assert d["file"].endswith("w.2.pt.trace.json.gz")
    assert main(["summary", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "newest of 2" in err and "w.2.pt.trace.json.gz" in err


def test_summary_names_a_gpu_trace_without_device_properties(tmp_path, capsys):
    doc = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))
    doc.pop("deviceProperties"), doc.pop("tracetui", None)  # e.g. a trace another tool re-exported
    p = tmp_path / "bare.json"
    p.write_text(json.dumps(doc))
    assert main(["summary", str(p)]) == 0
    out = capsys.readouterr().out
    assert "device: GPU (name not recorded)" in out and "CPU only" not in out.splitlines()[0]
    assert run_json(capsys, "summary", str(p), "--json")["device"] is None  # the schema stays: null
    assert "device: none (CPU only)" in _summary_first_line(capsys, tmp_path)


def _summary_first_line(capsys, tmp_path) -> str:
    cpu = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps(cpu))
    assert main(["summary", str(p)]) == 0
    return capsys.readouterr().out.splitlines()[0]


def test_tree_depth_counts_what_is_shown_and_a_filter_never_cuts_its_match(capsys):
    """`tree --depth` counted hidden Python frames, and `--filter X --depth N` could cut off the
    match itself. Python frames are hidden as in the app (`--python` shows them); with a
    filter, --depth counts levels below each match. References from the JSON as written."""
    import gzip
    import json
    raw = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))["traceEvents"]
    frames = {e["name"] for e in raw if e.get("cat") == "python_function" and not e["name"].startswith("nn.Module: ")}
    assert main(["tree", str(TRACES / "mlp_eager.json.gz"), "--depth", "6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [l.strip().rsplit(" [", 1)[0] for l in lines]
    assert not frames & set(names)
    assert any(n.startswith("nn.Module: ") for n in names)  # modules stay
    assert max(len(l) - len(l.lstrip()) for l in lines) == 12  # six levels shown, frames not counted
    assert main(["tree", str(TRACES / "mlp_eager.json.gz"), "--python", "--depth", "6"]) == 0
    shown = capsys.readouterr().out
    assert any(f in shown for f in frames)
    # a match deep in the tree survives --depth 1, with one level under it
    gemms = [e["name"] for e in raw if e.get("cat") == "kernel" and e["name"].startswith("nvjet")]
    assert main(["tree", str(TRACES / "mlp_eager.json.gz"), "--filter", "aten::mm", "--depth", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    mm = [i for i, l in enumerate(lines) if l.strip().startswith("aten::mm [op]")]
    ops_mm = [e for e in raw if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
    assert len(mm) == len(ops_mm)
    for i in mm:
        indent = len(lines[i]) - len(lines[i].lstrip())
        below = [l for l in lines[i + 1:i + 4] if len(l) - len(l.lstrip()) == indent + 2]
        assert below and not any("[kernel]" in l for l in below)  # one level: the launches, not their GEMMs
    assert set(gemms)  # (the GEMMs are there, one level further down)


@pytest.mark.parametrize("argv", [["summary", "--top", "-5", "t.json"], ["ranks", "--workers", "0", "x"],
                                  ["summary"], ["--bogus", "t.json"], ["diff", "--format", "xml", "a", "b"],
                                  ["tree", "--depth", "many", "t.json"]])
def test_bad_arguments_get_one_line(argv, capsys):
    """A bad argument is bad input like a bad file: one `tracetui: error:` line naming the
    command and where its help is, exit 2, no usage block."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tracetui: error: tracetui") and err[0].endswith("--help)"), err


def test_version_prints_the_packages_version(capsys):
    """`tracetui --version` was read as a trace path; it prints the version pyproject.toml declares."""
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    want = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"tracetui {want}\n"
    r = subprocess.run([sys.executable, "-m", "tracetui", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == f"tracetui {want}\n" and r.stderr == ""
