"""An empty profile, as torch 2.13 writes one for ``with profile(): pass`` (or a schedule that
never reached an active step): only the profiler's own span (``cat: Trace``, ``Op count: 0``),
two uncategorised instants and metadata. The error said "trace holds no events tracetui uses
(skipped: 2 (none) (i), 1 Trace)", which names tracetui's internals, not what happened."""
from __future__ import annotations

import json

import pytest

from tracetui.cli.main import main
from tracetui.model import load_trace
from tracetui.read.source import TraceError


def _empty_profile(path):
    ev = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "ts": 1.0, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "ts": 1.0, "args": {"name": "thread 7 (python)"}},
          {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
           "ts": 1.0, "dur": 135.3, "args": {"Op count": 0}},
          {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
           "tid": "Trace PyTorch Profiler", "ts": 1.0},
          {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 250.0}]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}))
    return ev


def test_an_empty_profile_says_the_profiler_recorded_nothing(tmp_path, capsys):
    p = tmp_path / "empty.json"
    ev = _empty_profile(p)
    # the reference: the profiler's own span counts 0 ops, and no other complete event exists
    assert [e["args"]["Op count"] for e in ev if e.get("cat") == "Trace"] == [0]
    assert not [e for e in ev if e.get("ph") == "X" and e.get("cat") != "Trace"]
    with pytest.raises(TraceError) as e:
        load_trace(p)
    msg = str(e.value)
    assert "\n" not in msg and "the profiler recorded no events" in msg
    assert "schedule" in msg and "(none) (i)" not in msg
    assert main(["summary", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the profiler recorded no events" in err
