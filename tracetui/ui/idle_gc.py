"""The cyclic GC's full collections after a key's frame or while the user pauses, not inside a key.

Textual makes cyclic garbage on every frame (a Strip caches itself in its own caches), ~18k
objects per view switch on a 270k-event trace. Python collects it in full collections that
land in whatever key is running, before its frame: 5-28 ms of the worst key of every kind in
bench_memory.py (measured with gc.callbacks). Here Python's automatic full collections come
``DEFER`` times later (a safety net), and one runs as soon as Python would have wanted one (as
many young collections as ``threshold2``) but at a moment nobody waits for: right after the
frame of the key that finds it due, or once no input came for ``IDLE_S``. Young collections
(gen 0 and 1) are unchanged: they are short and collect most cycles. Collecting only in pauses
(deferring up to 10x under keys pressed back to back) made them 20-55 ms each, against 5-20.
"""
from __future__ import annotations

import gc

IDLE_S = 0.3
"""No key or mouse press for this long: the user is reading, a collection goes unnoticed."""
DEFER = 10
"""Automatic full collections wait this many times longer than Python's default."""


class IdleCollector:
    """Installed by the app on mount (``install``), removed on unmount (``remove``); ``input``
    is called on every key and mouse press."""

    def __init__(self, app) -> None:
        self.app = app
        self.saved: tuple[int, int, int] | None = None
        self._timer = None

    def install(self) -> None:
        if self.saved is None:
            self.saved = gc.get_threshold()
            t0, t1, t2 = self.saved
            gc.set_threshold(t0, t1, t2 * DEFER)

    def remove(self) -> None:
        if self.saved is not None:
            gc.set_threshold(*self.saved)
            self.saved = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def input(self) -> None:
        if self.saved is None:
            return
        if self._timer is None:
            self._timer = self.app.set_timer(IDLE_S, self._idle, name="idle-gc")
        else:
            self._timer.reset()
        if self._is_due():
            self.app.call_after_refresh(self._collect)

    def _idle(self) -> None:
        self._timer = None
        self._collect()

    def _is_due(self) -> bool:
        return self.saved is not None and gc.get_count()[2] >= self.saved[2]

    def _collect(self) -> None:
        if self._is_due():
            gc.collect()


def keep_out_of_gc() -> None:
    """Move everything alive now (the loaded trace) out of the cyclic GC's scans.

    Full collections took 63-70 ms on a 270k-event trace and landed in about one jump in
    eight (measured with gc.callbacks). The loaded data has no cycles to collect, and frozen
    objects are still freed by reference counting when the trace is closed.
    """
    gc.freeze()


def release_frozen() -> None:
    """A screen holding a trace closed: everything frozen goes back under the cyclic GC, whose
    next full collection frees the closed screen's widget cycles and with them its trace (frozen,
    they were never freed: a rank opened from the job view and closed leaked its whole trace).
    What is still alive is frozen again after the next load."""
    gc.unfreeze()
