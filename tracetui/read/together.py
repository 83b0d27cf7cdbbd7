"""Independent stages of a load at once, in threads, on the cores the load may use.

The model's stages after the decode (tree, rollups, step windows) are whole-array numpy work:
sorts, gathers, searches and elementwise loops, which release the GIL. On a 16-core host
(``benchmarks/bench_numpy_threads.py --threads 8``: numpy 2.5, 3M elements, 8 threads against
the same 8 calls in a row): gathers 5.3x, stable argsort 6.1x, searchsorted 4.1x, elementwise
5.8-6.8x; ``bincount`` (2.3-2.5x) and ``ufunc.at`` (0.7x) hold it. So stages that do not
need each other's output run side by side: the fork-based helpers (forked.py) would have to
send their arrays back, threads write into the parent's own. The decode's helpers are read
back side by side too: a pipe's read waits in the kernel, without the GIL.
"""
from __future__ import annotations

import sys
import threading
from typing import Callable, TypeVar

from tracetui.read.held import Held

T = TypeVar("T")


def together(calls: list[Callable[[], T]], threads: int = 1) -> list[T]:
    """``[call() for call in calls]``, run at once by up to ``threads`` threads, this one among
    them (all in this thread, in order, where that is 1: ``forked.cores`` says how many a load
    may use). Where no thread can be started (an address-space cap: each wants its stack), the
    ones there are, or this one alone, take every call. Once a call fails (Ctrl-C included) no
    further call starts; the error is raised here once the calls under way have ended, an
    interrupt before any other error, else the earliest call's: no stage outlives the load."""
    n = min(threads, len(calls))
    if n <= 1:
        return [call() for call in calls]
    out: list = [None] * len(calls)
    errors: list[tuple[int, BaseException]] = []
    todo = iter(range(len(calls)))
    lock = threading.Lock()

    def work() -> None:
        while not errors:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                out[i] = calls[i]()
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                errors.append((i, e))

    started = []
    try:
        for _ in range(n - 1):
            t = threading.Thread(target=work, name="tracetui-stage", daemon=True)
            try:
                t.start()
            except RuntimeError:  # "can't start new thread"
                break
            started.append(t)
        work()
    except BaseException as e:  # an interrupt between calls: stop the others, then raise it
        errors.append((-1, e))
    finally:
        for t in started:
            t.join()
    if errors:
        raise min(errors, key=lambda e: (isinstance(e[1], Exception), e[0]))[1]
    return out


HANDOFF_S = 0.0002
"""The GIL's switch interval while a load runs (Python's default: 5 ms). A stage thread that
comes back from a numpy step waits for the GIL while another thread runs Python (building a
dict, reading a helper's result); each such wait lasts up to the interval, and the stages make
thousands of numpy steps."""

_saved = [0.005]  # the interval set before the first load in flight


def _quick() -> None:
    _saved[0] = sys.getswitchinterval()
    sys.setswitchinterval(min(HANDOFF_S, _saved[0]))


def _back() -> None:
    sys.setswitchinterval(_saved[0])


quick_handoff = Held(_quick, _back, in_child=_back)
"""``with quick_handoff():`` the GIL changes hands after ``HANDOFF_S``; the interval set before
the first load in flight comes back when the last one leaves (a change made to it meanwhile
is undone), and in a child forked meanwhile."""
