"""``tracetui skill``: print the SKILL.md shipped in the package (package data)."""
from __future__ import annotations

import sys
from importlib import resources


def text() -> str:
    return resources.files("tracetui").joinpath("SKILL.md").read_text(encoding="utf-8")


def run() -> int:
    sys.stdout.write(text())
    return 0
