"""A process-wide setting that loads hold while they run: on as the first load in flight
enters, off as the last one leaves (the malloc heap mode, heap.py; the GIL's short switch
interval, together.py). Loads run in several threads at once (the app's workers, a diff's two
sides), so the holders are counted under a lock."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


class Held:
    """``with held():`` calls ``on()`` as the first holder enters and ``off()`` as the last one
    leaves; nests, and is safe across threads. A child forked while it is held (a decode helper,
    a rank pool's process) starts with no holder and a fresh lock (another thread may have held
    the parent's at the fork); ``in_child()``, when given, says what the child keeps of the
    setting (by default it keeps it as it was)."""

    def __init__(self, on: Callable[[], None], off: Callable[[], None], in_child: Callable[[], None] | None = None):
        self.on, self.off, self.in_child = on, off, in_child
        self.depth = 0
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        held, self.depth, self._lock = self.depth > 0, 0, threading.Lock()
        if held and self.in_child is not None:
            self.in_child()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        entered = False
        try:
            with self._lock:
                if not self.depth:
                    self.on()
                self.depth += 1
                entered = True
            yield
        finally:
            if entered:
                with self._lock:
                    self.depth -= 1
                    if not self.depth:
                        self.off()
