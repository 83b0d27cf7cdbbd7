"""One rule, one wording (``report/host_step.py``): the gate said "no step markers, so no host time
per step (--steps REGEX names the annotation that marks a step)", a fourth way beside the text
report's, the ladder's and the diff screen's "- (B has no step markers; --steps REGEX names one)".
compare/ may not import report/, so the sentence lives below both (compare/stepless.py); the gate,
the report and the screen say it the same way, naming the sides without step markers."""
from __future__ import annotations

import json

import pytest

from tracetui.cli.main import main
from tracetui.report.host_step import no_steps

from tests.compare.test_first_hour import _write


def _with_markers(path, step_us: float) -> None:
    """``_write``'s CPU trace with its ``train_step`` annotations renamed ``ProfilerStep#N``."""
    doc = _write(path, step_us=step_us, mm_us=100)
    k = 0
    for e in doc["traceEvents"]:
        if e.get("name") == "train_step":
            e["name"], k = f"ProfilerStep#{k}", k + 1
    assert k == 3
    path.write_text(json.dumps(doc))


def _gate(capsys, a, b, on: str) -> dict:
    try:
        rc = main(["diff", str(a), str(b), "--json", "--gate", "5", "--gate-on", on])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr().out
    assert rc == 3
    return json.loads(out)["gate"]


@pytest.mark.parametrize("on", ["cpu", "wall"])
@pytest.mark.parametrize("stepless", [("A", "B"), ("B",), ("A",)])
def test_the_gate_says_which_side_lacks_step_markers_as_the_report_does(capsys, tmp_path, on, stepless):
    paths = {}
    for side in "AB":
        p = tmp_path / f"{side}.json"
        if side in stepless:
            _write(p, step_us=400, mm_us=100)  # train_step annotations only: no step markers
        else:
            _with_markers(p, step_us=400)
        paths[side] = p
    g = _gate(capsys, paths["A"], paths["B"], on)
    said = no_steps(list(stepless))  # "- (B has no step markers; --steps REGEX names one)"
    assert said.startswith("- (") and said.endswith(")")
    assert g["reason"] == f"cannot judge {on}: {said[3:-1]}"
    assert g["passed"] is False and g["a"] is None and g["b"] is None
