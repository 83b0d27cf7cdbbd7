"""The diff header on HTA's before/after pair, where B launches more kernels than A and its
memcpy/memset count per step is a mean over steps: 'launches saved -127' and '147 → 959.333' read
as typos. Counts are from the diff's JSON, which the header must restate, not reinterpret."""
from __future__ import annotations

import json

import pytest

from tracetui.cli.main import main

from tests.conftest import PEER

A, B = PEER / "trace_diff_control_control.json.gz", PEER / "trace_diff_test_test.json.gz"


@pytest.mark.skipif(not (A.is_file() and B.is_file()), reason="../shared/peer-traces absent")
def test_more_launches_and_mean_counts_read_plainly(capsys):
    capsys.readouterr()
    assert main(["diff", "--json", str(A), str(B)]) == 0
    j = json.loads(capsys.readouterr().out)
    t = j["totals"]
    assert t["kernels_b"] > t["kernels_a"] and t["launches_saved"] < 0
    assert main(["diff", str(A), str(B)]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("per step"))
    assert f"({-t['launches_saved']} more launches)" in head and "launches saved -" not in head, head
    mem = next(line for line in out.splitlines() if "memcpy/memset (not in the rows)" in line)
    b = j["b"]["memcpy_memset_per_step"]
    assert not float(b).is_integer()
    assert f"→ {b:,.1f} per step" in mem, mem
