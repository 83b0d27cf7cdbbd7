"""Stopping the local pool never hangs the process, even when a worker dies in the middle of
sending its result (found by a newcomer run: `tracetui ranks` on a folder with a bad rank hung
at exit in ~1 run of 4). This is the ProcessPoolExecutor path (a named start method; where
fork is missing); tests/jobs/test_pool_forked.py holds the same case for the forked pool."""
from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import struct, sys, time
    from tracetui.jobs import pool

    EX = []

    class Grab(pool.ProcessPoolExecutor):  # the pool run_map makes, kept where its workers see it
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            EX.append(self)

    pool.ProcessPoolExecutor = Grab

    def half_a_result(i):
        """Write the start of a 1 MiB result message, then never the rest (a worker killed mid-send)."""
        if i == 0:
            writer = EX[0]._result_queue._writer
            writer._send(struct.pack("!i", 1 << 20) + b"only the start")
        time.sleep(60)

    t0 = time.monotonic()
    try:
        pool.run_map(half_a_result, [(0,), (1,)], workers=2, start_method="fork", should_stop=lambda: time.monotonic() - t0 > 1.0)
    except pool.Stopped:
        print("stopped", flush=True)
''')


def test_stopping_a_pool_mid_result_does_not_hang_the_exit():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "stopped"
