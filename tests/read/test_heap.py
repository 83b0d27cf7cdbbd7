"""During a load, large arrays come from the malloc heap, and glibc's defaults come back after."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from tracetui.read import heap
from tracetui.model import load_trace

from tests.conftest import ROOT, TRACES

BIG = 48 << 20  # above glibc's largest mmap threshold (32 MiB): mmapped by default


def _in_heap(a: np.ndarray) -> bool:
    """Whether the array's buffer lies in the main arena's [heap] mapping (brk), not an mmap.
    The kernel may show the heap as several adjacent [heap] lines (after madvise/trim split it)."""
    addr = a.__array_interface__["data"][0]
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if lo <= addr < hi:
                    return True
    return False


@pytest.fixture
def glibc():
    if heap._glibc() is None:
        pytest.skip("not glibc: large_arrays_on_heap does nothing here")


def test_large_arrays_come_from_the_heap_only_inside(glibc):
    """Run in a fresh interpreter: in a process that earlier tests have used, a free 48 MB chunk
    left inside the heap serves the "outside" array from the heap whatever the mmap settings."""
    code = textwrap.dedent("""
        import threading
        import numpy as np
        from tracetui.read import heap
        from tests.read.test_heap import BIG, _in_heap
        assert threading.current_thread() is threading.main_thread()  # the main arena is the brk heap
        outside = np.ones(BIG, dtype=np.uint8)
        assert not _in_heap(outside)
        del outside
        with heap.large_arrays_on_heap():
            with heap.large_arrays_on_heap():  # nested: still on, until the outer one leaves
                pass
            inside = np.ones(BIG, dtype=np.uint8)
            assert _in_heap(inside) and heap.large_arrays_on_heap.depth == 1
            del inside
        assert heap.large_arrays_on_heap.depth == 0
        after = np.ones(BIG, dtype=np.uint8)
        assert not _in_heap(after)  # the defaults are back
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_a_load_leaves_the_defaults_even_when_it_fails(glibc, tmp_path):
    """In a fresh interpreter, for the reason given above."""
    code = textwrap.dedent(f"""
        import numpy as np
        import pytest
        from tracetui.read import heap
        from tracetui.model import load_trace
        from tests.read.test_heap import BIG, _in_heap
        from tests.conftest import TRACES
        from pathlib import Path
        assert len(load_trace(TRACES / "mlp_eager.json.gz").store) > 0 and heap.large_arrays_on_heap.depth == 0
        bad = Path({str(tmp_path / "bad.json")!r})
        bad.write_text("{{}}")
        with pytest.raises(Exception):
            load_trace(bad)
        assert heap.large_arrays_on_heap.depth == 0
        assert not _in_heap(np.ones(BIG, dtype=np.uint8))
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
