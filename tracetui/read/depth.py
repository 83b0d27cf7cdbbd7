"""The JSON decoder's nesting limit, the same in every process state.

msgspec counts nesting against the interpreter's recursion limit, and other code raises that limit
for good: torch.compile's ``compile_fx`` sets ``max(limit, 2000)`` and never restores it. A file
nested 1,200 levels deep then loaded after a compile in the same process and was refused before
one (the flaky ``test_json_nested_too_deep_is_one_line`` in a full test run), and a limit raised
much higher lets a deep enough file overflow the C stack instead of being refused. Decoding runs
under Python's default limit, whatever the process set, and puts the process's limit back after.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

DECODE_RECURSION_LIMIT = 1000
"""Python's default recursion limit: nesting past ~990 levels is refused (``load.NESTING_NOTE``)."""

_lock = threading.Lock()
_users = 0          # decodes running now (the app loads in a worker thread beside other work)
_saved: int | None = None


@contextmanager
def decode_limit():
    """Run a decode under ``DECODE_RECURSION_LIMIT``; concurrent decodes share one save/restore."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = sys.getrecursionlimit()
            if _saved != DECODE_RECURSION_LIMIT:
                try:
                    sys.setrecursionlimit(DECODE_RECURSION_LIMIT)
                except RecursionError:  # called deeper than the limit: leave it, the decode refuses sooner
                    _saved = DECODE_RECURSION_LIMIT
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None and _saved != sys.getrecursionlimit():
                sys.setrecursionlimit(_saved)
