"""A trace of N kernels, each with its own name (issue 44.15: 10^6 distinct kernel names).

    python benchmarks/make_distinct_kernels.py OUT.json --kernels 200000

One ProfilerStep#1 annotation; per kernel a cudaLaunchKernel and its kernel
``void my_ns::kernel_<i><float, 128>(float*, int)`` (30 µs, one stream), linked by correlation.
Time the summary with ``/usr/bin/time python -m tracetui summary OUT.json --no-cache``.
"""
from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--kernels", type=int, default=200_000)
    a = ap.parse_args()
    n = a.kernels
    with open(a.out, "w") as f:
        f.write('{"traceEvents": [')
        f.write(json.dumps({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                            "ts": 0, "dur": n * 100 + 100}))
        for i in range(n):
            ts = i * 100
            f.write(", " + json.dumps({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                                       "tid": 1, "ts": ts + 10, "dur": 5, "args": {"correlation": i + 1}}))
            f.write(", " + json.dumps({"ph": "X", "cat": "kernel", "name": f"void my_ns::kernel_{i}<float, 128>(float*, int)",
                                       "pid": 0, "tid": 7, "ts": ts + 20, "dur": 30,
                                       "args": {"correlation": i + 1, "stream": 7, "device": 0}}))
        f.write("]}")


if __name__ == "__main__":
    main()
