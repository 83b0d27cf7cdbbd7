"""Reports as tables: the JSON report of any command flattened into named tables, and the CSV and
Markdown writers for them. Pure (no Textual, no Rich): the CLI's ``--format``, the app's export and
the MCP server share it.

A report (``summary_dict``, ``diff_dict``, ...) becomes tables by one rule, so every command gets
``--format csv|md`` from its JSON without a table layout of its own:

- its top-level scalars, and small dicts of scalars (flattened to ``key.sub``), form ``overview``
  (two columns: ``field``, ``value``);
- each list of objects is a table of its own, named by its key, one row per object; nested
  objects flatten to ``key.sub`` columns, lists of scalars join with ``" > "``;
- each object whose values are all objects (``{class: {count, total_us}}``) is a table whose first
  column is ``key``.

Column names are therefore the JSON field names, and a cell holds the JSON value (floats in full).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from .textsafe import visible

FORMATS = ("text", "json", "csv", "md")
"""The output formats every reporting command takes (``--format``)."""

JOIN = " > "
"""How a list of scalars (an op chain, the kernels a fusion replaced) is written in one cell."""


class UnknownTable(ValueError):
    """``--table NAME`` names no table of the report."""


@dataclass
class Table:
    """A named table: ``columns`` and ``rows`` (one list of cells per row, None for a blank)."""
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


def records_table(name: str, records: list[dict], key: str | None = None) -> Table:
    """One row per record; columns are the union of the flattened keys, in first-seen order."""
    flat = [_flat(r) for r in records]
    columns: dict = {}
    for r in flat:
        for k in r:
            columns.setdefault(k, None)
    cols = list(columns)
    return Table(name, cols, [[r.get(c) for c in cols] for r in flat])


def _is_records(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _is_keyed(v) -> bool:
    return isinstance(v, dict) and bool(v) and all(isinstance(x, dict) for x in v.values())


def report_tables(doc: dict, first: str | None = None) -> list[Table]:
    """A JSON report as tables (see the module docstring); ``first`` is put first when present.
    Empty lists still give a table (with no columns), so the set of names does not depend on data."""
    overview: dict = {}
    tables: list[Table] = []
    for k, v in doc.items():
        if _is_records(v):
            tables.append(records_table(k, v))
        elif _is_keyed(v):
            tables.append(records_table(k, [{"key": kk, **vv} for kk, vv in v.items()]))
        elif isinstance(v, list) and not v:
            tables.append(Table(k, [], []))
        elif isinstance(v, dict):
            overview.update(_flat(v, k + ".") if v else {k: None})
        else:
            overview.update(_flat({k: v}))
    out = [Table("overview", ["field", "value"], [[k, v] for k, v in overview.items()])] if overview else []
    out += tables
    if first:
        out.sort(key=lambda t: t.name != first)
    return out


def pick(tables: list[Table], name: str | None) -> list[Table]:
    """The table called ``name`` (all of them for None); UnknownTable names the ones there are."""
    if name is None:
        return tables
    for t in tables:
        if t.name == name:
            return [t]
    raise UnknownTable(f"no table {name!r} in this report (tables: {', '.join(t.name for t in tables)})")


def _cell(v, full: bool) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if full else f"{v:.3f}"
    return visible(str(v))


def write_csv(table: Table) -> str:
    """One table as CSV (RFC 4180 quoting, header row first); floats in full precision."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.columns)
    for row in table.rows:
        w.writerow([_cell(v, True) for v in row])
    return buf.getvalue()


def _md_cell(v) -> str:
    return _cell(v, False).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or " "


def write_markdown(tables: list[Table], title: str | None = None) -> str:
    """GitHub-flavoured Markdown: a ``## name`` heading and a pipe table per table (``|`` in a
    cell is escaped as ``\\|``, so every row has exactly the header's number of cells)."""
    parts = [f"# {_md_cell(title)}\n"] if title else []
    for t in tables:
        parts.append(f"## {t.name}\n")
        if not t.columns:
            parts.append("(none)\n")
            continue
        parts.append("| " + " | ".join(_md_cell(c) for c in t.columns) + " |")
        parts.append("|" + "|".join("---:" if _numeric(t, i) else "---" for i in range(len(t.columns))) + "|")
        for row in t.rows:
            parts.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
        parts.append("")
    return "\n".join(parts) + "\n"


def _numeric(t: Table, i: int) -> bool:
    vals = [r[i] for r in t.rows if r[i] is not None]
    return bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)


def render(doc: dict, fmt: str, tables: list[Table] | None = None, table: str | None = None,
           title: str | None = None) -> str:
    """``doc`` as ``csv`` (one table: ``table``, else the first) or ``md`` (``table``, else all).
    ``tables`` overrides the generic flattening (``report_tables(doc)``)."""
    tables = report_tables(doc) if tables is None else tables
    chosen = pick(tables, table)
    if fmt == "csv":
        return write_csv(chosen[0]) if chosen else ""
    if fmt == "md":
        return write_markdown(chosen, title)
    raise ValueError(f"render: format {fmt!r} is not csv or md")
