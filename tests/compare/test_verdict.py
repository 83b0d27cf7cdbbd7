"""`tracetui diff A B`: the verdict line, the comparability check and `--gate` (issue 36 part 2).

Every expected figure and exit code is computed here from the raw JSON (kernel events summed per
ProfilerStep), never through the model."""
from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache

import pytest

from tracetui.cli.gate import GATE_ON
from tracetui.cli.main import main
from tracetui.compare.verdict import EXIT_CODES, GATE_METRICS

from tests.conftest import ROOT, TRACES


@lru_cache(maxsize=None)
def raw(name: str) -> dict:
    """Per step, from the raw events: kernel µs, kernel count, host step µs; the steps' kernels by name."""
    ev = json.load(gzip.open(TRACES / f"{name}.json.gz"))["traceEvents"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    n = len(steps)
    return {"steps": n, "kernel_us": sum(e["dur"] for e in kernels) / n, "kernels": len(kernels) / n,
            "step_us": sum(e["dur"] for e in steps) / n, "kernel_names": [e["name"] for e in kernels]}


def run(capsys, *argv) -> tuple[int, str, str]:
    try:
        rc = main(["diff", *argv])
    except SystemExit as e:  # argparse's errors leave through SystemExit(2)
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def expected_rc(a: str, b: str, pct: float, key: str = "kernel_us") -> int:
    ra, rb = raw(a)[key], raw(b)[key]
    return 1 if 100.0 * (rb - ra) / ra > pct else 0


PAIRS = [("mlp_eager", "mlp_compile"), ("mlp_compile", "mlp_eager"), ("mlp_eager", "mlp_fused"),
         ("mlp_fused", "mlp_eager"), ("transformer_eager", "transformer_compile"),
         ("transformer_compile", "transformer_eager")]


@pytest.mark.parametrize("a,b", PAIRS)
def test_gate_on_device_time_both_directions(capsys, a, b):
    """A regression pair in both directions: the exit code follows the raw per-step kernel time."""
    ra, rb = raw(a)["kernel_us"], raw(b)["kernel_us"]
    change = 100.0 * (rb - ra) / ra
    assert abs(change) > 5  # the ladder's rungs differ by more than the gate below: both outcomes occur
    rc, out, _ = run(capsys, str(TRACES / f"{a}.json.gz"), str(TRACES / f"{b}.json.gz"), "--json", "--gate", "2")
    assert rc == expected_rc(a, b, 2) == (1 if rb > ra else 0)
    j = json.loads(out)
    g = j["gate"]
    assert g["a"] == pytest.approx(ra, rel=1e-6) and g["b"] == pytest.approx(rb, rel=1e-6)
    assert g["change_pct"] == pytest.approx(change, rel=1e-6)
    assert g["exit_code"] == rc and g["passed"] == (rc == 0) and g["on"] == "device"
    assert j["comparability"]["comparable"] is True
    v = j["verdict"]
    assert v["device_change_pct"] == pytest.approx(change, rel=1e-6)
    word = "faster" if rb < ra else "slower"
    assert v["line"].startswith(f"B's step is {abs(change):.1f}% {word} on the GPU")


def test_gate_threshold_above_the_change_passes(capsys):
    """The same regression passes a gate wider than it (the threshold is a bound, not a sign test)."""
    a, b = "mlp_compile", "mlp_eager"
    change = 100.0 * (raw(b)["kernel_us"] - raw(a)["kernel_us"]) / raw(a)["kernel_us"]
    paths = [str(TRACES / f"{x}.json.gz") for x in (a, b)]
    assert run(capsys, *paths, "--text", "--gate", f"{change + 1:.2f}")[0] == 0
    rc, out, _ = run(capsys, *paths, "--text", "--gate", f"{change - 1:.2f}")
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"B's step is {change:.1f}% slower on the GPU")
    assert lines[1].startswith("comparable:") and lines[2].startswith("gate FAILED (exit 1)")


@pytest.mark.parametrize("a,b", [("mlp_eager", "mlp_fused"), ("mlp_compile", "mlp_eager")])
def test_gate_on_kernels_counts_launches_from_the_raw_json(capsys, a, b):
    rc, out, _ = run(capsys, str(TRACES / f"{a}.json.gz"), str(TRACES / f"{b}.json.gz"), "--json",
                     "--gate", "0", "--gate-on", "kernels")
    g = json.loads(out)["gate"]
    assert (g["a"], g["b"]) == (raw(a)["kernels"], raw(b)["kernels"])
    assert rc == expected_rc(a, b, 0, "kernels")


def test_gate_on_cpu_and_wall(capsys):
    """cpu: the host step markers' mean duration; wall: at least that (it runs to the last GPU activity)."""
    a, b = "mlp_eager", "mlp_compile"
    paths = [str(TRACES / f"{x}.json.gz") for x in (a, b)]
    rc, out, _ = run(capsys, *paths, "--json", "--gate", "0", "--gate-on", "cpu")
    g = json.loads(out)["gate"]
    assert g["a"] == pytest.approx(raw(a)["step_us"]) and g["b"] == pytest.approx(raw(b)["step_us"])
    assert rc == expected_rc(a, b, 0, "step_us")
    rc, out, _ = run(capsys, *paths, "--json", "--gate", "0", "--gate-on", "wall")
    g = json.loads(out)["gate"]
    assert g["a"] >= raw(a)["step_us"] - 1e-6 and g["b"] >= raw(b)["step_us"] - 1e-6


@pytest.mark.parametrize("a,b,what", [("mlp_eager", "transformer_eager", "shapes"),
                                      ("linear_eager", "mlp_eager", "shapes"),
                                      ("transformer_eager", "transformer_eager_rf", "steps marker")])
def test_not_comparable_exits_3_and_says_what_differs(capsys, a, b, what):
    rc, out, err = run(capsys, str(TRACES / f"{a}.json.gz"), str(TRACES / f"{b}.json.gz"), "--json", "--gate", "50")
    assert rc == 3
    j = json.loads(out)
    comp = j["comparability"]
    assert comp["comparable"] is False
    assert [c["check"] for c in comp["checks"]] == ["device", "shapes", "step count", "steps marker"]
    failed = [c["check"] for c in comp["checks"] if c["same"] is False]
    assert failed == [what]
    assert j["gate"]["exit_code"] == 3 and "not comparable" in err
    # the raw step markers say the same for the marker check
    if what == "steps marker":
        ev = json.load(gzip.open(TRACES / f"{b}.json.gz"))["traceEvents"]
        assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in ev)
        assert any(re.fullmatch(r"train_step_\d+", str(e.get("name", ""))) for e in ev)


def test_not_comparable_without_a_gate_is_reported_not_failed(capsys):
    rc, out, _ = run(capsys, str(TRACES / "linear_eager.json.gz"), str(TRACES / "mlp_eager.json.gz"), "--text")
    assert rc == 0
    assert out.splitlines()[1].startswith("NOT comparable: shapes")


def test_fusion_points_match_the_replaced_kernels_in_the_raw_json(capsys):
    """eager → compile on the MLP: Inductor's one Triton kernel replaces eager's GELU and multiply.
    The verdict's fusion points are (their time − its time) per step over A's step."""
    rc, out, _ = run(capsys, str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_compile.json.gz"), "--json")
    assert rc == 0
    v = json.loads(out)["verdict"]
    ea, ec = raw("mlp_eager"), raw("mlp_compile")
    evs = json.load(gzip.open(TRACES / "mlp_eager.json.gz"))["traceEvents"]
    cvs = json.load(gzip.open(TRACES / "mlp_compile.json.gz"))["traceEvents"]
    replaced = sum(e["dur"] for e in evs if e.get("cat") == "kernel" and ("Gelu" in e["name"] or "MulFunctor" in e["name"]))
    fused = sum(e["dur"] for e in cvs if e.get("cat") == "kernel" and e["name"].startswith("triton_"))
    points = 100.0 * (fused / ec["steps"] - replaced / ea["steps"]) / ea["kernel_us"]
    assert v["points"]["fusion"] == pytest.approx(points, abs=0.05)
    assert f"fusion gives {-points:.1f} points of it" in v["line"]
    cpu = 100.0 * (ec["step_us"] - ea["step_us"]) / ea["step_us"]
    assert v["line"].endswith(f"host time per step {cpu:+.0f}%")  # named for what it counts (issue 40)


def test_verdict_points_sum_to_the_step_change(capsys):
    """The kinds' points reconcile with the headline (the diff's rows sum to the device delta)."""
    rc, out, _ = run(capsys, str(TRACES / "transformer_eager.json.gz"), str(TRACES / "transformer_compile.json.gz"),
                     "--json")
    v = json.loads(out)["verdict"]
    ra, rb = raw("transformer_eager")["kernel_us"], raw("transformer_compile")["kernel_us"]
    assert sum(v["points"].values()) == pytest.approx(100.0 * (rb - ra) / ra, abs=1e-6)
    assert v["fusion_top"]["where"]  # a block or module is named


def test_text_report_opens_with_the_verdict(capsys):
    rc, out, _ = run(capsys, str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_fused.json.gz"), "--text")
    first = out.splitlines()[0]
    change = 100.0 * (raw("mlp_fused")["kernel_us"] - raw("mlp_eager")["kernel_us"]) / raw("mlp_eager")["kernel_us"]
    assert first.startswith(f"B's step is {-change:.1f}% faster on the GPU; fusion gives")


@pytest.mark.parametrize("argv", [["--gate", "abc"], ["--gate", "-3"], ["--gate-on", "memory", "--gate", "1"]])
def test_bad_gate_arguments_exit_2(capsys, argv):
    rc, _, err = run(capsys, str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_compile.json.gz"), *argv)
    assert rc == 2
    assert err.startswith("tracetui: error:") and len(err.strip().splitlines()) == 1


def test_gate_refuses_a_ladder(capsys):
    rc, _, err = run(capsys, *(str(TRACES / f"mlp_{x}.json.gz") for x in ("eager", "compile", "fused")),
                     "--text", "--gate", "5")
    assert rc == 2 and "--gate compares two traces" in err


def test_gate_choices_and_exit_codes_are_documented():
    """The CLI's --gate-on choices are the verdict's metrics; README states every exit code."""
    assert GATE_ON == tuple(GATE_METRICS)
    readme = (ROOT / "README.md").read_text()
    for code, _ in EXIT_CODES:
        assert re.search(rf"^\| *`?{code}`? *\|", readme, re.M), f"exit code {code} not in README's table"
