"""``tracetui ranks PATH... [--json]`` and ``tracetui index PATH... -o INDEX``."""
from __future__ import annotations

import sys
from pathlib import Path

from tracetui.jobs.route import is_index as _is_index, opens_job  # noqa: F401 - opens_job: the CLI's (moved below the ui)

NAMES = ("ranks", "index")


def add_parser(sub) -> None:
    from tracetui.cli.common import count, format_options, positive, read_options
    lo = read_options()
    r = sub.add_parser("ranks", parents=[lo, format_options("ranks")], help="the ranks of a job: collectives matched across ranks, "
                                                   "clock offsets, waits, stragglers, per-step figures")
    r.add_argument("paths", nargs="+", help="rank files, a folder of them, a glob, or an index (tracetui index)")
    r.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/json.md)")
    r.add_argument("--top", type=count, default=10, help="collectives listed in the text report (0: all)")
    r.add_argument("--workers", type=positive, default=None, help="processes loading ranks (default: one per core)")
    r.add_argument("--rank-clocks", action="store_true",
                   help="estimate a clock offset for every rank, even between ranks of one host "
                        "(default: one clock per host, offsets estimated only across hosts)")
    i = sub.add_parser("index", parents=[lo], help="write each rank's tables as Parquet (needs tracetui[dist])")
    i.add_argument("paths", nargs="+", help="rank files, a folder of them, or a glob")
    i.add_argument("-o", "--output", type=Path, required=True, help="index folder to write (replaced atomically)")
    i.add_argument("--workers", type=positive, default=None, help="local processes (default: one per core)")
    i.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster")
    i.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray instance)")


def run(args) -> int:
    from tracetui.cli.common import CliError, load_opts as options
    from tracetui.report.ranks import print_ranks
    load_opts = options(args)
    if "-" in args.paths and not Path("-").exists():  # was "-: no such file"
        raise CliError(f"-: {args.cmd} reads rank files (a folder, a glob, files), not stdin")
    if args.cmd == "index":
        from tracetui.jobs import index as ix
        if args.address is not None and args.engine != "ray":  # was ignored: the local pool ran
            raise CliError(f"index: --address {args.address} is a Ray cluster's: add --engine ray")
        try:
            out = ix.build_index(args.paths, args.output, workers=args.workers, engine=args.engine,
                                 address=args.address, load_opts=load_opts)
        except (ix.MissingExtra, ix.EngineError) as e:
            raise CliError(str(e)) from None
        from tracetui.report.output import write_line
        write_line(f"{out['path']}: {out['ranks']} rank(s) indexed ({out['engine']}, {out['workers']} worker(s), "
                   f"{out['seconds']:.2f} s)" + (f", {len(out['skipped'])} skipped (said in its diagnostics)"
                                              if out["skipped"] else ""))
        from tracetui.textsafe import visible
        for line in out["skipped"]:  # nothing left out silently: the manifest holds these too
            print(f"tracetui: {visible(line)}", file=sys.stderr)
        return 0
    if len(args.paths) == 1 and Path(args.paths[0]).is_dir() and _is_index(Path(args.paths[0])):
        from tracetui.jobs import index as ix
        refuse_index_options(args.paths, args, CliError)
        try:
            doc = ix.analyze_index(Path(args.paths[0]), rank_clocks=args.rank_clocks)
        except ix.MissingExtra as e:
            raise CliError(str(e)) from None
    else:
        from tracetui.jobs.ranks import analyze_tables, load_job
        job, tables = load_job(args.paths, workers=args.workers, load_opts=load_opts)
        doc = analyze_tables(job, tables, rank_clocks=args.rank_clocks)
    from tracetui.report.output import emit_report, fmt_of
    fmt = fmt_of(args)
    if fmt in ("csv", "md"):  # the shared writers (tracetui/report/export.py); csv: per_rank unless --table
        emit_report(doc, fmt, table=getattr(args, "table", None), first="per_rank", title="tracetui ranks",
                    tables=report_tables(doc))
        return 0
    print_ranks(doc, as_json=fmt == "json", top=args.top)
    return 0


COLLECTIVE_RANK_COLUMNS = ("group", "index", "name", "rank", "start_us", "end_us", "wait_us", "step")
"""``collective_ranks``: one row per collective per rank, what ``collectives[].per_rank`` holds."""


def report_tables(doc: dict) -> list:
    """The csv/md tables of ``ranks``: the generic ones, with ``collectives`` less its nested
    ``per_rank`` (a count in a cell) and, after it, ``collective_ranks`` (each rank's start, end and
    wait per collective, the rows per-rank waits are exported from)."""
    from tracetui.report.export import Table, report_tables as generic
    out = []
    for t in generic({k: v for k, v in doc.items()}, columns={"collectives": ["group", "index", "name"]}):
        if t.name != "collectives":
            out.append(t)
            continue
        keep = [i for i, c in enumerate(t.columns) if c != "per_rank"]
        out.append(Table(t.name, [t.columns[i] for i in keep], [[r[i] for i in keep] for r in t.rows]))
        rows = [[c["group"], c["index"], c["name"], p["rank"], p["start_us"], p["end_us"], p["wait_us"], p["step"]]
                for c in doc.get("collectives", []) for p in c["per_rank"]]
        out.append(Table("collective_ranks", list(COLLECTIVE_RANK_COLUMNS), rows))
    return out


def refuse_index_options(paths, args, CliError) -> None:
    """``--steps`` / ``--torch-version`` on an index (``ranks INDEX``, ``tracetui INDEX``) were
    ignored: its tables were computed when it was built. Say so in one line."""
    if len(paths) != 1 or not Path(paths[0]).is_dir() or not _is_index(Path(paths[0])):
        return
    for opt, val in (("--steps", args.steps), ("--torch-version", args.torch_version)):
        if val is not None:
            raise CliError(f"{paths[0]}: {opt}: an index keeps the steps and times it was built with "
                           f"(pass {opt} to tracetui index, or give the trace files)")

