"""The summary's per-step table names its window by the rule it uses: from the step marker's start to
the later of the marker's end and the end of the step's last GPU work. The header said "→ end of its
last GPU work", but on a CPU-bound step (the H100 MLP runs: GPU done at 4,107 µs, marker at 4,694)
the column is the marker's length. Two generated steps, one of each kind; references from the JSON."""
from __future__ import annotations

import json
import re

from tracetui.cli.main import main

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"


def _trace(path) -> dict:
    """Step 0: the host runs 1,000 µs, its kernel ends at 300 µs. Step 1: the host runs 200 µs, its
    kernel ends 900 µs after the step's start."""
    ev = []
    for s, (host, k_ts, k_dur) in enumerate(((1000, 100, 200), (200, 300, 600))):
        t0, c = 10_000 * (s + 1), s + 1
        ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": host, "args": {}},
               {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 40, "args": {"External id": c}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20, "dur": 20,
                "args": {"correlation": c, "External id": c}},
               {"ph": "X", "cat": "kernel", "name": ADD, "pid": 0, "tid": 7, "ts": t0 + k_ts, "dur": k_dur,
                "args": {"correlation": c, "External id": c, "device": 0, "stream": 7}}]
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def test_window_header_says_the_rule_the_column_uses(tmp_path, capsys):
    doc = _trace(tmp_path / "t.json")
    ev = doc["traceEvents"]
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
    kernels = [e for e in ev if e["cat"] == "kernel"]
    want = {s["name"]: max(s["ts"] + s["dur"], k["ts"] + k["dur"]) - s["ts"] for s, k in zip(steps, kernels)}
    assert sorted(want.values()) == [900, 1000]  # one step ends on the host, the other on the GPU
    capsys.readouterr()
    assert main(["summary", "--no-cache", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    got = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(ProfilerStep#\d)\s+([\d.]+)\s", out, re.M)}
    assert got == want
    header = next(line for line in out.splitlines() if line.startswith("per step (window:"))
    assert "later of" in header and "end of its last GPU work;" not in header, header
