"""Long runs of JSON blanks cost C time, not a Python step per byte (issue 44, item 7).

``{"traceEvents":[`` + 64 MiB of spaces + ``]}`` took 8 s of CPU before "trace holds no events"
(a 1 MB gzip of 1 GiB: 108 s): the envelope scan and the repair walked back over blanks one byte at
a time. Each case runs in a subprocess that reports its own CPU time, under a wall-clock limit;
what it loads is checked against ``json`` reading the same bytes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

MIB = 1 << 20
BLANKS = 32 * MIB
CPU_S_PER_MIB = 0.03
"""CPU allowed per MiB of input, beyond ``CPU_BASE_S``. Before: about 0.12 s per MiB of blanks;
after: under 0.01 (reading the file)."""
CPU_BASE_S = 0.3

EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":5}'
CASES = {
    "only blanks": b'{"traceEvents":[' + b" " * BLANKS + b"]}",
    "blanks before the close": b'{"traceEvents":[' + EVENT + b" \t\r\n" * (BLANKS // 4) + b"]}",
    # 8 MiB here: past about 16 MiB of blanks on each side a trailing comma is refused unrepaired (one line)
    "blanks around a trailing comma": b'{"traceEvents":[' + EVENT + b"\n" * (BLANKS // 8) + b"," + b" " * (BLANKS // 8) + b"]}",
    "blanks then a stray close": b'{"traceEvents":[' + EVENT + b" " * BLANKS + b"]]}",
}

PROBE = """
import json, sys, time
from tracetui.model import TraceError, load_trace
t0 = time.process_time()
try:
    t = load_trace(sys.argv[1])
    out = {"events": len(t.store.ts), "names": sorted({t.store.names[i] for i in t.store.name_id.tolist()})}
except TraceError as e:
    out = {"error": e.problem}
out["cpu_s"] = time.process_time() - t0
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", list(CASES))
def test_a_long_blank_run_is_cheap(tmp_path, name):
    data = CASES[name]
    path = tmp_path / "blanks.json"
    path.write_bytes(data)
    r = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["cpu_s"] < CPU_BASE_S + CPU_S_PER_MIB * len(data) / MIB, got
    try:
        ref = json.loads(data)["traceEvents"]
    except json.JSONDecodeError:  # not strict JSON: the loader repairs it; the event is the one written
        ref = [json.loads(EVENT)]
    if ref:
        assert got.get("events") == len(ref), got
        assert got["names"] == sorted({e["name"] for e in ref}), got
    else:
        assert "no events" in got["error"], got


def test_last_non_blank_against_a_byte_walk():
    import random
    from tracetui.read.blanks import last_non_blank
    rng = random.Random(7)
    for _ in range(3000):
        buf = bytes(rng.choice(b" \t\r\n]}x,") for _ in range(rng.randint(0, 300)))
        lo = rng.randint(0, len(buf))
        hi = rng.randint(lo, len(buf))
        ref = hi - 1
        while ref >= lo and buf[ref] in b" \t\r\n":
            ref -= 1
        for view in (buf, memoryview(buf), bytearray(buf)):
            assert last_non_blank(view, lo, hi) == ref, (buf, lo, hi)
