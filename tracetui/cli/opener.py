"""``tracetui [open] TRACE…``: the explorer; with no terminal, the report the app would open on."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import CliError, interactive, load_opts, decode_options, one_trace, read_options, path_arg

NAMES = ("open",)
REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED = REPO_ROOT / "traces"

BUNDLED_LADDER = ("mlp_eager", "mlp_compile", "mlp_max_autotune", "mlp_triton", "mlp_fused")
"""The MLP ladder `tracetui` opens with no arguments, in this order (rungs not bundled are left out)."""


def bundled_default() -> list[Path]:
    """The bundled MLP ladder: eager → compile (→ max-autotune) → triton → fused."""
    pair = [BUNDLED / "mlp_eager.json.gz", BUNDLED / "mlp_compile.json.gz"]
    if not all(p.exists() for p in pair):
        raise CliError(f"no bundled traces in {BUNDLED} (pass a trace file)")
    return [p for p in (BUNDLED / f"{n}.json.gz" for n in BUNDLED_LADDER) if p.exists()]


def add_parser(sub) -> None:
    o = sub.add_parser("open", parents=[read_options(), decode_options()], help="open the explorer (the default command)")
    o.add_argument("traces", nargs="*", type=path_arg,
                   help="trace file(s) or trace folder; two open a diff, more a ladder; - reads stdin")


def run(args) -> int:
    from tracetui.cli.ranks import opens_job, refuse_index_options
    job = opens_job(args.traces)  # ranks of one job: the job view, not a diff
    given = args.traces
    if job:
        refuse_index_options(args.traces, args, CliError)
    else:  # a job's folder among several paths: its rank 0, as summary DIR reads it
        given = [one_trace(p) for p in args.traces]
    traces = given or bundled_default()  # none: the bundled ladder (eager, compile, ... on an H200)
    if not interactive() and job:  # the job view's report: the app would draw into the pipe and never end
        from tracetui.cli import ranks
        return ranks.run(_ranks_args(args))
    if not interactive() and not job:  # a pipe or a file: the report the app would open on, never escape codes
        if len(traces) >= 2:
            from tracetui.cli.diff import report
            return report(traces, args, args.traces)
        from tracetui.cli.summary import report
        return report(traces[0], args)
    from tracetui.cli.app import open_app, terminal_stdin
    if getattr(args, "stdin_used", False):
        terminal_stdin()
    return open_app(traces, diff=len(traces) >= 2, load_opts=load_opts(args), job=job)


def _ranks_args(args):
    """``tracetui ranks`` on the same paths: its own options as its parser sets them (not a copy
    of its defaults here), and what both commands take (--steps, --no-cache ...) as given."""
    import argparse
    from tracetui.cli import ranks
    sub = argparse.ArgumentParser().add_subparsers(dest="cmd")
    ranks.add_parser(sub)
    own = sub.choices["ranks"].parse_args(["--", *(str(p) for p in args.traces)])  # a name may start with -
    return argparse.Namespace(**{**vars(own), **{k: v for k, v in vars(args).items() if k != "cmd"}, "cmd": "ranks"})
