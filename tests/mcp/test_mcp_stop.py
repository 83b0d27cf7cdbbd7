"""`tracetui mcp` stops when told to, even in the middle of a call that is stuck in C (issue 44, item 1).

The slow input: a client's own ``steps`` regex ``(a+)+$`` against a user annotation of 40 ``a`` and a
``!``, which backtracks for hours inside one C call that holds the GIL. Before, a call ran in the
server's process: SIGTERM, SIGINT and end of input did nothing while it ran, only SIGKILL stopped
the server. Now each call runs in a child process the server abandons: each way of stopping ends
the server within a few seconds and leaves no process behind, and a cancelled request leaves the
server answering the next call."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from tests.conftest import TRACES  # noqa: E402

STOP_S = 5.0
"""How long the server may take to end once told to."""
SLOW_STEPS = "(a+)+$"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
        out.update(kids)
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Server:
    def __init__(self, cwd: Path):
        self.p = subprocess.Popen([sys.executable, "-m", "tracetui", "mcp"], cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.send(INIT)
        assert self.recv()["id"] == 1
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg) -> None:
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout: float = 60) -> dict:
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        assert ready, f"no reply within {timeout} s"
        return json.loads(self.p.stdout.readline())

    def call(self, id_: int, tool: str, **args) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": args}})

    def stuck_call(self, id_: int = 2) -> set[int]:
        """Start the slow call; return the processes working on it once it is under way."""
        def busy() -> int:
            return sum(_cpu_ticks(p) for p in {self.p.pid} | _descendants(self.p.pid))
        before = busy()
        self.call(id_, "open_trace", path="slow.json", steps=SLOW_STEPS)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # half a second of CPU spent on the call
            if busy() - before > 50:
                return _descendants(self.p.pid)
            time.sleep(0.2)
        raise AssertionError("the call never got under way")

    def ended_within(self, seconds: float) -> int | None:
        try:
            return self.p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        for pid in _descendants(self.p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.p.kill()
        self.p.wait()


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.fixture
def server(tmp_path):
    events = [{"ph": "X", "cat": "user_annotation", "name": "a" * 40 + "!", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]
    (tmp_path / "slow.json").write_text(json.dumps({"traceEvents": events}))
    (tmp_path / "a.json.gz").write_bytes((TRACES / "mlp_eager.json.gz").read_bytes())
    s = Server(tmp_path)
    yield s
    if s.p.poll() is None:
        s.kill()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "end of input"])
def test_the_server_stops_mid_call(server, how):
    workers = server.stuck_call()
    if how == "end of input":
        server.p.stdin.close()
    else:
        server.p.send_signal(getattr(signal, how))
    rc = server.ended_within(STOP_S)
    assert rc is not None, f"still running {STOP_S} s after {how}"
    assert rc == {"SIGTERM": -signal.SIGTERM, "SIGINT": 130, "end of input": 0}[how], rc
    time.sleep(0.5)
    assert not [p for p in workers if _alive(p)], "a worker outlived the server"


def test_a_cancelled_call_leaves_the_server_answering(server):
    server.stuck_call(2)
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    server.call(3, "open_trace", path="a.json.gz")
    r = server.recv(timeout=60)
    while r.get("id") == 2:  # an answer to the cancelled call may come first
        r = server.recv(timeout=60)
    assert r["id"] == 3 and not r["result"]["isError"], r
    assert json.loads(r["result"]["content"][0]["text"])["events"] > 0


def test_a_worker_killed_mid_call_is_one_error_then_replaced(server):
    """The OOM killer taking the call's process: the call is answered with an error, the next one works."""
    for pid in server.stuck_call(2):
        os.kill(pid, signal.SIGKILL)
    r = server.recv(timeout=30)
    assert r["id"] == 2 and r["result"]["isError"], r
    assert "worker process ended" in r["result"]["content"][0]["text"]
    server.call(3, "summary", path="a.json.gz")
    r = server.recv(timeout=60)
    assert r["id"] == 3 and not r["result"]["isError"], r
