"""Bad input: one line naming the file and the problem, exit code 2, never a traceback."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from tracetui.cli.main import main
from tracetui.model import TraceError, load_trace
from tracetui.model.trace import LOST_GPU_NOTE

from tests.conftest import TRACES

GOOD = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
     "args": {"External id": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11.0, "dur": 1.0,
     "args": {"correlation": 7, "External id": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 13.0, "dur": 4.0,
     "args": {"correlation": 7, "External id": 1, "stream": 7, "grid": [1, 1, 1]}},
]}


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


CASES = {
    "empty.json": (b"", "empty file"),
    "text.json": (b"hello world", "not JSON"),
    "list_of_ints.json": (b"[1, 2, 3]", "not a PyTorch profiler trace"),
    "no_events.json": (b'{"schemaVersion": 1}', "not a PyTorch profiler trace"),
    "wrong_types.json": (json.dumps({"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]}).encode(),
                         "not a PyTorch profiler trace"),
    "bad.json.gz": (b"\x1f\x8b\x08\x00garbagegarbage", "gzip"),
    "garbage_json.json": (b'{"traceEvents": [ {"ph": "X", @@@ } ] }', "invalid JSON"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2(tmp_path, name, capsys):
    data, words = CASES[name]
    p = _write(tmp_path, name, data)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert words in str(e.value) and name in str(e.value) and "\n" not in str(e.value)
    assert main(["summary", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_missing_file_and_empty_folder(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["summary", str(tmp_path)]) == 2
    assert "no *.pt.trace.json" in capsys.readouterr().err


def test_cli_subprocess_has_no_traceback(tmp_path):
    p = _write(tmp_path, "trunc.json.gz", gzip.compress(b'{"traceEvents": [')[:-6])
    r = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_truncated_trace_loads_what_it_can(tmp_path):
    """A killed exporter: the file stops mid-event. Load the complete events and say what was cut."""
    full = (TRACES / "mlp_eager.json.gz").read_bytes()
    raw = gzip.decompress(full)
    cut = raw[: int(len(raw) * 0.6)]
    p = _write(tmp_path, "killed.json", cut)
    before = p.read_bytes()
    t = load_trace(p)
    assert p.read_bytes() == before  # never modifies its input
    assert t.report.truncated_bytes > 0
    assert any("ends early" in r for r in t.report.repairs)
    assert len(t.store) > 10
    # Kineto writes runtime calls and GPU activity last: a cut at 60% kept none, and says so
    assert not t.has_gpu and LOST_GPU_NOTE in t.report.repairs
    kept_gpu = load_trace(_write(tmp_path, "late.json", raw[: int(len(raw) * 0.95)]))
    assert kept_gpu.has_gpu and LOST_GPU_NOTE not in kept_gpu.report.repairs
    # also through a truncated gzip stream
    pz = _write(tmp_path, "killed.json.gz", full[: int(len(full) * 0.7)])
    tz = load_trace(pz)
    assert any("gzip" in r for r in tz.report.repairs) and len(tz.store) > 10


def test_invalid_json_from_real_exporters_is_repaired(tmp_path):
    """Unescaped quotes in a frame name, a non-UTF-8 byte and a raw control character."""
    text = json.dumps(GOOD, indent=1)
    lines = [
        '{"traceEvents": [',
        '{"ph": "X", "cat": "python_function", "name": "x.py(3): f "quoted" \xff\x01", "pid": 1, "tid": 1, '
        '"ts": 9.0, "dur": 8.0, "args": {}},',
    ]
    body = text[text.index("[") + 1:]
    data = ("\n".join(lines) + "\n" + body).encode("latin-1")
    p = _write(tmp_path, "broken.json", data)
    t = load_trace(p)
    names = [t.name(i) for i in range(len(t.tree))]
    assert any('"quoted"' in n for n in names)
    # one of each in the file: the report says so with its counts
    assert {"escaped 2 unescaped quote(s) in 1 event name(s)",
            "replaced 1 invalid UTF-8 sequence(s) with U+FFFD",
            "escaped 1 raw control character(s) in 1 event(s)"} <= set(t.report.repairs)
    assert "gemm_kernel" in names


def test_minimal_trace_links_kernel_to_op(tmp_path):
    p = _write(tmp_path, "tiny.json", json.dumps(GOOD).encode())
    t = load_trace(p)
    k = [i for i in range(len(t.tree)) if t.kind(i) == "kernel"][0]
    assert t.name(t.launcher(k)) == "cudaLaunchKernel"
    assert t.name(t.launching_op(k)) == "aten::mm"
    mm = t.launching_op(k)
    assert t.roll.device[mm] == 4000 and t.roll.kernels[mm] == 1


def test_bare_array_form_and_missing_fields(tmp_path):
    evs = GOOD["traceEvents"] + [{"ph": "X", "cat": "cpu_op", "name": "aten::no_ts", "pid": 1, "tid": 1}]
    p = _write(tmp_path, "array.json", json.dumps(evs).encode())
    t = load_trace(p)
    assert t.tree.diagnostics["events_missing_fields"] == 1
    assert len(t.kernel_table) == 1


def test_orphan_gpu_activity_is_shown_not_dropped(tmp_path):
    d = json.loads(json.dumps(GOOD))
    d["traceEvents"][2]["args"] = {"correlation": 99, "stream": 7}
    p = _write(tmp_path, "orphan.json", json.dumps(d).encode())
    t = load_trace(p)
    assert t.tree.diagnostics["gpu_without_launch"] == 1
    assert t.tree.diagnostics["launches_without_gpu"] == 1
    assert any(t.kind(int(c)) == "gpu" for c in t.tree.children(0))


def test_gpu_only_trace_has_no_host_events_to_nest(tmp_path):
    """A trace of GPU activity alone (no host thread at all) still loads, its kernels grouped."""
    evs = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 2,
            "args": {"correlation": i, "stream": 7}} for i in range(3)]
    p = _write(tmp_path, "gpu_only.json", json.dumps({"traceEvents": evs}).encode())
    t = load_trace(p)
    assert t.tree.diagnostics["gpu_without_launch"] == 3
    assert sum(a.count for a in t.kernel_table) == 3
    group = t.tree.parent[[i for i in range(len(t.tree)) if t.kind(i) == "kernel"]]
    assert {t.kind(int(g)) for g in group} == {"gpu"}
