"""``tracetui opportunities TRACE``: fusion chains of one trace, ranked by projected saving."""
from __future__ import annotations

from pathlib import Path

NAMES = ("opportunities",)


def add_parser(sub) -> None:
    from tracetui.cli.common import count, read_options, path_arg
    o = sub.add_parser("opportunities", parents=[read_options()],
                       help="chains of pointwise/norm/reduction kernels a fusion could merge, ranked by "
                            "the time it would save at the trace's own HBM bandwidth")
    o.add_argument("trace", type=path_arg, help="trace file or folder; - reads stdin")
    o.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/json.md)")
    o.add_argument("--top", type=count, default=10, help="chains shown (0: all)")


def run(args) -> int:
    from tracetui.cli.common import load, one_trace
    args.trace = one_trace(args.trace)
    from tracetui.model.opportunities import opportunities
    from tracetui.report.caps import note_truncated
    from tracetui.report.opportunities import capped, text_lines
    t = load(args.trace, args)
    o = capped(opportunities(t), args.top)
    if args.json:
        from tracetui.report.output import write_json
        write_json(o)
        if o["truncated"]:
            note_truncated([("chains", len(o["chains"]), o["total_chains"])])
        return 0
    from tracetui.report.output import write_line
    for line in text_lines(o, str(t.path)):
        write_line(line)
    return 0
