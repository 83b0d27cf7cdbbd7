"""``tracetui memory TRACE``: profile_memory peaks, holders and the per-op table (tracetui/report/memory.py)."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import announce_folders, count, format_options, load, decode_options, read_options

NAMES = ("memory",)


def add_parser(sub) -> None:
    m = sub.add_parser("memory", parents=[read_options(), decode_options(), format_options("memory")],
                       help="profile_memory: peaks per device and step, what held them, per-op table")
    m.add_argument("trace", type=Path)
    m.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/json.md)")
    m.add_argument("--top", type=count, default=10, help="rows per table (0: all)")


def run(args) -> int:
    announce_folders([args.trace])
    from tracetui.report.memory import print_memory
    from tracetui.report.output import fmt_of
    print_memory(load(args.trace, args), top=args.top, fmt=fmt_of(args), table=args.table)
    return 0
