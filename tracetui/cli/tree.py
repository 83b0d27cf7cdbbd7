"""``tracetui tree TRACE``: the hierarchy as indented text, JSON or rows (tracetui/report/tree.py)."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import CliError, one_trace, count, format_options, load, decode_options, read_options, path_arg

NAMES = ("tree",)


def add_parser(sub) -> None:
    t = sub.add_parser("tree", parents=[read_options(), decode_options(), format_options("tree")], help="the hierarchy as indented text")
    t.add_argument("trace", type=path_arg, help="trace file or folder; - reads stdin")
    t.add_argument("--depth", type=count, default=None, help="levels shown under the root (or under the matches)")
    t.add_argument("--filter", default=None, help="keep the nodes whose name contains TEXT, the paths to them and what is under them")
    t.add_argument("--json", action="store_true", help="same as --format json")
    t.add_argument("--python", action="store_true", help="show Python frames (hidden, as in the app; --depth counts what is shown)")


def run(args) -> int:
    args.trace = one_trace(args.trace)
    from tracetui.report.output import fmt_of
    from tracetui.report.tree import print_tree
    if args.table not in (None, "nodes"):
        raise CliError(f"tree: --table {args.table!r}: its one table is nodes")
    print_tree(load(args.trace, args), depth=args.depth, text_filter=args.filter, fmt=fmt_of(args),
               python=args.python)
    return 0
