"""The per-step column of GPU time spent on work the step did not launch was headed "other-steps"
("the GPU was behind" in the detail pane). HTA's ``triton_example`` has one step and read
"other-steps 1.8": there is no other step. The work can be launched before the first step or by
no step at all, so the column says "other work", and the pane says whose it can be.

One step, its own kernel, and a warm-up kernel launched before the step that is still running when
the step starts; the figure's reference is the warm-up kernel's time inside the window, from the
raw JSON."""
from __future__ import annotations

import json
import re

from tracetui.cli.main import main
from tracetui.model import load_trace
from tracetui.ui.details import describe


def _trace(path) -> dict:
    """A warm-up launch at 100 µs (its kernel runs 150..1,150), ProfilerStep#1 from 1,000 to 3,000
    with its own launch at 1,200 (its kernel 1,300..1,500)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0,
           "dur": 2000.0, "args": {}}]
    for c, (launch, k_ts, k_dur) in enumerate(((100.0, 150.0, 1000.0), (1200.0, 1300.0, 200.0)), start=1):
        ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": launch, "dur": 30.0,
                "args": {"External id": c}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch + 5,
                "dur": 10.0, "args": {"correlation": c, "External id": c}},
               {"ph": "X", "cat": "kernel", "name": f"gemm_{c}", "pid": 0, "tid": 7, "ts": k_ts, "dur": k_dur,
                "args": {"correlation": c, "External id": c, "device": 0, "stream": 7}}]
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def _not_launched_in_step_us(doc: dict) -> float:
    """GPU time inside the step's window of kernels whose launch is outside its host interval."""
    ev = doc["traceEvents"]
    step = next(e for e in ev if e["name"].startswith("ProfilerStep#"))
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e["cat"] == "cuda_runtime"}
    ks = [e for e in ev if e["cat"] == "kernel"]
    w1 = max([s1] + [k["ts"] + k["dur"] for k in ks if s0 <= launch[k["args"]["correlation"]] < s1])
    return sum(max(0.0, min(k["ts"] + k["dur"], w1) - max(k["ts"], s0)) for k in ks
               if not s0 <= launch[k["args"]["correlation"]] < s1)


def test_a_one_step_trace_does_not_call_work_outside_its_step_other_steps(tmp_path, capsys):
    doc = _trace(tmp_path / "t.json")
    want = _not_launched_in_step_us(doc)
    assert want == 150.0
    capsys.readouterr()
    assert main(["summary", "--no-cache", "--json", str(tmp_path / "t.json")]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["steps"] == 1 and js["per_step"][0]["other_steps_us"] == want  # the JSON key is kept
    assert main(["summary", "--no-cache", str(tmp_path / "t.json")]) == 0
    per_step = capsys.readouterr().out.split("\nper step")[1].split("\n\n")[0]
    header = next(ln for ln in per_step.splitlines() if "busy" in ln)
    row = next(ln for ln in per_step.splitlines() if re.match(r"\s+ProfilerStep#1 ", ln))
    cols = re.split(r"\s{2,}", header.strip())  # step, window, busy, other work, idle (...), ...
    assert "other work" in cols, header
    assert float(row.split()[cols.index("other work")]) == want
    assert "other-steps" not in per_step and "other steps" not in per_step

    t = load_trace(tmp_path / "t.json", cache=False)
    pane = str(describe(t, t.steps[0]))
    assert "other steps" not in pane and "the GPU was behind" not in pane
    line = next(ln for ln in pane.splitlines() if "other work" in ln)
    assert "150" in line and "outside this step" in line, line
