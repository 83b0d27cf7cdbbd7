"""Where every report's output goes: text lines, JSON documents and csv/md tables, written to
stdout. The one public module the front ends (cli/, record/) write a report through. No Textual."""
from __future__ import annotations

import sys

import orjson

from tracetui.textsafe import json_safe, visible

US = 1e-3  # ns -> µs


def shown(s: str) -> str:
    """``s`` with control characters made visible line by line: the last guard before the
    terminal, for the names, devices and provenance from the file that reach a report line."""
    return "\n".join(map(visible, s.split("\n")))


def write_line(s: str = "") -> None:
    """One line of a text report."""
    sys.stdout.write(shown(s) + "\n")


def write_bytes(data: bytes) -> None:
    """Bytes already made safe (``json_safe``) to stdout."""
    sys.stdout.buffer.write(data)


def write_json(obj) -> None:
    """``obj`` as indented JSON (names escaped by ``json_safe``)."""
    write_bytes(json_safe(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)) + b"\n")


def write_text(text: str) -> None:
    """Text already rendered (csv, md) to stdout."""
    sys.stdout.write(text)


def emit_report(doc: dict, fmt: str, table: str | None = None, first: str | None = None,
         tables: list | None = None, title: str | None = None) -> None:
    """Write a report's JSON ``doc`` as ``json``, ``csv`` or ``md`` (``tracetui.report.export``): the one
    path every command's ``--format`` other than ``text`` takes. ``table`` picks one table (csv
    prints one: ``table``, else ``first``, else the first); ``tables`` replaces the generic
    flattening. Raises export.UnknownTable for a name the report lacks."""
    if fmt == "json":
        write_json(doc)
        return
    from tracetui.report.export import render_report, report_tables
    tabs = tables if tables is not None else report_tables(doc)
    if first and fmt == "csv":  # csv writes one table: the main one unless --table names another
        tabs = sorted(tabs, key=lambda t: t.name != first)
    write_text(render_report(doc, fmt, tables=tabs, table=table, title=title))


def fmt_of(args) -> str:
    """``--format`` with ``--json`` as its alias (``--text`` of ``diff`` too)."""
    if getattr(args, "json", False):
        return "json"
    if getattr(args, "text", False):
        return "text"
    return getattr(args, "format", None) or "text"


def short_name(name: str) -> str:
    """A C++ kernel or op name with its template and argument lists shortened (``model.names``)."""
    from tracetui.model.names import shorten_cpp
    return shorten_cpp(name) if "<" in name or "(" in name else name
