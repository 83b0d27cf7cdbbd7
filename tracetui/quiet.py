"""Kineto's ``USDT:`` trace-point lines kept off the user's terminal (issue 43 item 8).

libkineto writes ``USDT:<date> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start`` to
file descriptor 2 at each profiler start and stop; ``KINETO_LOG_LEVEL=6`` silences them but every
ERROR line too (a CUPTI permission error among them). ``drop_usdt()`` instead routes fd 2 through
a pipe for the duration of a profiler call and forwards every line but those. A leaf: it imports
nothing of ours, so ``gen`` (workloads/) and ``record`` (record/boot.py, inside the user's program)
share it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading

PREFIX = b"USDT:"


def _pump(r: int, out: int) -> None:
    """Forward what arrives on ``r`` to ``out`` line by line, less the USDT lines, until EOF."""
    buf = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        keep = b"".join(ln + b"\n" for ln in lines if not ln.startswith(PREFIX))
        if keep:
            os.write(out, keep)
    if buf and not buf.startswith(PREFIX):
        os.write(out, buf)
    os.close(r)


@contextlib.contextmanager
def drop_usdt():
    """fd 2 through the filter while the block runs; restored after, every other line forwarded.
    Where fd 2 cannot be redirected (no fd 2, a sandbox), the block runs as it is."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        r, w = os.pipe()
    except (OSError, ValueError, AttributeError):
        yield
        return
    os.dup2(w, 2)
    os.close(w)
    t = threading.Thread(target=_pump, args=(r, saved), daemon=True, name="tracetui-drop-usdt")
    t.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closed: the pump reads EOF and ends
        t.join(timeout=5)
        os.close(saved)
