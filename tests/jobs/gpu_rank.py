"""One synthetic GPU rank's events, written as torch's Kineto exporter lays them out: ops on the
main thread, each kernel under its ``cudaLaunchKernel`` by correlation and External id (shared by
the tests that build NCCL ranks: test_seq_num.py, test_order_kinds.py)."""
from __future__ import annotations

import json
from pathlib import Path

PID, MAIN = 10, 10


class GpuRank:
    """Events of one rank; ``x`` adds a complete event, ``launch`` an op, its runtime call and
    the kernel it launches on ``stream``; ``write`` the document with its distributedInfo."""

    def __init__(self, stream: int):
        self.ev: list[dict] = []
        self.stream = stream
        self._corr = iter(range(1, 10**6))

    def x(self, cat, name, tid, ts, dur, pid=PID, **args) -> None:
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
                        "dur": round(dur, 3), "args": args})

    def launch(self, op, ts, kn, kts, kdur, **kargs) -> None:
        c = next(self._corr)
        self.x("cpu_op", op, MAIN, ts - 5, 20, **{"External id": c})
        self.x("cuda_runtime", "cudaLaunchKernel", MAIN, ts, 6, correlation=c, **{"External id": c})
        self.x("kernel", kn, self.stream, kts, kdur, pid=0, device=0, stream=self.stream, correlation=c,
               **{"External id": c}, **kargs)

    def write(self, path: Path, rank: int, world: int) -> dict:
        doc = {"distributedInfo": {"rank": rank, "world_size": world, "backend": "nccl"}, "host_name": "h",
               "baseTimeNanoseconds": 1_700_000_000_000_000_000,
               "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": self.ev}
        path.write_text(json.dumps(doc))
        return doc
