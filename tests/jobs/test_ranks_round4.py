"""`tracetui ranks` on a folder with a rank outside the world size (issue 44, item 10: a regression,
``TypeError: 'str' object is not callable`` in jobs/placement.py where a local string shadowed
``spans``). The expected diagnostics are worked out here from the files' distributedInfo."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _rank_file(folder, rank, world, events, **top):
    doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}, "traceEvents": events, **top}
    (folder / f"host.rank{rank}.pt.trace.json").write_text(json.dumps(doc))
    return doc


def _events(ts=10):
    return [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 5}]


@pytest.mark.parametrize("layout", ["plain", "reported"])
def test_a_rank_outside_the_world_is_said_not_crashed(tmp_path, layout):
    docs = [_rank_file(tmp_path, 0, 1, _events(), **({"baseTimeNanoseconds": 2 ** 63 - 1} if layout == "reported" else {})),
            _rank_file(tmp_path, 1, 1, _events(ts="10" if layout == "reported" else 10))]
    r = subprocess.run([sys.executable, "-m", "tracetui", "ranks", "--json", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-2000:]
    world = docs[0]["distributedInfo"]["world_size"]
    outside = sorted(d["distributedInfo"]["rank"] for d in docs if d["distributedInfo"]["rank"] >= world)
    diags = json.loads(r.stdout)["diagnostics"]
    assert f"ranks {', '.join(map(str, outside))} are outside world size {world}" in diags, diags
