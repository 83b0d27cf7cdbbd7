"""``tracetui memory TRACE [TRACE_B]``: profile_memory peaks, holders and the per-op table; with two traces,
the memory diff A → B (tracetui/compare/memory.py, tracetui/report/memory.py)."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import one_trace, count, format_options, load, decode_options, read_options, path_arg

NAMES = ("memory",)


def add_parser(sub) -> None:
    m = sub.add_parser("memory", parents=[read_options(), decode_options(), format_options("memory")],
                       help="profile_memory: peaks per device and step, what held them, per-op table; "
                            "with two traces, the memory diff A → B")
    m.add_argument("trace", type=path_arg)
    m.add_argument("trace_b", type=path_arg, nargs="?", default=None,
                   help="a second trace: per step and device, the peak in A and B and what held it, A vs B")
    m.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/json.md)")
    m.add_argument("--top", type=count, default=10, help="rows per table (0: all)")


def run(args) -> int:
    args.trace = one_trace(args.trace)
    if args.trace_b is not None:
        args.trace_b = one_trace(args.trace_b)
    from tracetui.report.memory import print_memory, print_memory_diff
    from tracetui.report.output import fmt_of
    if args.trace_b is not None:
        print_memory_diff(load(args.trace, args), load(args.trace_b, args), top=args.top, fmt=fmt_of(args),
                          table=args.table)
        return 0
    print_memory(load(args.trace, args), top=args.top, fmt=fmt_of(args), table=args.table)
    return 0
