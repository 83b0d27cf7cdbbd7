"""read/held.py: a setting on while any load holds it (the heap mode, the GIL's interval)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from tracetui.read.held import Held


def _counted():
    log = []
    return log, Held(lambda: log.append("on"), lambda: log.append("off"))


def test_on_at_the_first_holder_off_after_the_last_across_threads():
    log, held = _counted()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with held():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with held():
        with held():  # nested in one thread
            t.start()
            inside.wait(5)
    assert log == ["on"] and held.depth == 1  # the other thread still holds it
    release.set()
    t.join(5)
    assert log == ["on", "off"] and held.depth == 0


def test_a_failing_on_leaves_nothing_held():
    calls = []

    def on() -> None:
        raise MemoryError

    held = Held(on, lambda: calls.append("off"))
    with pytest.raises(MemoryError):
        with held():
            pass
    assert held.depth == 0 and calls == []


def test_an_error_inside_still_lets_go():
    log, held = _counted()
    with pytest.raises(KeyError):
        with held():
            raise KeyError("x")
    assert log == ["on", "off"] and held.depth == 0


def test_a_child_forked_while_held_starts_with_no_holder_and_a_fresh_lock():
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    kept = []
    held = Held(lambda: None, lambda: None, in_child=lambda: kept.append(1))
    with held():
        held._lock.acquire()  # as if another thread held it at the fork
        try:
            pid = os.fork()
            if pid == 0:
                ok = held.depth == 0 and kept == [1]
                with held():
                    ok = ok and held.depth == 1
                os._exit(0 if ok and held.depth == 0 else 1)
        finally:
            held._lock.release()
    for _ in range(200):  # a child stuck on the inherited lock is killed, and fails the test
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the lock it inherited")
    assert os.waitstatus_to_exitcode(status) == 0 and held.depth == 0
