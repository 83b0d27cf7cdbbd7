"""torch's CPU self-time rule per recording, and the CLI's own JSON against key_averages()."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracetui.model import selftime
from tracetui.model.selftime import parse_version, self_time_rule
from tracetui.workloads.record import key_averages_path, read_key_averages

from tests.model.test_op_table_torch import _double_counted


@pytest.mark.parametrize("meta, frames, given, expected", [
    ({"tracetui": {"torch": "2.11.0+cu130"}}, True, None, False),
    ({"tracetui": {"torch": "2.13.0+cpu"}}, True, None, True),
    ({"tracetui": {"torch": "2.14.1"}}, True, None, True),
    ({"tracetui": {"torch": "2.13.0"}}, False, None, False),   # no frames: the rules agree
    ({}, True, None, False),                                   # unknown: the older rule, and it says so
    ({}, True, "2.13", True),                                  # the user's word wins
    ({"tracetui": {"torch": "2.13.0"}}, True, "2.11", False),
    ({"tracetui": "not a dict"}, True, None, False),
])
def test_rule_choice(meta, frames, given, expected, monkeypatch):
    monkeypatch.setattr(selftime, "installed_torch", lambda: None)  # no torch here
    rule = self_time_rule(meta, frames, given)
    assert rule.frames_own_time is expected and rule.reason


@pytest.mark.parametrize("installed, expected", [("2.13.0+cpu", True), ("2.12.1", False), ("2.14.0.dev20261201", True),
                                                 ("not a version", False), (None, False)])
def test_a_trace_without_a_version_takes_the_installed_torchs_rule(installed, expected, monkeypatch):
    """A plain export_chrome_trace carries no torch version: the torch installed here (where the
    trace is mostly read) decides, and says so; what the trace or the user says still wins."""
    monkeypatch.setattr(selftime, "installed_torch", lambda: installed)
    rule = self_time_rule({}, True)
    assert rule.frames_own_time is expected
    if parse_version(installed) is not None:
        assert installed in rule.reason
    else:
        assert "assumed <= 2.12" in rule.reason
    assert self_time_rule({"tracetui": {"torch": "2.11.0"}}, True).frames_own_time is False
    assert self_time_rule({}, True, "2.11").frames_own_time is False
    assert self_time_rule({}, False).frames_own_time is False


def test_the_installed_torch_is_read_without_importing_it():
    import importlib.metadata
    try:
        want = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        want = None
    assert selftime.installed_torch() == want


def _cli_summary(path) -> dict:
    # --python: frames and modules are key_averages() rows too (the CLI lists them with it, issue 43)
    out = subprocess.run([sys.executable, "-m", "tracetui", "summary", "--json", "--top", "0", "--python", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= max(0.01 * abs(theirs), 0.011)


def _without_version(path, out):
    """``path`` as a plain ``export_chrome_trace`` writes it: without our recorder's provenance."""
    import gzip
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc.pop("tracetui")["torch"]
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("name", ["linear_eager", "mlp_eager", "mlp_eager_stack", "mlp_compile_stack",
                                  "mlp_eager_stack (no version in the file)"])
def test_cli_matches_key_averages_on_every_row(cpu_traces, name, tmp_path):
    """torch 2.13 CPU recordings (with_stack nests ops under frames): every key_averages() row,
    steps, annotations and frames included, from `tracetui summary --json`: counts exact, times 1%.
    Without the version in the file (a plain export_chrome_trace), the installed torch, which
    recorded it, gives the rule."""
    path = cpu_traces[name.split(" ")[0]]
    ref, version = read_key_averages(key_averages_path(path))
    # where children overlap (record_function inside its __enter__/__exit__ frames) torch counts
    # their overlap twice; ours is torch's plus that overlap, measured on the raw JSON
    twice = _double_counted(path, version or "2.13")
    if "no version" in name:
        path = _without_version(path, tmp_path / "plain.json")
    d = _cli_summary(path)
    rows = {o["name"]: o for o in d["ops"]}
    assert d["self_time_rule"]["frames_own_time"] == ("_stack" in name)
    if "no version" in name:
        assert "installed here" in d["self_time_rule"]["reason"]
    checked = 0
    for r in ref:
        if not r["cpu_total_us"]:
            continue  # GPU-side rows: none on a CPU run
        o = rows.get(r["name"])
        assert o is not None, f"{r['name']!r} missing from the CLI's ops"
        assert o["count"] == r["count"], (r["name"], o["count"], r["count"])
        assert _close(o["cpu_total_us"], r["cpu_total_us"]), (r["name"], o["cpu_total_us"], r["cpu_total_us"])
        theirs = r["cpu_self_us"] + (twice.get(r["name"], 0.0) if d["self_time_rule"]["frames_own_time"] else 0.0)
        assert _close(o["cpu_self_us"], theirs), (r["name"], o["cpu_self_us"], r["cpu_self_us"])
        checked += 1
    assert checked >= 5
    assert any(r["name"] == "ProfilerStep*" for r in ref)
