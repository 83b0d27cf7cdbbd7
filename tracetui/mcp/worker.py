"""Tool calls of ``tracetui mcp`` in a child process that the server can abandon (issue 44).

A call can run long inside one C call that holds the GIL: a catastrophic ``steps`` regex from the
client, a huge JSON parse. Run in the server's own process, that blocked its signal handlers and
its reading of the wire: SIGTERM, SIGINT and end of input did nothing until the call returned, and
only SIGKILL stopped it. Here the server hands each call to a child (``python -m
tracetui.mcp.worker``) and waits for the answer in a thread, without the GIL. On a signal, end of
input or a cancelled request it kills the child; the child's own decode helpers die with it
(``PR_SET_PDEATHSIG``, see ``tracetui/read/forked.py``), and the next call starts a fresh child.
The child keeps the loaded traces between calls, as the server did.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

ERROR_CHARS = 300
"""Longest error message a tool returns (its first line, cut)."""

GONE = "the call's worker process ended before answering"
"""What a call gets when its child died (killed, out of memory) or was abandoned."""


def line(text: str) -> str:
    """A message as one line of at most ERROR_CHARS characters."""
    first = (text.splitlines() or [""])[0]
    return first if len(first) <= ERROR_CHARS else first[:ERROR_CHARS] + "…"


def answer(fn, *args, **kwargs) -> tuple[bool, str]:
    """``(True, the answer as compact JSON text)`` or ``(False, the message)``: bad input as it is
    said, anything else as ``internal error (Type): message``. Only text comes back: no exception
    (and its frames, holding a failed load's buffers) outlives the call."""
    import orjson

    from tracetui.mcp.tools import ToolInputError
    from tracetui.read.errors import TraceError
    from tracetui.report.output import round_us
    try:
        # µs to the ns, as the CLI's --json writes them (the same numbers, issue 43)
        return True, orjson.dumps(round_us(fn(*args, **kwargs)), option=orjson.OPT_SERIALIZE_NUMPY).decode()
    except (ToolInputError, TraceError) as e:
        return False, line(str(e))
    except RecursionError:
        return False, f"{fn.__name__}: internal error: nested too deep"
    except MemoryError:
        return False, f"{fn.__name__}: out of memory (TRACETUI_MAX_BYTES / --max-bytes bounds a trace)"
    except Exception as e:  # noqa: BLE001 - an unexpected failure still says what it was
        return False, f"{fn.__name__}: internal error ({type(e).__name__}): {line(str(e))}"
    finally:
        give_back_memory()


def give_back_memory() -> None:
    """Return freed heap to the system after a call: a refused gzip bomb or a dropped trace
    otherwise stays resident in a long-running process (2.1 GB after one bomb, measured)."""
    import gc
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    """glibc's ``malloc_trim``, or None elsewhere."""
    import ctypes
    import ctypes.util
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


class Worker:
    """The server's side: one child at a time, one call at a time. ``call`` and ``kill`` run in
    the server's main thread (the event loop); only the wait for an answer runs in a thread."""

    def __init__(self, roots: list[str], max_chars: int | None):
        self.config = json.dumps({"roots": [str(r) for r in roots], "max_chars": max_chars})
        self.proc: subprocess.Popen | None = None
        self.to_child = self.from_child = None
        self._lock = None

    def start(self) -> None:
        """Start the child (from the main thread: PR_SET_PDEATHSIG ties it to the thread that
        started it, and the event loop's thread lives as long as the server)."""
        self.proc = subprocess.Popen([sys.executable, "-m", "tracetui.mcp.worker", str(os.getpid()), self.config],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.to_child = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.from_child = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()

    def kill(self) -> None:
        """End the child now, whatever it is doing; a wait for its answer then sees end of file."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.kill()
        except OSError:
            pass
        proc.wait()
        for conn in (self.to_child, self.from_child):
            try:
                conn.close()
            except OSError:
                pass

    async def call(self, name: str, kwargs: dict) -> tuple[bool, str]:
        """Run tool ``name`` in the child; abandoned (and the child killed) if the request is
        cancelled or the server is stopping."""
        import anyio
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                self.kill()
                self.start()
            to_child, from_child = self.to_child, self.from_child
            try:
                got = await anyio.to_thread.run_sync(_roundtrip, to_child, from_child, name, kwargs,
                                                     abandon_on_cancel=True)
            except BaseException:
                self.kill()  # cancelled mid-call: its answer must not be read as the next call's
                raise
            if got is None:  # it died (its pipe closes a moment before it can be reaped)
                self.kill()
                return False, f"{name}: {GONE}"
            return got


def _roundtrip(to_child: Connection, from_child: Connection, name: str, kwargs: dict) -> tuple[bool, str] | None:
    """The child's answer, or None when it is gone (its pipe closed)."""
    try:
        to_child.send((name, kwargs))
        return from_child.recv()
    except (EOFError, OSError):
        return None


# ---- the child

def main(argv: list[str]) -> int:
    parent, config = int(argv[0]), json.loads(argv[1])
    from tracetui.read.forked import die_with_parent
    die_with_parent(parent)  # however the server ends, even by SIGKILL
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle
    # the wire to the server on private descriptors; fd 0 reads nothing, fd 1 goes to stderr
    rd, wr = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    requests, replies = Connection(rd, writable=False), Connection(wr, readable=False)
    from tracetui.mcp import tools
    tools.set_roots(config["roots"])
    if config["max_chars"]:
        tools.MAX_CHARS = max(2000, int(config["max_chars"]))
    by_name = {t.name: t.fn for t in tools.TOOLS}
    while True:
        try:
            name, kwargs = requests.recv()
        except (EOFError, OSError):
            return 0
        fn = by_name.get(name)
        reply = answer(fn, **kwargs) if fn is not None else (False, f"{name}: no such tool")
        try:
            replies.send(reply)
        except OSError:
            return 0


if __name__ == "__main__":
    threading.current_thread().name = "tracetui-mcp-worker"
    sys.exit(main(sys.argv[1:]))
