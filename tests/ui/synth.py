"""A Kineto-shaped trace made in the test: steps on the main thread, the backward on
``pt_autograd_0``, kernels on two streams, GPU user annotations, one NCCL kernel.

Every event is written as Kineto does (complete events, µs floats, correlation and External id
in args), so the tests' references read the same JSON the app loads.
"""
from __future__ import annotations

import json
from pathlib import Path

PID, MAIN, AUTOGRAD = 100, 100, 200
S_FWD, S_BWD = 7, 20


def make(path: Path, steps: int = 3, adds: int = 20) -> dict:
    """Write the trace to ``path``; returns the document (the tests' reference reads it)."""
    ev = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": AUTOGRAD, "args": {"name": "pt_autograd_0"}},
          {"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN, "args": {"name": "thread 100 (python)"}}]
    ids = iter(range(1, 10**6))

    def x(cat, name, tid, ts, dur, pid=PID, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": float(ts), "dur": float(dur),
                   "args": args})

    def launch(tid, op_ext, ts, kname, kts, kdur, stream):
        c = next(ids)
        x("cuda_runtime", "cudaLaunchKernel", tid, ts, 6, correlation=c, **{"External id": op_ext})
        x("kernel", kname, stream, kts, kdur, pid=0, device=0, stream=stream, correlation=c,
          **{"External id": op_ext})

    for k in range(steps):
        t = 1000.0 + k * 2000
        x("user_annotation", f"ProfilerStep#{k}", MAIN, t, 1500)
        x("user_annotation", "forward", MAIN, t + 10, 400)
        x("gpu_user_annotation", "forward", S_FWD, t + 70, 300, pid=0)
        e = next(ids)
        x("cpu_op", "aten::linear", MAIN, t + 30, 100, **{"External id": e})
        e2 = next(ids)
        x("cpu_op", "aten::addmm", MAIN, t + 40, 80, **{"External id": e2})
        launch(MAIN, e2, t + 50, "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_TNT", t + 70, 130, S_FWD)
        e = next(ids)
        x("cpu_op", "aten::relu", MAIN, t + 150, 50, **{"External id": e})
        launch(MAIN, e, t + 160, "void at::native::vectorized_elementwise_kernel<4, at::native::relu>(int)",
               t + 205, 10, S_FWD)
        for i in range(adds):
            e = next(ids)
            x("cpu_op", "aten::add", MAIN, t + 220 + i * 8, 6, **{"External id": e})
            launch(MAIN, e, t + 220.5 + i * 8, "void at::native::vectorized_elementwise_kernel<4, at::native::add>(int)",
                   t + 230 + i * 8, 2, S_FWD)
        e = next(ids)
        x("cpu_op", "AddmmBackward0", AUTOGRAD, t + 450, 250, **{"External id": e})
        e2 = next(ids)
        x("cpu_op", "aten::mm", AUTOGRAD, t + 460, 140, **{"External id": e2})
        launch(AUTOGRAD, e2, t + 470, "nvjet_sm90_tst_64x64_64x4_1x2_h_bz_TNN", t + 500, 150, S_BWD)
        e = next(ids)
        x("cpu_op", "c10d::allreduce_", AUTOGRAD, t + 640, 30, **{"External id": e})
        launch(AUTOGRAD, e, t + 645, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
               t + 660, 240, S_BWD)
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": ev}
    Path(path).write_text(json.dumps(doc))
    return doc
