"""``tracetui mcp``: the tools of tracetui/mcp/tools.py served over stdio with the official MCP
Python SDK (the ``mcp`` extra). Read-only: the tools only ever read trace files."""
from __future__ import annotations

import functools
import os
import sys

INSTRUCTIONS = (
    "tracetui reads PyTorch profiler (Kineto) traces. Start with open_trace(path); then summary, "
    "step_breakdown, kernels, ops, tree (node ids) and node, or diff(a, b) for two traces. Every list "
    "is paged: pass next_offset back as offset. Times are µs."
)


SERVER_MAX_BYTES = 512 << 20
"""The server's read/gunzip limit per trace when TRACETUI_MAX_BYTES and --max-bytes are unset:
lower than the app's (an agent's call should not take the machine's memory); a load takes about
2.4x the trace, so one call stays near 1.3 GB."""

ERROR_CHARS = 300
"""Longest error message a tool returns (its first line, cut)."""


def build_server(max_chars: int | None = None, roots=None):
    """An ``MCPServer`` with every tool of ``mcp_tools.TOOLS`` registered (also for in-process
    tests), confined to ``roots`` (default: the current folder)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from tracetui import __version__
    from tracetui.mcp import tools as mcp_tools
    if max_chars:
        mcp_tools.MAX_CHARS = max(2000, int(max_chars))
    mcp_tools.set_roots(roots or [os.getcwd()])
    server = MCPServer("tracetui", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    for tool in mcp_tools.TOOLS:
        server.add_tool(_as_tool_error(tool.fn, ToolError), name=tool.name,
                        description=" ".join((tool.fn.__doc__ or "").split()), annotations=read_only,
                        structured_output=False)
    return server


def _as_tool_error(fn, ToolError):
    """The answer as compact JSON text (the size ``mcp_tools.MAX_CHARS`` bounds). Every failure
    comes back as a tool error with its message: bad input as it is said, anything else as
    ``internal error (Type): message`` (the SDK would hide that text)."""
    import orjson

    from tracetui.read.errors import TraceError
    from tracetui.mcp.tools import ToolInputError
    from tracetui.report.output import round_us

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            # µs to the ns, as the CLI's --json writes them (the same numbers, issue 43)
            return orjson.dumps(round_us(fn(*args, **kwargs)), option=orjson.OPT_SERIALIZE_NUMPY).decode()
        except (ToolInputError, TraceError) as e:
            message = _line(str(e))
        except RecursionError:
            message = f"{fn.__name__}: internal error: nested too deep"
        except MemoryError:
            message = f"{fn.__name__}: out of memory (TRACETUI_MAX_BYTES / --max-bytes bounds a trace)"
        except Exception as e:  # noqa: BLE001 - an unexpected failure still says what it was
            message = f"{fn.__name__}: internal error ({type(e).__name__}): {_line(str(e))}"
        finally:
            _give_back_memory()
        # raised outside the handler: no chained exception keeps the failed load's frames (and
        # their buffers, up to the load limit) alive after the answer
        raise ToolError(message)
    return call


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None elsewhere."""
    import ctypes
    import ctypes.util
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _give_back_memory() -> None:
    """Return freed heap to the system after a call: a refused gzip bomb or a dropped trace
    otherwise stays resident in a long-running server (2.1 GB after one bomb, measured)."""
    import gc
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _line(text: str) -> str:
    """A message as one line of at most ERROR_CHARS characters."""
    first = (text.splitlines() or [""])[0]
    return first if len(first) <= ERROR_CHARS else first[:ERROR_CHARS] + "…"


def server_roots(args) -> list[str]:
    """``--root`` folders (default: the current one) plus the paths named on the command line."""
    roots = list(getattr(args, "root", None) or []) or [os.getcwd()]
    return roots + [str(p) for p in getattr(args, "paths", None) or []]


def _set_max_bytes(args, CliError) -> None:
    """The loader's limit for this server: --max-bytes, else TRACETUI_MAX_BYTES, else SERVER_MAX_BYTES."""
    from tracetui.read.load import MAX_BYTES_ENV, max_bytes
    import re
    given = getattr(args, "max_bytes", None)
    if given is not None:
        if not re.fullmatch(r"\s*[0-9]+(\.[0-9]+)?\s*[KMGT]?(i?B)?\s*", str(given), re.IGNORECASE) or not float(
                re.sub(r"[^0-9.]", "", str(given)) or 0) > 0:
            raise CliError(f"mcp: --max-bytes {given!r}: give a size such as 512M or 2G")
        os.environ[MAX_BYTES_ENV] = str(given)
    elif not os.environ.get(MAX_BYTES_ENV, "").strip():
        os.environ[MAX_BYTES_ENV] = str(SERVER_MAX_BYTES)
    try:
        max_bytes()
    except Exception as e:  # noqa: BLE001 - the loader's own message about the value
        raise CliError(f"mcp: {_line(str(e))}") from None


def serve(args, CliError) -> int:
    """Run the server on stdin/stdout until the client closes it."""
    for r in getattr(args, "root", None) or []:
        if not os.path.isdir(r):
            raise CliError(f"mcp: --root {r}: not a folder")
    _set_max_bytes(args, CliError)  # sets TRACETUI_MAX_BYTES for this process: last, once all is checked
    try:
        server = build_server(getattr(args, "max_chars", None), server_roots(args))
    except ImportError:
        raise CliError("`tracetui mcp` needs the MCP SDK: pip install 'tracetui[mcp]'") from None
    import anyio

    from tracetui.mcp.wire import serve_stdio
    print("tracetui mcp: serving on stdio (read-only trace tools)", file=sys.stderr, flush=True)
    # the SDK's server over our checked wire (MCPServer.run("stdio") does the same over its own)
    anyio.run(serve_stdio, server._lowlevel_server)
    return 0
