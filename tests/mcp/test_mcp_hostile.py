"""`tracetui mcp` against hostile clients and files (issue 35): malformed JSON-RPC is answered,
every tool error says what went wrong, paths outside --root are refused alike, a load stays
within the server's limit, and walks up a damaged tree end."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402

from tracetui.mcp import tools as mcp_tools  # noqa: E402
from tracetui.mcp.server import SERVER_MAX_BYTES, build_server  # noqa: E402

from tests.conftest import TRACES  # noqa: E402

A = TRACES / "mlp_eager.json.gz"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Wire:
    """`tracetui mcp ARGS` as a subprocess, spoken to line by line (no SDK client: a real client
    would never send what these tests send)."""

    def __init__(self, *args, cwd, env=None):
        self.p = subprocess.Popen([sys.executable, "-m", "tracetui", "mcp", *map(str, args)], cwd=cwd, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.send(INIT)
        assert self.recv()["id"] == 1
        self.send(INITIALIZED)

    def send(self, msg) -> None:
        line = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.p.stdin.write(line + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout: float = 30) -> dict:
        import select
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        assert ready, "no reply within the timeout"
        return json.loads(self.p.stdout.readline())

    def call(self, id_: int, tool: str, **args) -> dict:
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        r = self.recv()
        assert r["id"] == id_, r
        return r["result"]

    def peak_rss(self, field: str = "VmHWM") -> int:
        """The server's peak (or, with VmRSS, current) resident memory, in bytes, from /proc: its
        own plus its child processes' (tool calls run in a child, tracetui/mcp/worker.py)."""
        total, todo = 0, [self.p.pid]
        while todo:
            pid = todo.pop()
            try:
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                todo += [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
            except OSError:
                continue
            total += sum(int(ln.split()[1]) << 10 for ln in status if ln.startswith(field + ":"))
        return total

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=30)


@pytest.fixture
def wire(tmp_path):
    w = Wire(cwd=tmp_path)
    yield w
    w.close()


def test_malformed_jsonrpc_is_answered(wire):
    """JSON-RPC 2.0: not JSON -> -32700 (id null); JSON that is no request -> -32600, with the
    request's id when it has one. Before: no reply at all, and the server stopped answering."""
    deep = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001
    cases = [(b"bad json", -32700, None), (b"[]", -32600, None), (b"[1, 2]", -32600, None), (b"null", -32600, None),
             (b"42", -32600, None), (b'{"jsonrpc":"2.0","id":5}', -32600, 5),
             (b'{"jsonrpc":"2.0","id":6,"method":7}', -32600, 6),
             (b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}', -32600, 7),
             (b'{"jsonrpc":"1.0","id":8,"method":"ping"}', -32600, 8), (deep, -32600, 9)]
    for line, code, id_ in cases:
        t0 = time.monotonic()
        wire.send(line)
        r = wire.recv(timeout=10)
        assert time.monotonic() - t0 < 10
        assert r["jsonrpc"] == "2.0" and r["error"]["code"] == code and r["id"] == id_, (line[:60], r)
    wire.send({"jsonrpc": "2.0", "id": 10, "method": "ping"})  # and the session goes on
    assert wire.recv() == {"jsonrpc": "2.0", "id": 10, "result": {}}


def test_every_tool_error_carries_its_message(tmp_path, monkeypatch):
    """Offset 2^70 and a NUL in a path came back as 'Error executing tool tree' with the reason
    hidden by the SDK; so did any unexpected error."""
    shutil.copy(A, tmp_path / "a.json.gz")
    a = str(tmp_path / "a.json.gz")

    def boom(path: str) -> dict:
        raise RuntimeError("the reason is here")
    tools = [*mcp_tools.TOOLS, mcp_tools.Tool("boom", boom)]
    monkeypatch.setattr(mcp_tools, "TOOLS", tools)

    async def run():
        async with Client(build_server(roots=[tmp_path])) as client:
            for tool, args, says in (("tree", {"path": a, "offset": 2 ** 70}, "offset"),
                                     ("kernels", {"path": a, "offset": -2 ** 70}, "offset"),
                                     ("tree", {"path": a, "depth": 2 ** 70, "limit": 1}, None),
                                     ("open_trace", {"path": a + "\0x"}, "NUL"),
                                     ("step_breakdown", {"path": a, "step": "9" * 5000}, "step"),
                                     ("boom", {"path": a}, "RuntimeError): the reason is here")):
                r = await client.call_tool(tool, args)
                text = r.content[0].text
                if says is None:  # a depth past any tree's is just 'everything'
                    assert not r.is_error, text
                    continue
                assert r.is_error and says in text, (tool, text)
                assert text != f"Error executing tool {tool}"
            r = await client.call_tool("tree", {"path": a, "filter": "x" * 100_000})  # echoed, but cut
            assert not r.is_error and len(r.content[0].text) <= mcp_tools.MAX_CHARS
    asyncio.run(run())


def test_paths_outside_the_root_are_refused_alike(tmp_path):
    """--root confines every tool: outside it (as written, or through a link) one refusal that is
    the same for a secret file, a missing one, a folder and a glob, so it tells nothing about them."""
    root, out = tmp_path / "root", tmp_path / "outside"
    (root / "run").mkdir(parents=True)
    out.mkdir()
    shutil.copy(A, root / "a.json.gz")
    (out / "secret.txt").write_text("Secret: first byte S")
    shutil.copy(A, out / "b.pt.trace.json.gz")
    os.symlink(out / "secret.txt", root / "link.json")
    os.symlink(out / "b.pt.trace.json.gz", root / "run" / "x.pt.trace.json.gz")  # a folder's newest: a link out

    async def run():
        async with Client(build_server(roots=[root])) as client:
            r = await client.call_tool("open_trace", {"path": str(root / "a.json.gz")})
            assert not r.is_error, r.content[0].text
            refusals = []
            for tool, args, given in (
                    ("open_trace", {"path": str(out / "secret.txt")}, str(out / "secret.txt")),
                    ("open_trace", {"path": str(out / "missing.json")}, str(out / "missing.json")),
                    ("open_trace", {"path": "/"}, "/"),
                    ("summary", {"path": str(root / ".." / "outside" / "secret.txt")}, str(root / ".." / "outside" / "secret.txt")),
                    ("node", {"path": str(root / "link.json"), "id": 0}, str(root / "link.json")),
                    ("open_trace", {"path": str(root / "run")}, str(root / "run")),
                    ("ranks", {"paths": [str(out / "*")]}, str(out / "*")),
                    ("ranks", {"paths": ["/root/.*"]}, "/root/.*"),
                    ("ranks", {"paths": [str(root / "run")]}, str(root / "run")),
                    ("diff", {"a": str(root / "a.json.gz"), "b": str(out / "b.pt.trace.json.gz")},
                     str(out / "b.pt.trace.json.gz"))):
                r = await client.call_tool(tool, args)
                text = r.content[0].text
                assert r.is_error, (tool, args, text)
                refusals.append(text.split(": ", 1)[1].replace(given, "PATH"))
                assert "Secret" not in text and "'S'" not in text and "b.pt.trace" not in text.replace(given, "")
            assert len(set(refusals)) == 1, refusals
            assert refusals[0] == f"PATH: {mcp_tools.OUTSIDE}"
    asyncio.run(run())


def test_the_command_line_sets_root_and_limit(tmp_path):
    """`tracetui mcp` from a folder reads that folder and the paths named after it, nothing else;
    its load limit is the server's lower default, so a 2 GB sparse file is refused unread
    (before: 2.1 GB resident per call)."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    shutil.copy(A, there / "named.json.gz")
    shutil.copy(A, there / "other.json.gz")
    sparse = here / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)
    w = Wire(there / "named.json.gz", cwd=here, env={k: v for k, v in os.environ.items() if k != "TRACETUI_MAX_BYTES"})
    try:
        assert not w.call(2, "open_trace", path=str(there / "named.json.gz"))["isError"]
        r = w.call(3, "open_trace", path=str(there / "other.json.gz"))
        assert r["isError"] and mcp_tools.OUTSIDE in r["content"][0]["text"]
        r = w.call(4, "open_trace", path="sparse.json")  # relative: the server's folder
        text = r["content"][0]["text"]
        assert r["isError"] and f"over the {SERVER_MAX_BYTES:,}-byte limit" in text, text
        assert w.peak_rss() < 600 << 20, w.peak_rss()
    finally:
        w.close()


def test_refused_loads_do_not_pile_up_in_memory(tmp_path):
    """A refused gzip bomb kept its half-gunzipped buffer alive through the chained exception:
    each call left about the load limit resident (measured: +530 MB a call at 512M). Now the
    server returns to where it was."""
    import gzip
    (tmp_path / "bomb.json.gz").write_bytes(gzip.compress(b" " * (1 << 20)) * 256)  # 256 MiB of blanks
    w = Wire("--max-bytes", "64M", cwd=tmp_path)
    try:
        first = w.call(2, "open_trace", path="bomb.json.gz")
        assert first["isError"] and "limit" in first["content"][0]["text"]
        settled = w.peak_rss("VmRSS")
        for i in range(3, 9):
            assert w.call(i, "summary", path="bomb.json.gz")["isError"]
        assert w.peak_rss("VmRSS") < settled + (48 << 20), (settled, w.peak_rss("VmRSS"))
    finally:
        w.close()


CYCLE = [  # issue 35: one step on tid 2^64 and its twin on tid 1 made the tree's parents a loop
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 2 ** 64, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
]


def test_node_and_its_breadcrumb_end_on_a_damaged_tree(tmp_path):
    """MCP node looped forever (memory growing) on the parent cycle; every node of that trace is
    now answered, and each breadcrumb ends at the node and names no node twice."""
    path = tmp_path / "cycle.json"
    path.write_text(json.dumps({"traceEvents": CYCLE}))
    code = ("import json, sys\nfrom tracetui.mcp import tools as T\nT.set_roots([sys.argv[1]])\n"
            "t = T.load(sys.argv[1])\n"
            "print(json.dumps([[p['id'] for p in T.node(sys.argv[1], i)['path_to_node']] "
            "for i in range(len(t.tree.parent))]))")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    crumbs = json.loads(r.stdout)
    assert len(crumbs) >= len(CYCLE) + 1  # the root and the three events at least
    for i, crumb in enumerate(crumbs):
        assert crumb[-1] == i and len(set(crumb)) == len(crumb) <= len(crumbs)


def test_ancestors_walk_is_bounded_by_the_tree():
    """The walk itself, on a parent array that loops (3 -> 1 -> 2 -> 3): it ends, each node once."""
    from types import SimpleNamespace

    class Parent(list):  # fails instead of hanging when the walk does not end
        reads = 0

        def __getitem__(self, i):
            Parent.reads += 1
            assert Parent.reads < 100, "the walk did not end"
            return list.__getitem__(self, i)
    parent = Parent([-1, 2, 3, 1])
    t = SimpleNamespace(tree=SimpleNamespace(parent=parent), name=lambda i: f"n{i}")
    assert [p["id"] for p in mcp_tools._ancestors(t, 3)] == [2, 1, 3]
    assert [p["id"] for p in mcp_tools._ancestors(t, 0)] == [0]


def test_the_corpus_through_the_server_under_3g():
    """Every corpus case (tests/corpus.py), every tool, one server under prlimit --as=3G: each
    call answered (within 60 s here, for a loaded test machine; the 10 s bound of the issue is
    measured by `python tests/mcp/corpus_mcp.py`), no internal error, the server never down."""
    from tests.mcp.corpus_mcp import run
    assert run(call_seconds=60) == 0


def test_bad_server_options_are_one_line(capsys, tmp_path, monkeypatch):
    """A --max-bytes that is no size (silently the machine-sized default before) or a --root that
    is no folder: exit 2 with one line, the server never started."""
    from tracetui.cli.main import main
    monkeypatch.delenv("TRACETUI_MAX_BYTES", raising=False)  # restored afterwards, whatever main sets
    for argv, says in ((["mcp", "--max-bytes", "abc"], "--max-bytes"), (["mcp", "--max-bytes", "0"], "--max-bytes"),
                       (["mcp", "--root", str(tmp_path / "missing")], "not a folder")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracetui: error: mcp: ") and says in err and err.count("\n") == 1, err
