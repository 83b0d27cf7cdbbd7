"""kernels/bench.py's CPU-checkable parts, so a GPU session runs it in one call without a bug:
argument parsing, the sweep plan, and ``--cpu-check`` (every table's code at a tiny shape, and
correctness against float64, under TRITON_INTERPRET=1 set in conftest)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tracetui.kernels import bench  # noqa: E402


def test_arguments_and_sweep():
    a = bench.parse_args([])
    assert (512, 768, 2048) in a.shapes and (2048, 768, 3072) in a.shapes and a.shapes[0] == (8192, 768, 3072)
    assert a.modes == ("default", "max-autotune-no-cudagraphs", "max-autotune")
    q = bench.parse_args(["--quick"])
    assert q.shapes == bench.QUICK and {512, 2048, 8192} == {s[0] for s in q.shapes}
    assert len(q.train_shapes) == 1
    c = bench.parse_args(["--shapes", "64x32x48,8x16x24", "--no-train", "--modes", "default"])
    assert c.shapes == [(64, 32, 48), (8, 16, 24)] and c.train_shapes == [] and c.modes == ("default",)
    plan = bench.sweep_plan(a)
    assert any("(64, 768, 3072) bf16 on Hopper -> cublas" in line for line in plan)
    assert any("(8192, 768, 3072) bf16 on Hopper -> tma" in line for line in plan)


@pytest.mark.parametrize("argv", [["--shapes", "8x16"], ["--shapes", "axbxc"], ["--modes", "fastest"]])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2


def test_cpu_check_runs_every_table(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(["--cpu-check", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert all(r["ok"] for r in doc["correctness"]) and len(doc["correctness"]) >= 20
    (mlp,), (train,) = doc["mlp"], doc["train"]
    assert mlp["errors"] == {} and train["errors"] == {}
    for name in ("eager", "triton", "fused", "fused_v5", "dual_tma", "dual_pointer", "dual_cublas"):
        assert mlp[f"{name}_us"] > 0 and mlp[f"{name}_cpu_us"] > 0
    for name in ("eager", "triton", "fused"):
        assert train[f"{name}_us"] > 0 and train["grad_rel_err"][name] <= 2e-2
    text = capsys.readouterr().out
    assert "Dispatch check" in text and "Train step fwd+bwd" in text and "done-when" in text
    assert bench.main(["--summary-from", str(out)]) == 0  # a run cut by a timeout still gets its tables
    again = capsys.readouterr().out
    assert again.strip() and again.strip() in text
