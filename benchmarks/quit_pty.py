"""How long `q` takes to end `tracetui TRACE` while the trace is still loading.

    python benchmarks/quit_pty.py TRACE [--after 0.5,2,4] [--src DIR ...]

Launches the app in a real pseudo-terminal, waits for the loading screen, waits ``--after``
seconds more, presses `q`, and times until the process has exited; then counts tracetui
processes still alive (a forked helper left behind would show here). Use a trace that takes
longer to load than the largest ``--after`` (the 1 GB replica from make_large_trace.py).
"""
from __future__ import annotations

import argparse
import os
import select
import subprocess
import time

from first_screen_pty import check_src, spawn


def once(trace: str, after: float, src: str | None, timeout: float = 60.0) -> tuple[float, int]:
    pid, fd = spawn(trace, 120, 40, src)
    seen = b""
    t0 = time.perf_counter()
    while b"loading" not in seen and time.perf_counter() - t0 < timeout:
        if select.select([fd], [], [], 0.2)[0]:
            seen += os.read(fd, 1 << 16)
    time.sleep(after)
    pressed = time.perf_counter()
    os.write(fd, b"q")
    while time.perf_counter() - pressed < timeout:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                if not os.read(fd, 1 << 16):
                    break
            except OSError:  # the terminal closed: the app is gone
                break
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
    took = time.perf_counter() - pressed
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(fd)
    left = subprocess.run(["pgrep", "-f", f"-m tracetui {trace}"], capture_output=True, text=True).stdout.split()
    return took, len(left)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--after", default="0.5,2,4", help="seconds after the loading screen appears")
    ap.add_argument("--src", action="append", default=[], help="checkout to run (repeatable)")
    a = ap.parse_args()
    for s in a.src:
        check_src(s)
    trace = os.path.abspath(a.trace)
    for s in a.src or [None]:
        runs = [once(trace, float(x), s) for x in a.after.split(",")]
        print(f"q -> exit{' [' + s + ']' if s else ''}: " + ", ".join(
            f"{t:.2f} s at +{x} s ({n} left)" for (t, n), x in zip(runs, a.after.split(","))))


if __name__ == "__main__":
    main()
