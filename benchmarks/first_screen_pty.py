"""Time from launching ``tracetui TRACE`` in a real pseudo-terminal to the explorer's first screen.

    python benchmarks/first_screen_pty.py TRACE [--repeat 3] [--size 120x40] [--src DIR ...]

This is what a user waits for: Python start-up, imports, loading in the worker, mounting and the
first paint, measured from outside the app (no Pilot polling in the same process). The explorer
is taken as shown once the terminal output contains the first step's row ("ProfilerStep#") and
the status line's event count; the loading screen prints neither.

This machine's speed drifts by up to 2x within minutes, so each run is interleaved with a
baseline measured the same way: a fresh interpreter that imports Textual and merely parses the
file with ``orjson`` (gunzipping it first if needed). The ratio first screen / baseline is the
comparable number. ``--src`` runs the app from other checkouts (PYTHONPATH) for interleaved A/B.
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
import subprocess
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bytecode import compile_package, package_dir, src_env, uncompile_package  # noqa: E402

MARKS = (b"ProfilerStep#", b" events")


BASELINE = ("import sys, gzip, orjson, textual.app; b = open(sys.argv[1], 'rb').read(); "
            "orjson.loads(gzip.decompress(b) if b[:2] == b'\\x1f\\x8b' else b)")


def baseline(trace: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", BASELINE, trace], check=True)
    return time.perf_counter() - t0


def spawn(trace: str, cols: int, rows: int, src: str | None = None) -> tuple[int, int]:
    """``python -m tracetui TRACE`` in a new pseudo-terminal of that size: (pid, terminal fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        if src:
            os.environ.update(src_env(src))
        os.execv(sys.executable, [sys.executable, "-m", "tracetui", trace])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def once(trace: str, cols: int, rows: int, src: str | None = None, timeout: float = 60.0) -> float:
    t0 = time.perf_counter()
    pid, fd = spawn(trace, cols, rows, src)
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


def check_src(src: str) -> None:
    """Stop unless ``-m tracetui`` with ``src`` on PYTHONPATH imports that checkout's code."""
    got = package_dir(src)
    if not os.path.abspath(got).startswith(os.path.abspath(src) + os.sep):
        raise SystemExit(f"--src {src}: tracetui imports from {got}, not from that checkout")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--src", action="append", default=[],
                    help="checkout to run the app from (repeatable: interleaved A/B); default: installed")
    ap.add_argument("--cold", action="store_true",
                    help="remove tracetui's bytecode first (this VM's PYTHONDONTWRITEBYTECODE=1 then recompiles it at every start)")
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    srcs = a.src or [None]
    for s in a.src:
        check_src(s)
    for s in srcs:
        (uncompile_package if a.cold else compile_package)(s)
    print("tracetui's bytecode removed: compiled at every start (--cold)" if a.cold else
          "tracetui byte-compiled first, as a Python writing bytecode has it after one run (--cold: not)")
    base, times = [], {s: [] for s in srcs}
    for _ in range(a.repeat):
        base.append(baseline(a.trace))
        for s in srcs:
            times[s].append(once(a.trace, cols, rows, s))
    med = statistics.median
    print(f"baseline (python + import textual + orjson parse): median {med(base):.2f} s, "
          f"best {min(base):.2f} s, worst {max(base):.2f} s")
    for s, ts in times.items():
        ratios = [t / b for t, b in zip(ts, base)]
        print(f"first screen in a pty ({a.size}){' [' + s + ']' if s else ''}: median {med(ts):.2f} s, "
              f"best {min(ts):.2f} s, worst {max(ts):.2f} s; ratio to baseline median {med(ratios):.2f} "
              f"(n={len(ts)})")


if __name__ == "__main__":
    main()
