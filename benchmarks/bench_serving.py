"""What serving labels and CUDA-graph checks cost in `summary`: the same generated traces through
`summary_dict` on this tree and on a baseline tree (another checkout of tracetui), in one run.

    python benchmarks/bench_serving.py --baseline /tmp/main_src [--steps 250000] [--rounds 2]

Two traces of N steps (3 events a step, as tests/model/test_window_figures.py's): ProfilerStep#N
around cudaLaunchKernel (no engine annotation, no graph: the cost every trace now pays), and
SGLang's step[DECODE bs=8] around cudaGraphLaunch, with every other step's kernel removed (the
labels, the phases and the incomplete steps all computed). Each figure is the best of ``rounds``
of CPU time (process_time) of summary_dict after load, in a fresh subprocess per tree.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
from tracetui.model import load_trace
from tracetui.report.summary import summary_dict
best = 1e9
for _ in range(int(sys.argv[2])):
    t = load_trace(sys.argv[1])
    t0 = time.process_time()
    d = summary_dict(t, top=0)
    best = min(best, time.process_time() - t0)
print(best, d["steps"])
"""


def write(path: Path, n: int, serving: bool) -> None:
    evs = []
    for i in range(n):
        t = i * 100
        name = "step[DECODE bs=8]" if serving else f"ProfilerStep#{i}"
        launch = "cudaGraphLaunch" if serving else "cudaLaunchKernel"
        evs += [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 90},
                {"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 1, "tid": 1, "ts": t + 20, "dur": 5,
                 "args": {"correlation": i + 1}}]
        if not serving or i % 2 == 0:
            evs.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 30, "dur": 20,
                        "args": {"correlation": i + 1, "stream": 7, "device": 0}})
    path.write_text(json.dumps({"traceEvents": evs}))


def run(src: Path, trace: Path, rounds: int) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(rounds)], env=env, cwd=tempfile.gettempdir(),
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of tracetui to compare against")
    ap.add_argument("--steps", type=int, default=250_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for serving in (False, True):
            p = Path(d) / f"{'serving' if serving else 'plain'}.json"
            write(p, a.steps, serving)
            base, n0 = run(a.baseline, p, a.rounds)
            mine, n1 = run(HERE, p, a.rounds)
            print(f"{p.stem:8s} {a.steps:,} steps: baseline {base:.2f} s ({n0} steps), this tree {mine:.2f} s "
                  f"({n1} steps), ratio {mine / base:.2f}")


if __name__ == "__main__":
    main()
