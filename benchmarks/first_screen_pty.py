"""Time from launching ``tracetui TRACE`` in a real pseudo-terminal to the explorer's first screen.

    python benchmarks/first_screen_pty.py TRACE [--repeat 3] [--size 120x40]

This is what a user waits for: Python start-up, imports, loading in the worker, mounting and the
first paint, measured from outside the app (no Pilot polling in the same process). The explorer
is taken as shown once the terminal output contains the first step's row ("ProfilerStep#") and
the status line's event count; the loading screen prints neither.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import termios
import time

MARKS = (b"ProfilerStep#", b" events")


def once(trace: str, cols: int, rows: int, timeout: float = 60.0) -> float:
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-m", "tracetui", trace])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    seen = b""
    shown = None
    try:
        while time.perf_counter() - t0 < timeout:
            r, _, _ = select.select([fd], [], [], 0.5)
            if not r:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            seen = (seen + chunk)[-(1 << 20):]
            if all(m in seen for m in MARKS):
                shown = time.perf_counter() - t0
                break
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    if shown is None:
        raise SystemExit(f"the explorer did not appear within {timeout:.0f} s")
    return shown


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", default="120x40")
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    times = [once(a.trace, cols, rows) for _ in range(a.repeat)]
    print(f"first screen in a pty ({a.size}): median {statistics.median(times):.2f} s, "
          f"best {min(times):.2f} s, worst {max(times):.2f} s (n={len(times)})")


if __name__ == "__main__":
    main()
