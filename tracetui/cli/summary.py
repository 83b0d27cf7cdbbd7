"""``tracetui summary TRACE``: device, steps, GPU busy/idle, top ops and kernels (tracetui/report/summary.py)."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import one_trace, count, format_options, load, decode_options, read_options, path_arg

NAMES = ("summary",)


def add_parser(sub) -> None:
    s = sub.add_parser("summary", parents=[read_options(), decode_options(), format_options("summary")],
                       help="device, steps, GPU busy/idle, top ops and kernels, diagnostics")
    s.add_argument("trace", type=path_arg, help="trace file or folder; - reads stdin")
    s.add_argument("--json", action="store_true", help="same as --format json")
    s.add_argument("--top", type=count, default=15, help="rows in the op and kernel tables (0: all)")
    s.add_argument("--python", action="store_true",
                   help="the op table lists Python frames and nn.Module rows too (hidden, as in tree), in every format")


def run(args) -> int:
    return report(one_trace(args.trace), args)


def report(path, args) -> int:
    """The summary of ``path`` (also what ``tracetui TRACE`` prints with no terminal)."""
    from tracetui.report.output import fmt_of
    from tracetui.report.summary import print_summary
    print_summary(load(path, args), top=getattr(args, "top", 15), fmt=fmt_of(args),
                  table=getattr(args, "table", None), python=getattr(args, "python", False))
    return 0
