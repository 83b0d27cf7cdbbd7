"""A long digit name must not hang step detection (issue 44, item 1).

``^(?P<prefix>.*?)(?P<n>\\d+)$`` backtracked quadratically on a name of digits followed by a
non-digit: 16k digits took 2.2 s, 100k more than 60 s, in every entry point. Each check runs in a
subprocess under a time limit, so a regression fails instead of hanging the suite."""
from __future__ import annotations

import json
import subprocess
import sys

DIGITS = 100_000


def _run(code_or_args, timeout):
    args = [sys.executable, "-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"took longer than {timeout} s: {args[:3]}") from None


def test_numbered_regex_is_linear_on_a_long_digit_run():
    code = (
        "from tracetui.model.steps import NUMBERED\n"
        f"assert NUMBERED.match('0' * {DIGITS} + 'x') is None\n"
        f"m = NUMBERED.match('step ' + '9' * {DIGITS})\n"
        f"assert m['prefix'] == 'step ' and len(m['n']) == {DIGITS}\n"
        "m = NUMBERED.match('x12a34')\n"
        "assert (m['prefix'], m['n']) == ('x12a', '34')\n"
    )
    out = _run(code, timeout=10)
    assert out.returncode == 0, out.stderr


def test_summary_of_a_long_digit_annotation_returns(tmp_path):
    """The reported input: one user_annotation of 100,000 digits + ``x`` and no ProfilerStep,
    beside three step-like annotations whose trailing number follows 50,000 digits."""
    name = "0" * DIGITS + "x"
    ev = [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 5}]
    ev += [{"ph": "X", "cat": "user_annotation", "name": "step " + "9" * 50_000 + f"x{i}", "pid": 1, "tid": 1,
            "ts": 10 + 10 * i, "dur": 5} for i in range(3)]
    p = tmp_path / "digits.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    out = _run([sys.executable, "-m", "tracetui", "summary", "--json", str(p)], timeout=30)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    # the three numbered step annotations are the steps, found from the raw events above
    steps = [e for e in ev if e["name"].startswith("step ")]
    assert doc["steps"] == len(steps)
    assert doc["step_marker"]["rule"] == "numbered annotation"
    assert [s["name"] for s in doc["per_step"]] == [e["name"] for e in steps]
