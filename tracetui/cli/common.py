"""What every subcommand module shares: the one-line error, argparse types for numbers and
versions, the parent parsers (how a trace is read, how a report is written), loading a trace with
the command's options, and whether a terminal is there for the app. Below main.py and every
command module, so none imports another for these."""
from __future__ import annotations

import argparse
import sys


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 2."""


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def path_arg(text: str):
    """An argparse type: a file or folder path, not empty (``Path("")`` is ``.``: an unset shell
    variable made ``summary "$T"`` read the current folder's newest trace)."""
    from pathlib import Path
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file (an unset shell variable?)")
    return Path(text)


def path_text(text: str) -> str:
    """``path_arg`` kept as text (a path or a glob): not empty."""
    return str(path_arg(text)) and text


def count(text: str) -> int:
    """An argparse type: an int >= 0 (``--top -5`` printed the first rows but the last five)."""
    n = _whole(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative: 0 or more")
    return n


def torch_version(text: str) -> str:
    """An argparse type: a version such as 2.13 (``--torch-version abc`` was taken and ignored)."""
    from tracetui.model.selftime import parse_version
    if parse_version(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch version such as 2.13")
    return text


def positive(text: str) -> int:
    """An argparse type: an int >= 1 (``--workers 0`` ran one worker, silently; ``-3`` and ``0``
    get the same message)."""
    n = _whole(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: 1 or more")
    return n


def interactive() -> bool:
    """The app needs a terminal on stdout (it draws there) and one to read keys from."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False



FORMATS = ("text", "json", "csv", "md")  # tracetui.report.export.FORMATS, kept here so --help imports nothing


def read_options() -> argparse.ArgumentParser:
    """The parent parser of every subcommand that reads a trace: how it is read."""
    lo = argparse.ArgumentParser(add_help=False)
    lo.add_argument("--steps", metavar="REGEX", default=None,
                    help="annotations matching REGEX are the steps (default: ProfilerStep#N, else a "
                         "numbered step-like record_function such as train_step_3)")
    lo.add_argument("--torch-version", metavar="X.Y", default=None, type=torch_version,
                    help="torch version that recorded the trace, for its CPU self-time rule "
                         "(default: the recorded one, else <= 2.12)")
    lo.add_argument("--no-cache", action="store_true",
                    help="neither reopen from nor write the reopen cache ($XDG_CACHE_HOME/tracetui; "
                         "TRACETUI_NO_CACHE=1 does the same)")
    return lo


def decode_options() -> argparse.ArgumentParser:
    """The parent parser of the subcommands that decode one trace at a time (ranks and index
    have a --workers of their own: processes loading ranks)."""
    wo = argparse.ArgumentParser(add_help=False)
    wo.add_argument("--workers", dest="decode_workers", type=positive, default=None, metavar="N",
                    help="cores a large trace's load uses: decode processes, then threads (default: one "
                         "per usable CPU, at most 8; TRACETUI_WORKERS=N does the same)")
    return wo


TABLES = {
    "summary": "ops (csv default), overview, per_step, phases, kernel_classes, kernels, first_step_kernels",
    "tree": "nodes",
    "memory": "ops (csv default), overview, devices, steps; two traces (the memory diff): steps (csv default), "
              "holders, ops, no_longer_allocated, peaks",
    "diff": "kernels (csv default), overview, changes, replaced, fused, unfused, removed_ops, added_ops, chains, "
            "cpu_changes; a ladder (3+ traces): rungs (csv default), steps, changes, cpu_changes",
    "ranks": "per_rank (csv default), overview, steps, collectives, collective_ranks, diagnostics",
}
"""The tables each report's ``--table`` can name, as ``--help`` lists them
(tests/cli/test_what_a_user_reads.py checks them against the tables the reports write)."""


def format_options(command: str | None = None) -> argparse.ArgumentParser:
    """The parent parser of every reporting subcommand: how the report is written; ``--table``'s
    help names ``command``'s tables (``TABLES``)."""
    fo = argparse.ArgumentParser(add_help=False)
    fo.add_argument("--format", choices=FORMATS, default=None,
                    help="text (default), json (schema in docs/json.md), csv (one table) or md (Markdown tables)")
    names = f". Tables: {TABLES[command]}" if command in TABLES else ""
    fo.add_argument("--table", default=None, metavar="NAME",
                    help=f"csv/md: the table to write (default csv: the main one; md: all){names}")
    return fo


STDIN_NAMES: dict = {}
"""Temporary file -> the name the user gave (``-``), so errors name what the user typed."""


def load_opts(args) -> dict:
    """The load_trace() options every reading subcommand shares."""
    if args.steps is not None:
        import re
        try:
            re.compile(args.steps)
        except re.error as e:
            raise CliError(f"--steps {args.steps!r}: not a valid regular expression ({e})") from None
    opts = {"steps": args.steps, "torch_version": args.torch_version, "cache": not getattr(args, "no_cache", False)}
    if getattr(args, "decode_workers", None) is not None:
        opts["workers"] = args.decode_workers
    return opts


def load(path, args):
    """``load_trace`` with the command's options; a trace read from stdin is called ``-``."""
    from pathlib import Path

    from tracetui.model import load_trace
    opts = load_opts(args)
    if str(path) in STDIN_NAMES:  # a temporary copy of stdin: nothing to reopen
        opts["cache"] = False
    t = load_trace(path, **opts)
    if str(t.path) in STDIN_NAMES:
        t.path = Path(STDIN_NAMES[str(t.path)])
    return t


def one_trace(path):
    """The trace a command reads for ``path`` where it takes one trace per path (summary, tree,
    opportunities, memory, each side of a diff or rung of a ladder): a
    folder of a job's ranks gives its lowest rank (rank 0), said on stderr with the command that
    reports the job, not the newest file (whichever rank finished writing last); any other folder
    its newest trace, said as before (``announce_folders``); a file itself."""
    from pathlib import Path
    try:
        folder = path is not None and str(path) not in STDIN_NAMES and Path(path).is_dir()
    except OSError:  # a name too long, a permission: the load says it, in one line
        folder = False
    if folder:
        from tracetui.jobs.placement import job_of
        from tracetui.jobs.route import is_index
        job = None if is_index(Path(path)) else job_of([path])
        if job is not None:
            from tracetui.textsafe import visible
            rf = job.ranks[0]
            which = f"rank {rf.rank}" + ("" if rf.rank == 0 else " (the lowest present)")
            print(f"tracetui: {visible(str(path))}: a job of {len(job.ranks)} ranks: reading {which}, "
                  f"{visible(rf.path.name)} (tracetui ranks {visible(str(path))} reports the job; pass a file "
                  "to read another rank)", file=sys.stderr)
            return rf.path
    announce_folders([path])
    return path


def announce_folders(paths) -> None:
    """A tensorboard_trace_handler folder holds one trace per file: say which one we open."""
    from pathlib import Path
    for path in paths:
        try:
            if path is None or not Path(path).is_dir():
                continue
        except OSError:  # a name too long, a permission: the load says it, in one line
            continue
        from tracetui.read.load import folder_traces, resolve_input
        found = folder_traces(path)
        chosen = resolve_input(path)
        if len(found) > 1:
            from tracetui.textsafe import visible
            print(f"tracetui: {visible(str(path))}: opening the newest of {len(found)} traces, "
                  f"{visible(chosen.name)} (pass a file to choose another)", file=sys.stderr)


def error(msg: str) -> None:
    """The one line bad input gets: file names made visible (no escapes, no line breaks)."""
    from tracetui.textsafe import visible
    if sys.stderr is not None:  # print(file=None) would write to stdout
        print(f"tracetui: error: {visible(msg)}", file=sys.stderr)
