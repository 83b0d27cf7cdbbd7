"""The forked pool (``pool._forked``, the local default where fork exists): every result comes
back once, in any order, from both workers; a task's error, a killed worker, a worker stopped
mid-message and a consumer that gives up all end the map without a hang or a child left behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tracetui.jobs import pool
from tracetui.read.errors import TraceError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked pool needs fork")


@pytest.fixture
def forks(monkeypatch):
    """The pids the pool forks, to check that each was reaped (other tests' children may live)."""
    pids, real = [], os.fork

    def fork():
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(pool.os, "fork", fork)
    return pids


def _all_reaped(pids) -> bool:
    """Every one of ``pids`` has exited and been waited for by the pool (no process, not even a
    zombie)."""
    return bool(pids) and all(_gone(p) for p in pids)


def _gone(pid: int) -> bool:
    if os.path.isdir("/proc/self"):  # looks without reaping: a zombie keeps its /proc entry
        return not os.path.exists(f"/proc/{pid}")
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _pid_of(i: int, pause: float = 0.0):
    time.sleep(pause)
    return i, os.getpid(), os.environ.get("TRACETUI_PARALLEL")


def test_every_task_once_from_both_workers(forks):
    out = pool.run_map(_pid_of, [(i, 0.01) for i in range(40)], workers=2)
    assert [o[0] for o in out] == list(range(40))
    pids = {o[1] for o in out}
    assert len(pids) == 2 and os.getpid() not in pids  # two forked workers shared the tasks
    assert {o[2] for o in out} == {"0"}  # workers never fork again
    pool.settle()  # a finished map's children are reaped by a thread, off its caller's path
    assert _all_reaped(forks)


def _same(i: int) -> int:
    return i


def test_maps_back_to_back_never_share_a_counter(forks):
    """A finished map's children take one last look at the task counter on their way out; when
    the counter was a block of multiprocessing's heap, the next map reused it and an exiting
    child took one of its indices (22% of 300 back-to-back maps lost a task)."""
    for _ in range(100):
        assert pool.run_map(_same, [(i,) for i in range(4)], workers=2) == [0, 1, 2, 3]
    pool.settle()
    assert _all_reaped(forks)


def _fails_at(i: int, bad: int):
    if i == bad:
        raise TraceError(f"rank{i}.json", "not a trace")
    return i


def test_a_task_error_is_raised_with_its_traceback(forks):
    with pytest.raises(TraceError) as e:
        pool.run_map(_fails_at, [(i, 3) for i in range(8)], workers=2)
    assert str(e.value) == "rank3.json: not a trace"
    assert isinstance(e.value.__cause__, pool.RemoteTraceback) and "_fails_at" in str(e.value.__cause__)
    assert _all_reaped(forks)


class _Odd(Exception):
    def __init__(self, a, b):  # pickles, but cannot be rebuilt from its args
        super().__init__(a)


def _raises_odd(i: int):
    raise _Odd("odd failure", i)


def test_an_error_that_cannot_cross_processes_keeps_its_text(forks):
    with pytest.raises(RuntimeError, match="_Odd: odd failure"):
        pool.run_map(_raises_odd, [(i,) for i in range(2)], workers=2)
    assert _all_reaped(forks)


def _killed_at(i: int):
    if i == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def test_a_killed_worker_is_named_not_waited_for(forks):
    t0 = time.monotonic()
    with pytest.raises(pool.WorkerLost, match="SIGKILL"):
        pool.run_map(_killed_at, [(i,) for i in range(6)], workers=2)
    assert time.monotonic() - t0 < 10
    assert _all_reaped(forks)


def test_a_stop_ends_the_workers_now(forks):
    t0 = time.monotonic()
    with pytest.raises(pool.Stopped):
        for _ in pool.as_done(_pid_of, [(i, 5.0) for i in range(4)], workers=2,
                              should_stop=lambda: time.monotonic() - t0 > 0.3):
            pass
    assert time.monotonic() - t0 < 3  # not after the 5 s tasks
    assert _all_reaped(forks)


def _slow_after_first(i: int):
    time.sleep(0 if i == 0 else 5.0)
    return i


def test_a_consumer_that_gives_up_ends_the_workers(forks):
    t0 = time.monotonic()
    results = pool.as_done(_slow_after_first, [(i,) for i in range(4)], workers=2)
    assert next(results) == (0, 0)
    results.close()
    assert time.monotonic() - t0 < 3
    assert _all_reaped(forks)


CHILD = textwrap.dedent('''
    import os, struct, time
    from tracetui.jobs import pool

    def half_a_message(fn, tasks, counter, lock, w):
        """A worker that writes the start of a 1 MiB result, then stalls (stopped mid-send)."""
        os.write(w, struct.pack("<Q", 1 << 20) + b"only the start")
        time.sleep(60)

    pool._child = half_a_message
    t0 = time.monotonic()
    try:
        pool.run_map(int, [(0,), (1,)], workers=2, should_stop=lambda: time.monotonic() - t0 > 1.0)
    except pool.Stopped:
        try:
            os.waitpid(-1, os.WNOHANG)  # this process forked nothing else
            print("a child is left")
        except ChildProcessError:
            print("stopped", flush=True)
''')


def test_stopping_mid_message_does_not_hang():
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "stopped"
    assert time.monotonic() - t0 < 20


def _frozen_in_child() -> int:
    import gc
    return gc.get_freeze_count()


class _Node:
    pass


def test_workers_freeze_what_they_inherit_and_the_caller_is_left_alone(forks):
    """Each worker moves what it inherited out of its cyclic GC (its collections then never copy
    the pages it shares with the driver); the driver's GC is not touched: a cycle it dropped
    before the map, with other objects frozen by the caller (the app does), is still collected."""
    import gc
    import weakref
    assert all(n > 1000 for n in pool.run_map(_frozen_in_child, [(), ()], workers=2))
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        pool.run_map(_pid_of, [(i,) for i in range(4)], workers=2)
        assert gc.get_freeze_count() <= before  # nothing more frozen here
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_no_descriptor_or_child_is_left_by_any_ending(forks, monkeypatch):
    """A finished map, a failed task, a stop, and a fork that fails for the second worker (a pids
    limit): each leaves no open descriptor and no child."""
    before = _open_fds()
    pool.run_map(_pid_of, [(i,) for i in range(6)], workers=2)
    with pytest.raises(TraceError):
        pool.run_map(_fails_at, [(i, 1) for i in range(6)], workers=2)
    t0 = time.monotonic()
    with pytest.raises(pool.Stopped):
        pool.run_map(_pid_of, [(i, 5.0) for i in range(4)], workers=2, should_stop=lambda: time.monotonic() - t0 > 0.2)
    real, calls = pool.os.fork, []

    def second_fails():
        calls.append(1)
        if len(calls) == 2:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real()

    monkeypatch.setattr(pool.os, "fork", second_fails)
    with pytest.raises(BlockingIOError):
        pool.run_map(_pid_of, [(i,) for i in range(4)], workers=2)
    pool.settle()
    assert _open_fds() == before
    assert _all_reaped(forks)


SPAWN_DEFAULT = textwrap.dedent('''
    import multiprocessing as mp, sys
    mp.set_start_method("spawn")  # what torch users set (and Python 3.14's Linux default is forkserver)

    class Captured:  # what Textual puts in sys.stderr while the app runs
        def write(self, s): return len(s)
        def flush(self): pass
        def fileno(self): return -1

    from tracetui.jobs import pool
    real, sys.stderr = sys.stderr, Captured()
    try:
        out = pool.run_map(abs, [(-i,) for i in range(4)], workers=2)
    finally:
        sys.stderr = real
    print(out)
''')


def test_another_default_start_method_does_not_break_the_forked_pool():
    """The pool's lock comes from the fork context: the default context's registers with a
    resource-tracker process, which cannot start while Textual holds stderr (no descriptor)."""
    out = subprocess.run([sys.executable, "-c", SPAWN_DEFAULT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0, 1, 2, 3]"
