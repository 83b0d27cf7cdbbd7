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

