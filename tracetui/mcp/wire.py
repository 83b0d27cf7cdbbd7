"""The stdio wire of ``tracetui mcp``: each line checked before the SDK sees it, so that a message
that is not JSON-RPC gets JSON-RPC's answer (-32700 parse error, -32600 invalid request) instead
of silence, and a line too long or nested too deep is refused without reading it whole into the
parser. Lines that pass are handed to the SDK's own stdio session unchanged.

Like the SDK's transport, fd 0 and fd 1 are moved aside while serving (to /dev/null and stderr),
so a stray print or a child process cannot corrupt the wire.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import contextmanager

import orjson

MAX_LINE = 16 << 20
"""The longest message (bytes) read; a longer line is skipped to its end and refused."""

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
"""JSON-RPC 2.0's error codes for a line that is not JSON, and for JSON that is not a message."""


def error_line(code: int, message: str, id_=None) -> bytes:
    """One JSON-RPC error response, as a line."""
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}) + b"\n"


def _valid_id(v) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def shallow_id(text: bytes):
    """The top-level ``"id"`` of a message the parser refused (too deep), found by a scan that
    only tracks strings and nesting; None when there is none or it is not a plain id."""
    depth, i, n, in_str = 0, 0, len(text), False
    key_start = -1
    while i < n:
        c = text[i]
        if in_str:
            if c == 0x5C:  # backslash: skip the escaped byte
                i += 2
                continue
            if c == 0x22:
                in_str = False
                if depth == 1 and text[key_start:i + 1] == b'"id"':
                    j = i + 1
                    while j < n and text[j] in b" \t\r\n":
                        j += 1
                    if j < n and text[j] == 0x3A:  # a key, not a value
                        try:
                            v, _ = json.JSONDecoder().raw_decode(text[j + 1:j + 1 + 4096].decode("utf-8", "replace").lstrip())
                        except ValueError:
                            return None
                        return v if _valid_id(v) else None
        elif c == 0x22:
            in_str, key_start = True, i
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
        i += 1
    return None


def check(line: bytes, validate=None) -> bytes | None:
    """The error reply for a line that is not a JSON-RPC message, or None when it is one.
    ``validate`` is the SDK's own message check (it raises on what the SDK would drop)."""
    if not line.strip():
        return b""  # a blank line: nothing to answer
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        if "depth" in str(e).lower() or "recursion" in str(e).lower():
            return error_line(INVALID_REQUEST, "Invalid Request: nested too deep", shallow_id(line))
        return error_line(PARSE_ERROR, "Parse error: not JSON")
    if isinstance(msg, list):
        return error_line(INVALID_REQUEST, "Invalid Request: " + ("empty batch" if not msg else "batches are not supported"))
    if not isinstance(msg, dict):
        return error_line(INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    id_ = msg.get("id") if _valid_id(msg.get("id")) else None
    if msg.get("jsonrpc") != "2.0":
        return error_line(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id_)
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return error_line(INVALID_REQUEST, 'Invalid Request: "method" must be a string', id_)
        if "id" in msg and not _valid_id(msg["id"]):
            return error_line(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
        if "params" in msg and not isinstance(msg["params"], dict):
            return error_line(INVALID_REQUEST, 'Invalid Request: "params" must be an object', id_)
    elif not (_valid_id(msg.get("id")) and (("result" in msg) != ("error" in msg))):
        return error_line(INVALID_REQUEST, 'Invalid Request: no "method" (and not a response)', id_)
    if validate is not None:
        try:
            validate(msg)
        except Exception as e:  # noqa: BLE001 - the SDK's check: its first complaint is the answer
            first = (str(e).splitlines() or ["invalid"])[0][:200]
            return error_line(INVALID_REQUEST, f"Invalid Request: {first}", id_)
    return None


def read_lines(f, limit: int = MAX_LINE):
    """Lines of a binary stream, each at most ``limit`` bytes; a longer one comes back as None
    (its bytes read and dropped in pieces, never held whole)."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while (more := f.readline(1 << 20)) and not more.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


class _Out:
    """The wire's writing end, shared by the SDK's replies and ours (one whole line per write)."""

    def __init__(self, f):
        import anyio
        self.f, self.lock = f, anyio.Lock()

    async def write(self, text) -> None:
        import anyio
        data = text.encode() if isinstance(text, str) else text
        async with self.lock:
            await anyio.to_thread.run_sync(self._put, data)

    def _put(self, data: bytes) -> None:
        self.f.write(data)
        self.f.flush()

    async def flush(self) -> None:
        pass



class _In:
    """The wire's reading end: lines that are JSON-RPC messages, in order; the others answered.
    A daemon thread reads the wire (not a worker thread of the event loop's pool, which the
    interpreter joins at exit: Ctrl-C then waited for the client's next line)."""

    def __init__(self, f, out: _Out, validate, on_end=None):
        self.lines, self.out, self.validate, self.on_end = read_lines(f), out, validate, on_end
        self.received = None

    def __aiter__(self):
        return self

    def _pump(self, send, token) -> None:
        import anyio.from_thread
        try:
            for line in self.lines:
                anyio.from_thread.run(send.send, line, token=token)
        except Exception:  # noqa: BLE001 - the event loop is gone (the server is stopping)
            return
        try:
            anyio.from_thread.run_sync(send.close, token=token)
        except Exception:  # noqa: BLE001
            pass

    async def __anext__(self) -> str:
        import anyio
        import anyio.lowlevel
        if self.received is None:
            send, self.received = anyio.create_memory_object_stream(1)
            threading.Thread(target=self._pump, args=(send, anyio.lowlevel.current_token()), daemon=True,
                             name="tracetui-mcp-wire").start()
        while True:
            try:
                line = await self.received.receive()
            except anyio.EndOfStream:
                if self.on_end is not None:
                    self.on_end()
                raise StopAsyncIteration from None
            if line is None:
                await self.out.write(error_line(INVALID_REQUEST, f"Invalid Request: message over {MAX_LINE:,} bytes"))
                continue
            reply = check(line, self.validate)
            if reply is None:
                return line.decode("utf-8", "replace")
            if reply:
                await self.out.write(reply)


@contextmanager
def claimed_stdio():
    """(stdin, stdout) of the wire as private binary files; fd 0 reads /dev/null and fd 1 goes
    to stderr meanwhile, both restored afterwards."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    # closefd=False: a reader thread may still block on the wire after serving ends (as in the SDK)
    fin = os.fdopen(wire_in, "rb", buffering=1 << 16, closefd=False)
    fout = os.fdopen(wire_out, "wb", closefd=False)
    try:
        yield fin, fout
    finally:
        fout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


async def serve_stdio(lowlevel, on_end=None) -> None:
    """Run the SDK's low-level server over the checked wire until the client closes it;
    ``on_end()`` runs as soon as the input ends (before calls in flight are answered)."""
    import mcp_types
    from mcp.server.stdio import stdio_server
    def validate(msg):
        mcp_types.jsonrpc_message_adapter.validate_python(msg, by_name=False)
    with claimed_stdio() as (fin, fout):
        out = _Out(fout)
        async with stdio_server(stdin=_In(fin, out, validate, on_end), stdout=out) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
