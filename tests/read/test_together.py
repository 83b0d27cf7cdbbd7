"""Stages side by side in threads (read/together.py) and how many a load may use (forked.cores)."""
from __future__ import annotations

import threading
import time

import pytest

from tracetui.read import forked
from tracetui.read.together import together


def test_results_come_back_in_the_order_of_the_calls():
    calls = [lambda d=d, i=i: (time.sleep(d), i)[1] for i, d in enumerate([0.05, 0.0, 0.02, 0.01])]
    assert together(calls, 4) == [0, 1, 2, 3]


def test_the_calls_run_at_once():
    """Four calls that each wait for all four to have started: in a row they would never end."""
    gate = threading.Barrier(4, timeout=10)
    assert together([lambda i=i: (gate.wait(), i)[1] for i in range(4)], 4) == [0, 1, 2, 3]


def test_one_thread_runs_them_here_in_order():
    seen = []
    me = threading.get_ident()
    together([lambda i=i: seen.append((i, threading.get_ident())) for i in range(3)], 1)
    assert seen == [(0, me), (1, me), (2, me)]


def test_an_error_is_raised_after_the_calls_under_way_have_ended():
    ended = []
    both = threading.Barrier(2, timeout=10)

    def slow():
        both.wait()
        time.sleep(0.1)
        ended.append("slow")

    def bad():
        both.wait()
        raise ValueError("stage failed")

    with pytest.raises(ValueError, match="stage failed"):
        together([bad, slow], 2)
    assert ended == ["slow"]  # no stage outlives the load that started it


def test_cores_follow_the_workers_and_the_switches(monkeypatch):
    monkeypatch.delenv("TRACETUI_PARALLEL", raising=False)
    monkeypatch.setattr(forked, "available", lambda: True)
    assert forked.cores(5) == 5
    assert forked.cores(1) == 1
    monkeypatch.setenv(forked.WORKERS_ENV, "3")
    assert forked.cores(None) == 3
    monkeypatch.setattr(forked, "available", lambda: False)  # one CPU, TRACETUI_PARALLEL=0, serial()
    assert forked.cores(8) == 1


def test_serial_blocks_keep_a_load_on_one_core(monkeypatch):
    monkeypatch.delenv("TRACETUI_PARALLEL", raising=False)
    monkeypatch.setattr(forked.os, "cpu_count", lambda: 4)
    with forked.serial():
        assert forked.cores(8) == 1
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    assert forked.cores(8) == 1


def test_without_threads_to_start_this_one_takes_every_call(monkeypatch):
    """Under an address-space cap a thread's stack cannot be had: the calls still all run, once."""
    import tracetui.read.together as mod

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(mod.threading.Thread, "start", no_thread)
    ran = []
    assert together([lambda i=i: ran.append(i) or i for i in range(5)], 4) == [0, 1, 2, 3, 4]
    assert sorted(ran) == [0, 1, 2, 3, 4]


def test_after_a_failure_no_further_call_starts():
    """A failed stage (or Ctrl-C, which arrives as an exception in the stage it interrupts) stops
    the load: the calls not yet started are left, not run to the end first."""
    ran = []
    gate = threading.Event()

    def bad():
        gate.wait(5)
        raise KeyboardInterrupt

    def slow(i):
        gate.set()
        time.sleep(0.2)
        ran.append(i)

    calls = [bad] + [lambda i=i: slow(i) for i in range(6)]
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        together(calls, 2)
    assert len(ran) <= 2 and time.perf_counter() - t0 < 1.0  # in a row the six would take 1.2 s


def test_an_interrupt_is_raised_before_an_error():
    both = threading.Barrier(2, timeout=10)

    def error():
        both.wait()
        raise ValueError("stage failed")

    def interrupt():
        both.wait()
        time.sleep(0.05)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        together([error, interrupt], 2)


def test_quick_handoff_nests_across_threads_and_puts_the_interval_back():
    """Loads in two threads overlap: the short interval holds until the last one leaves, then
    the interval set before comes back (not the short one, not Python's default)."""
    import sys
    import threading

    from tracetui.read.together import HANDOFF_S, quick_handoff

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.003)
    try:
        inside, release = threading.Event(), threading.Event()

        def load() -> None:
            with quick_handoff():
                inside.set()
                release.wait(5)

        t = threading.Thread(target=load)
        with quick_handoff():
            t.start()
            inside.wait(5)
            assert abs(sys.getswitchinterval() - HANDOFF_S) < 1e-9
        assert abs(sys.getswitchinterval() - HANDOFF_S) < 1e-9  # the other load is still in flight
        release.set()
        t.join(5)
        assert abs(sys.getswitchinterval() - 0.003) < 1e-9
    finally:
        sys.setswitchinterval(before)


def test_a_load_runs_with_the_short_interval(monkeypatch):
    import sys

    from tracetui.model import trace as trace_mod
    from tracetui.read.together import HANDOFF_S
    from tests.conftest import TRACES

    seen = []
    for stage in ("decode_store", "link_tree"):  # the decode and the model's stages
        real = getattr(trace_mod, stage)
        monkeypatch.setattr(trace_mod, stage, lambda *a, real=real, **k: seen.append(sys.getswitchinterval()) or real(*a, **k))
    before = sys.getswitchinterval()
    trace_mod.load_trace(TRACES / "linear_eager.json.gz")
    assert len(seen) == 2 and all(abs(s - min(HANDOFF_S, before)) < 1e-9 for s in seen)
    assert sys.getswitchinterval() == before


def test_a_child_forked_during_a_load_starts_with_no_load_in_flight():
    """A helper forked while a load runs (its lock possibly held by another thread) gets a fresh
    lock, no depth, and the interval from before the load: its own loads then put it back."""
    import os
    import sys

    from tracetui.read import together as tg

    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    before = sys.getswitchinterval()
    with tg.quick_handoff():
        tg.quick_handoff._lock.acquire()  # as if another thread held it at the fork
        try:
            pid = os.fork()
            if pid == 0:  # the child: report by exit status only
                ok = tg.quick_handoff.depth == 0 and abs(sys.getswitchinterval() - before) < 1e-9
                with tg.quick_handoff():
                    ok = ok and abs(sys.getswitchinterval() - min(tg.HANDOFF_S, before)) < 1e-9
                ok = ok and abs(sys.getswitchinterval() - before) < 1e-9
                os._exit(0 if ok else 1)
        finally:
            tg.quick_handoff._lock.release()
        for _ in range(200):  # a child stuck on the parent's held lock is killed, and fails the test
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the lock it inherited")
    assert os.waitstatus_to_exitcode(status) == 0
    assert sys.getswitchinterval() == before
