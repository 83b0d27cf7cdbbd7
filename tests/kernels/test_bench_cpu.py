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


# --- issue 33: the bench always finishes, and its verdicts come from the JSON alone -----------

from pathlib import Path  # noqa: E402

from tracetui.kernels import bench_report  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_a_failing_case_is_a_fail_row_and_the_tables_still_print(tmp_path, capsys, monkeypatch):
    """The H100's fp32 crash, replayed on the CPU: the pointer path raises OutOfResources when
    forced. The check records FAIL rows with the error, every table prints, exit bit 1 is set,
    and --summary-from prints the same verdicts and returns the same code."""
    class OutOfResources(Exception):
        pass
    real = bench.packed

    def packed(wg, wu, path=None):
        p = real(wg, wu, path)
        if path == "pointer" and wg.dtype == torch.float32:
            def boom(*a, **k):
                raise OutOfResources("out of resource: shared memory, Required: 294912, Hardware limit: 232448")
            return boom
        return p
    monkeypatch.setattr(bench, "packed", packed)
    out = tmp_path / "bench.json"
    code = bench.main(["--cpu-check", "--json", str(out)])
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    bad = [r for r in doc["correctness"] if not r["ok"]]
    assert bad and all(r["kernel"] == "PackedGeGLU pointer" and r["dtype"] == "torch.float32" for r in bad)
    assert all("OutOfResources" in r["error"] and "294912" in r["error"] for r in bad)
    assert len(bad) == 3  # the three fp32 GEMM shapes of the small check
    assert code & bench_report.EXIT_CORRECTNESS
    assert "Dispatch check" in text and "Train step fwd+bwd" in text and "Issue 33 done-when" in text
    assert "FAIL PackedGeGLU pointer" in text and "FAIL  correctness: every case passes" in text
    assert bench.main(["--summary-from", str(out)]) == code
    assert "FAIL  correctness" in capsys.readouterr().out


def synthetic(**train):
    """A hand-written run: numbers chosen so each verdict's answer is known without the code."""
    fwd = {"shape": [8192, 768, 3072], "flop": 6 * 8192 * 768 * 3072, "errors": {}, "eager_us": 250.0,
           "compile_default_us": 240.0, "fused_us": 180.0, "dispatch": "tma",
           "dual_tma_us": 120.0, "dual_pointer_us": 150.0, "dual_cublas_us": 155.0}
    small = {"shape": [512, 768, 2048], "flop": 1, "errors": {}, "eager_us": 30.0, "compile_default_us": 40.0,
             "fused_us": 25.0, "dispatch": "pointer", "dual_tma_us": 18.0, "dual_pointer_us": 15.0, "dual_cublas_us": 16.0}
    tiny = {"shape": [64, 768, 3072], "flop": 1, "errors": {}, "eager_us": 20.0, "compile_default_us": 40.0,
            "fused_us": 15.0, "dispatch": "cublas", "dual_tma_us": 12.0, "dual_pointer_us": 11.0, "dual_cublas_us": 9.0}
    tr = [{"shape": list(s), "errors": {}, "eager_us": 600.0, "compile_default_us": 580.0, "triton_us": 650.0,
           "fused_us": us, "eager_cpu_us": 500.0, "fused_cpu_us": cpu, "compile_default_cpu_us": 1.0,
           "triton_cpu_us": 1.0} for s, (us, cpu) in train.items()]
    corr = [{"kernel": "PackedGeGLU dispatch", "dtype": "torch.bfloat16", "shape": [m, 768, 3072], "rel_err": 1e-3,
             "ok": True} for m in (1, 37, 64)]
    return {"device": "NVIDIA H200", "modes": ["default"], "floors": {"matmul_bf16_TFLOPs": 700.0},
            "correctness": corr, "mlp": [fwd, small, tiny], "train": tr}


def test_summary_from_prints_the_done_when_from_the_json(tmp_path, capsys):
    # 580 / 500 = 1.16 >= 1.15 at 8192; 580 / 510 = 1.137 < 1.15 at 2048 (and CPU above eager's there)
    doc = synthetic(**{"(8192, 768, 3072)": (500.0, 400.0), "(2048, 768, 3072)": (510.0, 520.0)})
    doc["train"][0]["shape"], doc["train"][1]["shape"] = [8192, 768, 3072], [2048, 768, 3072]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    code = bench.main(["--summary-from", str(path)])
    text = capsys.readouterr().out
    assert "PASS  correctness: every case passes (3 cases, 0 FAIL" in text
    assert "PASS  correctness covers m = 1, 37, 64" in text
    assert "PASS  forward (8192, 768, 3072)" in text and "PASS  forward (512, 768, 2048)" in text
    assert f"fused >= 1.3x best compile ({240 / 180:.3f}x)" in text  # 1.333: PASS
    rate = 6 * 8192 * 768 * 3072 / 180.0 / 1e6
    assert rate >= 0.85 * 700  # 644 TFLOP/s: the verdict must say PASS
    assert f"PASS  forward default shape: fused >= 85% of matmul rate ({rate:.0f} of 700 TFLOP/s" in text
    assert "PASS  train (8192, 768, 3072): fused >= 1.15x best of eager, compile modes, triton (1.160x)" in text
    assert "FAIL  train (2048, 768, 3072): fused >= 1.15x best of eager, compile modes, triton (1.137x)" in text
    assert "FAIL  train (2048, 768, 3072): fused CPU issue <= eager's (520.0 vs 500.0 µs)" in text
    assert code == bench_report.EXIT_TARGETS
    doc["train"][1]["errors"] = {"fused": "OutOfResources: ..."}
    path.write_text(json.dumps(doc))
    assert bench.main(["--summary-from", str(path)]) == bench_report.EXIT_TARGETS | bench_report.EXIT_ERRORS
    assert "== Errors" in capsys.readouterr().out


def test_thresholds_come_from_the_dispatch_check():
    doc = synthetic()  # M=64 cuBLAS 9.0 fastest, M=512 pointer 15.0, M=8192 TMA 120.0
    th = bench_report.thresholds_from(doc)
    assert th["cublas_max_m"] == 64 and th["pointer_max_m"] == 512
    doc["mlp"][2]["dual_tma_us"] = 1.0  # TMA fastest at M=64: neither cuBLAS nor pointer has a leading run
    assert bench_report.thresholds_from(doc)["cublas_max_m"] is None


def test_the_rule_table_records_the_run_that_set_its_threshold():
    from tracetui.kernels.fused import DISPATCH_THRESHOLDS, POINTER_MAX_M
    run = DOCS / "bench_h200_v7.json"
    if not run.exists():
        pytest.skip("docs/bench_h200_v7.json is not in this checkout")
    doc = json.loads(run.read_text())
    # the raw numbers of that run, read here: pointer fastest at 512, TMA at 2048 and 8192
    by_m = {r["shape"][0]: r for r in doc["mlp"]}
    assert by_m[512]["dual_pointer_us"] < min(by_m[512]["dual_tma_us"], by_m[512]["dual_cublas_us"])
    assert by_m[2048]["dual_tma_us"] < by_m[2048]["dual_pointer_us"]
    assert bench_report.thresholds_from(doc)["pointer_max_m"] == POINTER_MAX_M == 512
    assert "bench_h200_v7.json" in DISPATCH_THRESHOLDS["pointer_source"]
    assert "not measured" in DISPATCH_THRESHOLDS["cublas_source"]  # no run timed M <= 64: said so
