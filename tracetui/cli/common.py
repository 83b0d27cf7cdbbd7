"""What every subcommand module shares: the one-line error, argparse types for numbers and
versions, and whether a terminal is there for the app. Below main.py and ranks.py, so neither
imports the other for these (main -> ranks -> main was a circle)."""
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


TABLES = {
    "summary": "ops (csv default), overview, per_step, kernel_classes, kernels, first_step_kernels",
    "tree": "nodes",
    "memory": "ops (csv default), overview, devices, steps",
    "diff": "kernels (csv default), overview, changes, fused, unfused, removed_ops, added_ops, chains, "
            "cpu_changes; a ladder (3+ traces): rungs (csv default), steps, changes, cpu_changes",
    "ranks": "per_rank (csv default), overview, steps, collectives, collective_ranks, diagnostics",
}
"""The tables each report's ``--table`` can name, as ``--help`` lists them (tests/cli/test_table_help.py
checks them against the tables the reports write)."""


def table_help(parser, names: str) -> None:
    """``--table NAME`` on a report's parser, its help naming that report's tables."""
    parser.add_argument("--table", default=None, metavar="NAME",
                        help=f"csv/md: the table to write (csv: one table, md: all). Tables: {names}")
