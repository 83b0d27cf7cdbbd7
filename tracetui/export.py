"""Tables as CSV or Markdown: rows of text in, file text out. Pure (no textual, no rich), so the
app's `e` export and the CLI write the same formats.

Cells are written as given (names from a trace are data): CSV quotes what needs quoting;
Markdown escapes ``|`` and backslashes and turns line breaks into spaces, and control
characters are made visible in both, so a name can never drive a terminal that shows the file.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from .textsafe import visible

FORMATS = {"csv": ".csv", "md": ".md"}
"""Format name -> file suffix."""


def _cell(v) -> str:
    return visible(str(v).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))


def to_csv(header: list[str], rows: list[list]) -> str:
    """RFC 4180 CSV (``\\r\\n`` line ends, as the csv module writes them)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([_cell(h) for h in header])
    for r in rows:
        w.writerow([_cell(c) for c in r])
    return buf.getvalue()


def to_markdown(header: list[str], rows: list[list]) -> str:
    """A GitHub-flavoured Markdown table; numbers right-aligned (a column whose every cell parses as one)."""
    def md(v) -> str:
        return _cell(v).replace("\\", "\\\\").replace("|", "\\|")

    numeric = [all(_is_number(r[i]) for r in rows if i < len(r)) and bool(rows) for i in range(len(header))]
    out = ["| " + " | ".join(md(h) for h in header) + " |",
           "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    out += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _is_number(v) -> bool:
    try:
        float(str(v).replace(",", ""))
        return True
    except ValueError:
        return False


def render(fmt: str, header: list[str], rows: list[list]) -> str:
    return to_csv(header, rows) if fmt == "csv" else to_markdown(header, rows)


def free_path(folder: Path, stem: str, fmt: str) -> Path:
    """``folder/stem.csv`` (or .md), or ``stem-2.csv``, ... : never an existing file."""
    suffix = FORMATS[fmt]
    p = folder / f"{stem}{suffix}"
    k = 2
    while p.exists():
        p = folder / f"{stem}-{k}{suffix}"
        k += 1
    return p


def write(folder: Path, stem: str, fmt: str, header: list[str], rows: list[list]) -> Path:
    """Write the table to a new file in ``folder`` (exclusive create: nothing is overwritten)."""
    text = render(fmt, header, rows)
    while True:
        p = free_path(folder, stem, fmt)
        try:
            with open(p, "x", encoding="utf-8", newline="") as f:
                f.write(text)
            return p
        except FileExistsError:  # made meanwhile: take the next name
            continue
