"""Index builds, an old tree against this one, run alternately (issue 34's "within noise").

    git archive OLD_COMMIT | (mkdir /tmp/old && tar -x -C /tmp/old)
    python -m tracetui.workloads.replicate tests/data/gloo_rank0.pt.trace.json.gz /tmp/g32 -n 32 --per-host 4
    python benchmarks/bench_index_ab.py /tmp/old /tmp/g32 [--rounds 4]

Each round runs, in a fresh process per tree, three ``build_index(workers=1)`` of the folder and
prints wall and CPU seconds; a busy machine moves the wall time, so compare the CPU time too.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import sys, time
from tracetui.jobs.index import build_index
t = time.perf_counter(); c = time.process_time()
for k in range(3):
    build_index([sys.argv[1]], sys.argv[2], workers=1)
print(time.perf_counter() - t, time.process_time() - c)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old", type=Path, help="the old tree (a checkout or git archive)")
    ap.add_argument("ranks", type=Path, help="a folder of rank files")
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    res: dict = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for side, tree in (("old", a.old.resolve()), ("new", ROOT)):
                r = subprocess.run([sys.executable, "-c", CODE, str(a.ranks), f"{tmp}/{side}.idx"], cwd=tree,
                                   capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)))
                wall, cpu = map(float, r.stdout.split()[-2:])
                res[side].append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
                print(side, i, f"wall {wall:.2f} s, CPU {cpu:.2f} s", flush=True)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
