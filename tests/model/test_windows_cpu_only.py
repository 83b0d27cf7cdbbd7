"""A step of a trace with no GPU activity at all: its breakdown is all idle, all host wait
(it crashed the first screen, which describes the first step)."""
import json

from tracetui.model import load_trace


def test_a_cpu_only_step_is_idle_for_its_whole_window(tmp_path):
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 11, "dur": 20}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = load_trace(p)
    b = t.step_breakdown(t.steps[0])
    window = evs[0]["dur"] * 1000
    assert b["window_ns"] == b["idle_ns"] == b["idle_split_ns"]["host_wait"] == window
    assert b["busy_ns"] == 0 and b["verdict"] == "CPU only"
