"""One rule, one wording: "no step markers, so no host time per step" was said three ways (the diff
screen's "- (no step markers)", the text report's "- (B has no step markers; --steps REGEX names
one)", the ladder's "- (no step markers)"). ``report.host_step`` words it for all three."""
from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest

from tracetui.cli.main import main
from tracetui.report.host_step import no_steps
from tracetui.ui.app import TraceApp
from tracetui.ui.diff_view import DiffScreen

from tests.ui.test_app import wait_for

TRACES = Path(__file__).resolve().parents[2] / "traces"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The bundled H200 MLP recording, and the same with its ``ProfilerStep#N`` markers dropped."""
    d = tmp_path_factory.mktemp("wording")
    doc = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))
    assert any(str(e.get("name", "")).startswith("ProfilerStep#") for e in doc["traceEvents"])
    a, b = d / "stepped.json", d / "stepless.json"
    a.write_text(json.dumps(doc))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    b.write_text(json.dumps(doc))
    return a, b


def _text(capsys, *argv) -> str:
    assert main(["diff", *argv, "--text"]) in (0, None)
    return capsys.readouterr().out


def test_the_report_the_ladder_and_the_diff_screen_say_it_the_same_way(capsys, pair):
    a, b = pair
    said = no_steps(["B"])
    assert "no step markers" in said and "--steps" in said
    report = next(x for x in _text(capsys, str(a), str(b)).splitlines() if x.startswith("per step"))
    assert f"host time {said}" in report
    ladder = [x for x in _text(capsys, str(a), str(b), str(a)).splitlines() if "host time" in x]
    assert f"host time {no_steps(['stepless'])}" in ladder[0] and f"host time {no_steps(['stepless'])}" in ladder[1]

    async def run():
        app = TraceApp([a, b], diff=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            await pilot.pause()
            summary = app.screen.query_one("#diffsummary").render()
            return getattr(summary, "plain", str(summary))
    assert f"host µs/step {said}" in asyncio.run(run())
