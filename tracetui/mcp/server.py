"""``tracetui mcp``: the tools of tracetui/mcp/tools.py served over stdio with the official MCP
Python SDK (the ``mcp`` extra). Read-only: the tools only ever read trace files."""
from __future__ import annotations

import functools
import sys

INSTRUCTIONS = (
    "tracetui reads PyTorch profiler (Kineto) traces. Start with open_trace(path); then summary, "
    "step_breakdown, kernels, ops, tree (node ids) and node, or diff(a, b) for two traces. Every list "
    "is paged: pass next_offset back as offset. Times are µs."
)


def build_server(max_chars: int | None = None):
    """An ``MCPServer`` with every tool of ``mcp_tools.TOOLS`` registered (also for in-process tests)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from tracetui import __version__
    from tracetui.mcp import tools as mcp_tools
    if max_chars:
        mcp_tools.MAX_CHARS = max(2000, int(max_chars))
    server = MCPServer("tracetui", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    for tool in mcp_tools.TOOLS:
        server.add_tool(_as_tool_error(tool.fn, ToolError), name=tool.name,
                        description=" ".join((tool.fn.__doc__ or "").split()), annotations=read_only,
                        structured_output=False)
    return server


def _as_tool_error(fn, ToolError):
    """The answer as compact JSON text (the size ``mcp_tools.MAX_CHARS`` bounds); bad input comes
    back as a tool error with its message (the SDK hides the text of unexpected ones)."""
    import orjson

    from tracetui.read.errors import TraceError
    from tracetui.mcp.tools import ToolInputError

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return orjson.dumps(fn(*args, **kwargs), option=orjson.OPT_SERIALIZE_NUMPY).decode()
        except (ToolInputError, TraceError) as e:
            raise ToolError(str(e)) from None
    return call


def serve(args, CliError) -> int:
    """Run the server on stdin/stdout until the client closes it."""
    try:
        server = build_server(getattr(args, "max_chars", None))
    except ImportError:
        raise CliError("`tracetui mcp` needs the MCP SDK: pip install 'tracetui[mcp]'") from None
    print("tracetui mcp: serving on stdio (read-only trace tools)", file=sys.stderr, flush=True)
    server.run("stdio")
    return 0
