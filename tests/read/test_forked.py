"""The fork helper hands back exactly what the child computed, or None."""
from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from tracetui.read import forked

from tests.conftest import reaped

pytestmark = pytest.mark.skipif(not forked.available(), reason="needs fork and two cores")


def _value():
    return {"a": np.arange(3_000_000, dtype=np.int64), "names": [f"k{i}" for i in range(50_000)]}


def test_a_large_value_arrives_intact():
    p = forked.spawn(_value)  # ~24 MB pickled: many pipe buffers' worth
    got = p.result()
    want = _value()
    assert np.array_equal(got["a"], want["a"]) and got["names"] == want["names"]
    assert reaped(p.pid)


def test_arrays_of_every_layout_arrive_intact():
    """Columns travel out of band (their bytes straight from the array): contiguous, strided,
    Fortran-ordered, empty, object and bytes arrays, and a value with no array at all."""
    def value():
        a = np.arange(2_000_000, dtype=np.int64)
        return {"strided": a[::3], "fortran": np.asfortranarray(a[:600].reshape(20, 30)), "empty": a[:0],
                "objects": np.array(["3", 3, None], dtype=object), "bytes": np.array([b"ab", b"c"]),
                "int8": (a % 7).astype(np.int8), "plain": ("x", 1.5, [1, 2])}

    got, want = forked.spawn(value).result(), value()
    assert got.keys() == want.keys() and got["plain"] == want["plain"]
    for k in set(want) - {"plain"}:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert got[k].tolist() == want[k].tolist(), k
    assert forked.spawn(lambda: "no arrays").result() == "no arrays"


def _owner(a):
    """What finally holds an array's bytes (arrays' bases and memoryviews' objects followed down)."""
    while True:
        nxt = a.obj if isinstance(a, memoryview) else getattr(a, "base", None)
        if nxt is None:
            return a
        a = nxt


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no in-memory files here")
def test_large_buffers_come_through_an_in_memory_file_without_a_copy():
    """From SHARED_MIN_BYTES of columns the child writes them to a file the parent maps: the
    arrays are views of that mapping (no copy), writable as before, and no descriptor is left."""
    before = _fds()
    want = _value()
    p = forked.spawn(_value)
    got = p.result()
    assert np.array_equal(got["a"], want["a"]) and got["names"] == want["names"]
    assert isinstance(_owner(got["a"]), mmap.mmap)  # a view of the child's file, not a copy through the pipe
    got["a"][0] = -1  # private to this process: a later join may write its pieces in place
    assert got["a"][0] == -1 and reaped(p.pid)
    small = forked.spawn(lambda: np.arange(10)).result()  # below the threshold: the pipe
    assert small.tolist() == list(range(10)) and not isinstance(_owner(small), mmap.mmap)
    del got
    assert _fds() == before


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no in-memory files here")
def test_a_child_that_dies_after_writing_its_file_gives_none():
    def dies():
        real = forked.write_value

        def then_dies(f, value, shared=None):  # the buffers in the file, the header never sent
            forked._write_file(shared, [memoryview(np.arange(1 << 18).tobytes())])
            os._exit(0)
        forked.write_value = then_dies  # in the forked child only
        return real

    before = _fds()
    p = forked.spawn(dies)
    assert p.result() is None and reaped(p.pid)
    p = forked.spawn(lambda: __import__("time").sleep(30))
    p.cancel()
    assert reaped(p.pid) and _fds() == before


def test_a_child_that_dies_mid_value_gives_none():
    def dies():
        def half(f, value):  # the header and part of the pickle, then the child is gone
            f.write(forked._HEAD.pack(1000, 0, 0) + b"x" * 10)
            f.flush()
            os._exit(0)
        forked.write_value = half  # in the forked child only: the parent's module is untouched
        return np.arange(10)

    p = forked.spawn(dies)
    assert p.result() is None and reaped(p.pid)
    assert forked.spawn(lambda: 7).result() == 7


def test_a_failing_or_cancelled_child_gives_none():
    def fails():
        raise RuntimeError("no")

    p = forked.spawn(fails)
    assert p.result() is None and reaped(p.pid)
    p = forked.spawn(lambda: __import__("time").sleep(30))
    p.cancel()
    assert reaped(p.pid) and p.result() is None


def test_beside_runs_both_and_retries_a_failed_child_here():
    calls = []

    def child():
        if os.getpid() != parent:
            raise MemoryError
        calls.append("here")
        return 1

    parent = os.getpid()
    assert forked.beside(child, lambda: 2) == (1, 2) and calls == ["here"]
    assert forked.beside(child, lambda: 2, retry=False) == (None, 2)


def test_serial_is_per_thread():
    """A one-worker map in one thread (``serial()``) leaves another thread's loads free to fork."""
    import threading
    from tracetui.read import forked
    if not forked.available():
        pytest.skip("no fork-based parallelism here")
    inside, seen = threading.Event(), []
    release = threading.Event()

    def one_worker_map():
        with forked.serial():
            seen.append(forked.available())
            inside.set()
            release.wait(5)

    t = threading.Thread(target=one_worker_map)
    t.start()
    inside.wait(5)
    seen.append(forked.available())
    release.set()
    t.join()
    assert seen == [False, True] and forked.available()


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no in-memory files here")
def test_columns_in_the_file_start_aligned_and_a_full_file_falls_back_to_the_pipe():
    """Each buffer starts at an ALIGN boundary (a column after an odd-length one was unaligned);
    a file that takes no more (ENOSPC under a memory limit) sends the value through the pipe."""
    def value():
        return [np.arange(3, dtype=np.int8), np.arange(1 << 18, dtype=np.int64), np.arange(1 << 17, dtype=np.int32),
                np.arange(5, dtype=np.int8), np.zeros(0, dtype=np.int64)]  # an empty last one starts past the file's end

    got = forked.spawn(value).result()
    assert all(a.flags.aligned and a.ctypes.data % forked.ALIGN == 0 for a in got if a.size)
    assert [a.tolist() for a in got] == [a.tolist() for a in value()] and isinstance(_owner(got[1]), mmap.mmap)

    def full_file():
        def no_space(*a):
            raise OSError(28, "No space left on device")
        os.pwrite = no_space  # in the forked child only
        return value()

    got = forked.spawn(full_file).result()
    assert [a.tolist() for a in got] == [a.tolist() for a in value()]
    assert not isinstance(_owner(got[1]), mmap.mmap)  # through the pipe
