"""Tables as CSV or Markdown: rows of text in, file text out. Pure (no textual, no rich), so the
app's `e` export and the CLI write the same formats.

Cells are written as given (names from a trace are data): CSV quotes what needs quoting;
Markdown escapes ``|`` and backslashes and turns line breaks into spaces, and control
characters are made visible in both, so a name can never drive a terminal that shows the file.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from tracetui.textsafe import visible

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


def is_us(key: str) -> bool:
    """A key or column whose numbers are µs: ``total_us``, ``device_us_per_step``,
    ``busy_by_class_us.gemm`` (nested keys as ``a.b``), or a header saying ``µs``."""
    return key.endswith("_us") or "_us_" in key or "_us." in key or "µs" in key


def round_rows(header: list[str], rows: list[list]) -> list[list]:
    """Floats of the µs columns rounded to the ns (3 decimals), the resolution of a trace's times."""
    cols = [i for i, h in enumerate(header) if is_us(str(h))]
    if not cols:
        return rows
    out = []
    for r in rows:
        r = list(r)
        for i in cols:
            if i < len(r) and isinstance(r[i], float):
                r[i] = round(r[i], 3)
        out.append(r)
    return out


def render(fmt: str, header: list[str], rows: list[list]) -> str:
    rows = round_rows(header, rows)  # an app's export writes µs as the CLI's csv does (issue 43)
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


# ---- Reports as tables (the CLI's --format csv|md, the MCP server): any JSON report, one rule.
#
# A report (``summary_dict``, ``diff_dict``, ranks, memory) becomes named tables without a layout of
# its own: its top-level scalars, and small objects of scalars (keys flattened to ``a.b``), form
# ``overview`` (columns ``field``, ``value``); each list of objects is a table named by its key, one
# row per object (nested objects as ``a.b`` columns, lists of scalars joined with ``" > "``); an
# object whose values are all objects (``{class: {count, total_us}}``) is a table whose first column
# is ``key``. Column names are the JSON field names; CSV cells hold the JSON value in full.

REPORT_FORMATS = ("text", "json", "csv", "md")
"""The output formats every reporting command takes (``--format``)."""

JOIN = " > "
"""How a list of scalars (an op chain, the kernels a fusion replaced) is written in one cell."""


class UnknownTable(ValueError):
    """``--table NAME`` names no table of the report."""


@dataclass
class Table:
    """A named table: ``columns`` and ``rows`` (one list of JSON values per row, None for a blank)."""
    name: str
    columns: list[str]
    rows: list[list] = field(default_factory=list)


def _flat(obj: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "1 > 2"}`` (lists of objects as counts)."""
    out: dict = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        elif isinstance(v, (list, tuple)):
            if all(not isinstance(x, (dict, list, tuple)) for x in v):
                out[key] = JOIN.join("" if x is None else str(x) for x in v)
            else:
                out[key] = f"[{len(v)} items]"
        else:
            out[key] = v
    return out


def records_table(name: str, records: list[dict]) -> Table:
    """One row per record; columns are the union of the flattened keys, in first-seen order."""
    flat = [_flat(r) for r in records]
    columns: dict = {}
    for r in flat:
        for k in r:
            columns.setdefault(k, None)
    cols = list(columns)
    return Table(name, cols, [[r.get(c) for c in cols] for r in flat])


def report_tables(doc: dict, columns: dict | None = None) -> list[Table]:
    """A JSON report as tables (the rule above). An empty list still gives a table, with the
    columns ``columns`` names for it (else none), so which tables a command writes does not
    depend on its data."""
    overview: dict = {}
    tables: list[Table] = []
    for k, v in doc.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append(records_table(k, v))
        elif isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            tables.append(records_table(k, [{"key": kk, **vv} for kk, vv in v.items()]))
        elif isinstance(v, list) and not v:
            tables.append(Table(k, list((columns or {}).get(k, ())), []))
        elif isinstance(v, dict):
            overview.update(_flat(v, k + ".") if v else {k: None})
        else:
            overview.update(_flat({k: v}))
    head = [Table("overview", ["field", "value"], [[k, v] for k, v in overview.items()])] if overview else []
    return head + tables


def pick(tables: list[Table], name: str | None) -> list[Table]:
    """The table called ``name`` (all of them for None); UnknownTable names the ones there are."""
    if name is None:
        return tables
    for t in tables:
        if t.name == name:
            return [t]
    raise UnknownTable(f"no table {name!r} in this report (tables: {', '.join(t.name for t in tables)})")


def _text(v, full: bool) -> str:
    """A JSON value as a cell: blank for null, true/false, floats in full (CSV) or to 3 decimals.
    A numpy scalar is taken as the Python number it holds (numpy 2's repr of ``np.float64(0.0)``
    is the text ``np.float64(0.0)``, which was written into every float cell of ``tree --format csv``)."""
    if getattr(v, "shape", None) == () and callable(getattr(v, "item", None)):
        v = v.item()
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if full else f"{v:.3f}"
    return str(v)


def table_csv(table: Table) -> str:
    """One table as CSV (``to_csv``: header row first); floats in full precision."""
    return to_csv(table.columns, [[_text(v, True) for v in row] for row in table.rows])


def tables_markdown(tables: list[Table], title: str | None = None) -> str:
    """A ``## name`` heading and a table (``to_markdown``) for each; ``# title`` first if given."""
    parts = [f"# {_cell(title)}\n"] if title else []
    for t in tables:
        parts.append(f"## {t.name}\n")
        if not t.columns:
            parts.append("(none)\n")
            continue
        parts.append(to_markdown(t.columns, [[_text(v, False) for v in row] for row in t.rows]))
    return "\n".join(parts)


def render_report(doc: dict, fmt: str, tables: list[Table] | None = None, table: str | None = None,
                  title: str | None = None) -> str:
    """``doc`` as ``csv`` (one table: ``table``, else the first) or ``md`` (``table``, else all).
    ``tables`` replaces the generic flattening (``report_tables(doc)``)."""
    tables = report_tables(doc) if tables is None else tables
    chosen = pick(tables, table)
    if fmt == "csv":
        return table_csv(chosen[0]) if chosen else ""
    if fmt == "md":
        return tables_markdown(chosen, title)
    raise ValueError(f"render_report: format {fmt!r} is not csv or md")
