"""The diff verdict when A ran on the CPU only and B on the GPU (HTA's cpu_only rank against
trace_diff_test): A's figure is its compute ops' CPU time, B's its kernels' GPU time, so no change in
% exists. The headline read "B's step takes the same time as A's on the GPU (+0.0%)" above "device
0.0 → 124,354.0 µs" there, and "150.0% slower on the GPU" on the generated pair below (100 µs of
aten::add on the CPU against 250 µs of kernel). The per-step kernel time is summed from the JSON."""
from __future__ import annotations

import json

from tracetui.cli.main import main

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"


def _trace(path, gpu: bool) -> dict:
    """Two ProfilerSteps of one aten::add each; with ``gpu`` each launches a 250 µs kernel."""
    ev = []
    for s in range(2):
        t0, c = 1000 + 2000 * s, s + 1
        ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": 1500, "args": {}},
               {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 100,
                "args": {"External id": c, "Input Dims": [[1024], [1024]], "Input type": ["float", "float"]}}]
        if gpu:
            ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20, "dur": 20,
                    "args": {"correlation": c, "External id": c}},
                   {"ph": "X", "cat": "kernel", "name": ADD, "pid": 0, "tid": 7, "ts": t0 + 200, "dur": 250,
                    "args": {"correlation": c, "External id": c, "device": 0, "stream": 7}}]
    doc = {"traceEvents": ev, **({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]} if gpu else {})}
    path.write_text(json.dumps(doc))
    return doc


def _kernel_us_per_step(doc: dict) -> float:
    ev = doc["traceEvents"]
    n = sum(1 for e in ev if e["name"].startswith("ProfilerStep#"))
    return sum(e["dur"] for e in ev if e.get("cat") == "kernel") / n


def test_no_percentage_of_zero_gpu_time(tmp_path, capsys):
    a, b = _trace(tmp_path / "a.json", gpu=False), _trace(tmp_path / "b.json", gpu=True)
    ra, rb = _kernel_us_per_step(a), _kernel_us_per_step(b)
    assert ra == 0 and rb > 0
    capsys.readouterr()
    main(["diff", "--json", "--no-cache", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    v = json.loads(capsys.readouterr().out)["verdict"]
    assert v["device_change_pct"] is None, v
    head = v["line"].split(";")[0]
    assert "same time" not in head and "slower" not in head and "faster" not in head, v["line"]
    assert f"{rb:,.1f} µs of GPU work per step" in head, v["line"]


def test_same_zero_is_still_the_same(tmp_path, capsys):
    """The control: two CPU-only traces both at 0 GPU time keep their verdict (compute ops, 0.0%)."""
    _trace(tmp_path / "a.json", gpu=False)
    _trace(tmp_path / "b.json", gpu=False)
    capsys.readouterr()
    main(["diff", "--json", "--no-cache", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    v = json.loads(capsys.readouterr().out)["verdict"]
    assert v["device_change_pct"] is not None
