"""``tracetui mcp``: the Model Context Protocol server over stdio (tracetui/mcp/server.py)."""
from __future__ import annotations

from tracetui.cli.common import CliError

NAMES = ("mcp",)


def add_parser(sub) -> None:
    m = sub.add_parser("mcp", help="Model Context Protocol server over stdio: read-only tools for agents (needs tracetui[mcp])")
    m.add_argument("--max-chars", type=int, default=None, help="bound on one answer's size (default 20000)")
    m.add_argument("--root", action="append", metavar="DIR",
                   help="a folder the tools may open or list (repeatable; default: the current folder); "
                        "paths named after the options are allowed too")
    m.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help="read/gunzip limit per trace, e.g. 512M (default: TRACETUI_MAX_BYTES, else 512M)")
    m.add_argument("paths", nargs="*", help="trace files or folders the tools may also read")


def run(args) -> int:
    from tracetui.mcp.server import serve
    return serve(args, CliError)
