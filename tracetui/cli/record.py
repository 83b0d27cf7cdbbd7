"""``tracetui record [options] -- PROGRAM``: record a program without editing it (tracetui/record/)."""
from __future__ import annotations

from tracetui.cli.common import CliError, interactive

NAMES = ("record",)


def add_parser(sub) -> None:
    from tracetui.record.launcher import add_parser
    add_parser(sub)


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after ``--`` is the program, untouched by argparse."""
    from tracetui.record.launcher import split_argv
    return split_argv(argv)


def run(args) -> int:
    from tracetui.cli.app import open_app
    from tracetui.record.launcher import run_record
    return run_record(args, CliError, opener=open_app if interactive() else None)
