"""``tracetui diff A B [C …]``: two traces, the diff (the app on a terminal); more, the ladder."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import CliError, count, format_options, interactive, load, load_opts, \
    decode_options, one_trace, read_options, path_arg

NAMES = ("diff",)


def add_parser(sub) -> None:
    d = sub.add_parser("diff", parents=[read_options(), decode_options(), format_options("diff")],
                       help="align two traces and report what changed and what fusion "
                            "removed; three or more: a ladder (A → B → C …)")
    d.add_argument("traces", nargs="+", type=path_arg, metavar="TRACE", help="two traces, or a series of them")
    d.add_argument("--top", type=count, default=10, help="changes shown per kind (0: all); a ladder's per neighbour: 3")
    g = d.add_mutually_exclusive_group()
    g.add_argument("--text", action="store_true", help="print the report instead of opening the app")
    g.add_argument("--json", action="store_true", help="print the report as JSON (schema in docs/json.md)")
    from tracetui.cli.gate import add_gate_args
    add_gate_args(d)


def run(args) -> int:
    if len(args.traces) < 2:
        raise CliError("diff: give two traces, or three or more for a ladder")
    given = args.traces
    traces = [one_trace(p) for p in given]  # a job's folder: its rank 0, as summary DIR reads it
    if args.text or args.json or args.format or args.gate is not None or not interactive():
        return report(traces, args, given)
    from tracetui.cli.app import open_app
    return open_app(traces, diff=True, load_opts=load_opts(args))


def report(paths: list, args, given: list | None = None) -> int:
    """Two traces: the diff report; three or more: the ladder (per step, and why each rung differs).
    ``given``: the paths as the user named them (a rung named after its folder, not its rank 0)."""
    from tracetui.report.output import fmt_of
    top = getattr(args, "top", 10)
    traces = [load(p, args) for p in paths]
    if len(traces) == 2:
        from tracetui.cli.gate import report_two
        return report_two(traces, args, fmt_of(args), top, getattr(args, "table", None))
    if getattr(args, "gate", None) is not None:
        raise CliError("diff: --gate compares two traces (A, then B), not a ladder")
    from tracetui.compare.ladder import ladder
    from tracetui.report.ladder import ladder_tables, print_ladder
    fmt = fmt_of(args)
    ld = ladder(traces, top=top if top != 10 else 3)
    names = [Path(p).name.split(".")[0] for p in (given or paths)]
    if fmt in ("csv", "md"):  # rungs, steps, changes, cpu_changes (csv: rungs unless --table)
        from tracetui.report.output import emit_report
        emit_report(ld, fmt, table=getattr(args, "table", None), first="rungs", tables=ladder_tables(ld, names),
                    title="tracetui diff (ladder)")
        return 0
    print_ladder(ld, names, as_json=fmt == "json")
    return 0
