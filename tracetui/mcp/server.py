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

def build_server(max_chars: int | None = None, roots=None, worker=None):
    """An ``MCPServer`` with every tool of ``mcp_tools.TOOLS`` registered, confined to ``roots``
    (default: the current folder). With a ``worker`` (``tracetui mcp``), each call runs in its
    child process; without (in-process tests), in this process."""
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
        fn = _as_tool_error(tool.fn, ToolError) if worker is None else _in_worker(tool, worker, ToolError)
        server.add_tool(fn, name=tool.name,
                        description=" ".join((tool.fn.__doc__ or "").split()), annotations=read_only,
                        structured_output=False)
    return server


def _as_tool_error(fn, ToolError):
    """The answer as compact JSON text (the size ``mcp_tools.MAX_CHARS`` bounds); every failure a
    tool error with its message (``worker.answer``: the SDK would hide an unexpected one's text)."""
    from tracetui.mcp.worker import answer

    @functools.wraps(fn)
    def call(*args, **kwargs):
        ok, text = answer(fn, *args, **kwargs)
        if ok:
            return text
        raise ToolError(text)
    return call


def _in_worker(tool, worker, ToolError):
    """``tool`` run by ``worker`` in its child process; its signature (the input schema) and
    docstring stay the tool's own."""
    @functools.wraps(tool.fn)
    async def call(**kwargs):
        ok, text = await worker.call(tool.name, kwargs)
        if ok:
            return text
        raise ToolError(text)
    return call


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
        from tracetui.mcp.worker import line
        raise CliError(f"mcp: {line(str(e))}") from None


def serve(args, CliError) -> int:
    """Run the server on stdin/stdout until the client closes it."""
    for r in getattr(args, "root", None) or []:
        if not os.path.isdir(r):
            raise CliError(f"mcp: --root {r}: not a folder")
    _set_max_bytes(args, CliError)  # sets TRACETUI_MAX_BYTES for this process: last, once all is checked
    from tracetui.mcp.worker import Worker
    worker = Worker(server_roots(args), getattr(args, "max_chars", None))
    try:
        server = build_server(getattr(args, "max_chars", None), server_roots(args), worker)
    except ImportError:
        raise CliError("`tracetui mcp` needs the MCP SDK: pip install 'tracetui[mcp]'") from None
    import anyio

    from tracetui.mcp.wire import serve_stdio
    print("tracetui mcp: serving on stdio (read-only trace tools)", file=sys.stderr, flush=True)
    worker.start()  # its imports overlap the client's handshake
    try:
        # the SDK's server over our checked wire (MCPServer.run("stdio") does the same over its own);
        # at end of input the call in flight is abandoned: the client is gone
        anyio.run(serve_stdio, server._lowlevel_server, worker.kill)
    finally:
        worker.kill()
    return 0
