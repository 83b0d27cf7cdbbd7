"""``diff --json`` on a trace without step markers: the figures measured over step windows (host time,
launches and their CPU time, memcpy/memset) do not exist there, so the JSON says null, as the text,
the app and the gate already say "-" / exit 3 (it wrote 0.0, a time no step took).

A side is the bundled H200 MLP recording (``traces/mlp_eager.json.gz``, 3 ``ProfilerStep#N``), and
the same recording with its step markers dropped; every figure is checked against the raw JSON.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracetui.cli.main import main

TRACES = Path(__file__).resolve().parents[2] / "traces"
STEP_WINDOW_KEYS = ("cpu_us_per_step", "launches_per_step", "launch_cpu_us_per_step",
                    "memcpy_memset_per_step", "memcpy_memset_us_per_step")


def _raw() -> dict:
    return json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The recording with its step markers (A) and without (B)."""
    d = tmp_path_factory.mktemp("stepless")
    doc = _raw()
    a, b = d / "stepped.json", d / "stepless.json"
    a.write_text(json.dumps(doc))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    b.write_text(json.dumps(doc))
    return a, b


def _run(capsys, *argv) -> tuple[int, str]:
    try:
        rc = main(["diff", *argv])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().out


def test_json_says_null_for_a_stepless_sides_step_window_figures(capsys, pair):
    a, b = pair
    rc, out = _run(capsys, str(a), str(b), "--json")
    j = json.loads(out)
    assert rc == 0 and j["b"]["steps"] == 0 and j["a"]["steps"] == 3
    for key in STEP_WINDOW_KEYS:
        assert j["b"][key] is None, key
        assert isinstance(j["a"][key], float), key
    assert j["totals"]["cpu_delta_us"] is None
    assert j["verdict"]["cpu_change_pct"] is None
    # the stepped side's host time is its step markers' mean wall time, straight from the raw JSON
    steps = [e["dur"] for e in _raw()["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]
    assert j["a"]["cpu_us_per_step"] == pytest.approx(sum(steps) / len(steps), abs=1e-3)


def test_both_stepless_sides_say_null_and_the_text_still_says_dash(capsys, pair):
    _, b = pair
    rc, out = _run(capsys, str(b), str(b), "--json")
    j = json.loads(out)
    assert rc == 0 and all(j[s][k] is None for s in "ab" for k in STEP_WINDOW_KEYS)
    rc, out = _run(capsys, str(b), str(b), "--text")
    line = next(x for x in out.splitlines() if x.startswith("per step"))
    assert rc == 0 and "host time -" in line and "no step markers" in line


@pytest.mark.parametrize("fmt", ["--text", "--json", "--format=csv"])
def test_a_ladder_with_a_stepless_rung_reports_without_a_zero(capsys, pair, fmt):
    """The ladder's rungs table printed the stepless rung's launches and launch CPU as 0; its JSON
    wrote 0.0."""
    a, b = pair
    rc, out = _run(capsys, str(a), str(b), str(a), fmt)
    assert rc == 0
    if fmt == "--json":
        ld = json.loads(out)
        assert all(ld["rungs"][1][k] is None for k in STEP_WINDOW_KEYS)
        assert ld["steps"][0]["totals"]["cpu_delta_us"] is None
    elif fmt == "--text":
        row = next(x for x in out.splitlines() if x.strip().endswith("stepless.json"))
        assert row.split()[-4:-1] == ["-", "-", "-"]  # launches, launch CPU µs, CPU µs


def test_a_cpu_gate_still_exits_3_on_a_stepless_side(capsys, pair):
    a, b = pair
    rc, out = _run(capsys, str(a), str(b), "--json", "--gate", "5", "--gate-on", "cpu")
    g = json.loads(out)["gate"]
    assert rc == 3 and g["a"] is None and g["b"] is None and "no step markers" in g["reason"]
