"""Issue 43 item 8: Kineto's ``USDT: … profiler_start`` / ``profiler_stop`` lines leaked to the
terminal under ``record`` and ``gen``. They are dropped; every other line (the program's own
stderr, gen's progress) still comes through."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.record.test_record import TRAIN, record

pytest.importorskip("torch")


def test_drop_usdt_forwards_every_other_line():
    code = ("import os, sys\nfrom tracetui.quiet import drop_usdt\n"
            "with drop_usdt():\n"
            "    os.write(2, b'USDT:2026-12-06 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\\n')\n"
            "    os.write(2, b'kept 1\\n')\n    sys.stderr.write('kept 2\\n')\n    os.write(2, b'partial')\n"
            "os.write(2, b'\\nafter\\n')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "kept 1\nkept 2\npartial\nafter\n", r.stderr


def test_record_and_gen_print_no_usdt_lines(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN + "import sys; print('own stderr', file=sys.stderr)\n")
    r, out = record(tmp_path, sys.executable, "train.py")
    assert r.returncode == 0, r.stderr
    assert "USDT:" not in r.stderr + r.stdout, r.stderr
    assert "own stderr" in r.stderr  # the program's stderr is untouched
    g = subprocess.run([sys.executable, "-m", "tracetui", "gen", "linear", "--device", "cpu", "--batch", "8",
                        "-o", str(tmp_path / "lin.json.gz")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert g.returncode == 0, g.stderr
    assert "USDT:" not in g.stderr + g.stdout, g.stderr
    assert "[tracetui gen] step 5/5" in g.stderr
