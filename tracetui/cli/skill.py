"""``tracetui skill``: print the SKILL.md shipped in the package (package data)."""
from __future__ import annotations


NAMES = ("skill",)


def add_parser(sub) -> None:
    sub.add_parser("skill", help="print SKILL.md: how a coding agent should drive tracetui (commands, exit codes, caps)")


def text() -> str:
    from importlib import resources  # noqa: PLC0415 - ~4 ms: only ``skill`` reads package data
    return resources.files("tracetui").joinpath("SKILL.md").read_text(encoding="utf-8")


def run(args=None) -> int:
    from tracetui.report.output import write_text
    write_text(text())
    return 0
