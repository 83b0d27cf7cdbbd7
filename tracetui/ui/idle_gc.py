"""The cyclic GC's full collections while the user pauses, not inside a key.

Textual makes cyclic garbage on every frame (a Strip caches itself in its own caches), ~18k
objects per view switch on a 270k-event trace. Python collects it in full collections that
land in whatever key is running: 5-28 ms of the worst key of every kind in bench_memory.py
(measured with gc.callbacks). Here the automatic full collections come ``DEFER`` times later
than Python's default, and one runs instead once no input came for ``IDLE_S``, if one was due
(as many young collections as Python waits for, ``threshold2``). Young collections (gen 0 and 1)
are unchanged: they are short and collect most cycles. Keys typed faster than ``IDLE_S`` apart
(held arrows, a benchmark) defer it; at ``SOON`` times the usual count one runs right after a
key's frame, before the garbage piles up (deferred 10x it took 55 ms; 3x: 20-27 ms; 1x: 5-15 ms).
"""
from __future__ import annotations

import gc

IDLE_S = 0.3
"""No key or mouse press for this long: the user is reading, a collection goes unnoticed."""
DEFER = 10
"""Automatic full collections wait this many times longer than Python's default."""
SOON = 2
"""Without a pause, a full collection runs after the frame of the key that finds this many
times Python's count due."""


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
        if gc.get_count()[2] >= self.saved[2] * SOON:
            self.app.call_after_refresh(self._due, SOON)

    def _idle(self) -> None:
        self._timer = None
        self._due(1)

    def _due(self, times: int) -> None:
        if self.saved is not None and gc.get_count()[2] >= self.saved[2] * times:
            gc.collect()
