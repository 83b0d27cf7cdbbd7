"""During a load, large arrays come from the malloc heap, and glibc's defaults come back after."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from tracetui.model import heap, load_trace

from tests.conftest import TRACES

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
    assert threading.current_thread() is threading.main_thread()  # the main arena is the brk heap
    outside = np.ones(BIG, dtype=np.uint8)
    assert not _in_heap(outside)
    del outside
    with heap.large_arrays_on_heap():
        with heap.large_arrays_on_heap():  # nested: still on, until the outer one leaves
            pass
        inside = np.ones(BIG, dtype=np.uint8)
        assert _in_heap(inside) and heap._depth == 1
        del inside
    assert heap._depth == 0
    after = np.ones(BIG, dtype=np.uint8)
    assert not _in_heap(after)  # the defaults are back


def test_a_load_leaves_the_defaults_even_when_it_fails(glibc, tmp_path):
    assert len(load_trace(TRACES / "mlp_eager.json.gz").store) > 0 and heap._depth == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(Exception):
        load_trace(bad)
    assert heap._depth == 0
    assert not _in_heap(np.ones(BIG, dtype=np.uint8))
