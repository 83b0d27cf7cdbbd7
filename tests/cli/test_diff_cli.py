"""`tracetui diff`: --top, --json, and three or more traces as a ladder."""
from __future__ import annotations

import json

from tracetui.cli.main import bundled_default, main

from tests.conftest import TRACES

LADDER = [str(TRACES / f"mlp_{x}.json.gz") for x in ("eager", "compile", "triton", "fused")]


def test_diff_text_shows_totals_then_changes_by_kind(capsys):
    assert main(["diff", LADDER[0], LADDER[1], "--text", "--top", "3"]) == 0
    out = capsys.readouterr().out
    head = out.index("rows sum to")
    assert head < out.index("\nfusion:") < out.index("gelu + mul → triton_poi_fused__unsafe_view_gelu_mul_0")
    assert "launches saved 1" in out and "unexplained rows 0" in out
    assert out.index("\nfusion:") < out.index("\nCPU overhead:") < out.index("kernels per step (aligned")


def test_diff_json_top_caps_the_changes_and_keeps_the_rows(capsys):
    assert main(["diff", LADDER[0], LADDER[1], "--json", "--top", "1"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert len([c for c in j["changes"] if c["kind"] != "cpu"]) == 1 and j["changes"][0]["kind"] == "fusion"
    assert len(j["kernels"]) == 6  # the aligned list is never capped
    t = j["totals"]
    assert abs(sum(k["delta_us"] for k in j["kernels"]) - t["device_delta_us"]) < 1e-6
    assert t["launches_saved"] == sum(k["launches_saved"] for k in j["kernels"]) == t["kernels_a"] - t["kernels_b"]


def test_three_or_more_traces_are_a_ladder(capsys):
    assert main(["diff", *LADDER, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in j["rungs"]] == LADDER
    assert [(s["from"], s["to"]) for s in j["steps"]] == [(0, 1), (1, 2), (2, 3)]
    for s, (a, b) in zip(j["steps"], zip(j["rungs"], j["rungs"][1:])):
        # to the ns: --json writes µs rounded to the trace's resolution (issue 43), each figure on its own
        assert abs(s["totals"]["device_delta_us"] - (b["device_us_per_step"] - a["device_us_per_step"])) <= 0.001 + 1e-9
        assert len(s["top"]) <= 3
    assert main(["diff", *LADDER, "--text"]) == 0
    out = capsys.readouterr().out
    assert "mlp_eager → mlp_compile" in out and "mlp_triton → mlp_fused" in out


def test_a_ladder_writes_csv_and_markdown(capsys):
    """``diff A B C --format csv|md`` exited 2 ("a ladder ... is written as text or json") while the
    README advertises ``--format`` for diff. CSV: the rungs (or ``--table``), the numbers of the
    JSON; Markdown: every table, one row per rung, pair and change."""
    import csv
    import io

    assert main(["diff", *LADDER, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert main(["diff", *LADDER, "--format", "csv"]) == 0
    rungs = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["file"] for r in rungs] == LADDER and [r["name"] for r in rungs][0] == "mlp_eager"
    for r, jr in zip(rungs, j["rungs"]):
        assert float(r["device_us_per_step"]) == jr["device_us_per_step"] and int(r["kernels_per_step"]) == jr["kernels_per_step"]
    assert main(["diff", *LADDER, "--format", "csv", "--table", "changes"]) == 0
    changes = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(changes) == sum(len(s["top"]) for s in j["steps"]) > 0
    assert [float(c["delta_us"]) for c in changes] == [c["delta_us"] for s in j["steps"] for c in s["top"]]
    assert changes[0]["from"] == "mlp_eager" and changes[0]["to"] == "mlp_compile"
    assert main(["diff", *LADDER, "--format", "md"]) == 0
    md = capsys.readouterr().out
    for name, n in (("rungs", len(LADDER)), ("steps", len(LADDER) - 1)):
        section = md.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert len([ln for ln in section.splitlines() if ln.startswith("| ")]) == n + 1  # header + rows


def test_one_trace_is_not_a_diff(capsys):
    assert main(["diff", LADDER[0], "--text"]) == 2
    assert "tracetui: error:" in capsys.readouterr().err


def test_bundled_default_is_the_whole_mlp_ladder():
    names = [p.name for p in bundled_default()]
    assert names[:2] == ["mlp_eager.json.gz", "mlp_compile.json.gz"]
    assert {"mlp_triton.json.gz", "mlp_fused.json.gz"} <= set(names) and len(names) >= 4
