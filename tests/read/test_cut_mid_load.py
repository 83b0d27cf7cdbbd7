"""A trace cut short while it loads (rewritten by a new profiler run meanwhile): a one-line error
and exit status 2 (bad input, as every other), never the SIGBUS that reading a map past its file's new end raises."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.read.test_mapped import _write_trace

CUT = textwrap.dedent("""
    import os, sys
    from tracetui.read import source, split
    source.MMAP_MIN_BYTES = 1   # map it, as a trace of 16 MB or more
    split.MIN_BYTES = 0         # and decode it in pieces
    split.PIECE_BYTES = 64 << 10
    path, workers = sys.argv[1], sys.argv[2]
    real = split.build_store
    def build_store(*a, **k):   # the file is cut to a third once the first piece is decoded
        if os.path.getsize(path) > 100_000:
            os.truncate(path, os.path.getsize(path) // 3)
        return real(*a, **k)
    split.build_store = build_store
    from tracetui.cli.main import main
    sys.exit(main(["summary", path, "--no-cache", "--workers", workers]))
""")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_trace_cut_short_while_it_loads_is_one_line_and_exit_2(tmp_path, workers):
    p = tmp_path / "t.json"
    size = _write_trace(p, 3000)
    assert size > 300_000
    r = subprocess.run([sys.executable, "-c", CUT, str(p), workers], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode != -signal.SIGBUS, "the map was read past the file's end"
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracetui: error: "), r.stderr
    assert "changed while it was read" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert p.stat().st_size < size  # it was cut: the test did what it says
