"""Where every report's output goes: text lines, JSON documents and csv/md tables, written to
stdout. The one public module the front ends (cli/, record/) write a report through, and the one
place a write is checked: a failed or short write raises OutputError (one line, exit 2), never a
traceback or a cut file with exit 0 (issue 44). No Textual."""
from __future__ import annotations

import errno
import os
import sys

import orjson

from tracetui.textsafe import json_safe, visible

US = 1e-3  # ns -> µs


def shown(s: str) -> str:
    """``s`` with control characters made visible line by line: the last guard before the
    terminal, for the names, devices and provenance from the file that reach a report line."""
    return "\n".join(map(visible, s.split("\n")))


class OutputError(Exception):
    """stdout did not take the whole report (a full disk, a file size limit, a closed or broken
    pipe, stdout closed): the front end says this one line and exits 2, never 0 with a cut file."""


def _why(e: OSError) -> str:
    if isinstance(e, BrokenPipeError):
        return "the reader closed the pipe"
    return e.strerror or type(e).__name__


def write_bytes(data: bytes) -> None:
    """``data`` to stdout, all of it, or OutputError. Every write of a report ends here: a short
    write (``ulimit -f``) is retried, so the kernel's error comes back instead of a cut file."""
    out = sys.stdout
    if out is None:  # started with stdout closed (>&-)
        raise OutputError("cannot write the output: stdout is closed")
    buf = getattr(out, "buffer", None)
    try:
        if buf is None:  # a text-only stream (io.StringIO)
            out.write(data.decode("utf-8", "backslashreplace"))
            return
        view = memoryview(data)
        while view:
            n = buf.write(view)
            if not n:  # nothing taken and no error: a stream that cannot take more
                raise OSError(errno.EIO, "the output stream took no more bytes")
            view = view[n:]
    except OSError as e:
        raise OutputError(f"cannot write the output: {_why(e)} (the output is incomplete)") from None
    except ValueError:  # "I/O operation on closed file"
        raise OutputError("cannot write the output: stdout is closed") from None


def finish() -> None:
    """Flush what is buffered and check it went out: the last write of every command (a full disk
    often shows only here)."""
    out = sys.stdout
    if out is None:
        return
    try:
        out.flush()
    except OSError as e:
        raise OutputError(f"cannot write the output: {_why(e)} (the output is incomplete)") from None
    except ValueError:
        raise OutputError("cannot write the output: stdout is closed") from None


def abandon() -> None:
    """After an OutputError: point stdout at /dev/null so the interpreter's last flush of what is
    still buffered fails nowhere (no second message, no traceback at exit)."""
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def write_text(text: str) -> None:
    """Text (a rendered table, a line) to stdout, in stdout's encoding."""
    out = sys.stdout
    enc = getattr(out, "encoding", None) or "utf-8"
    write_bytes(text.encode(enc, "backslashreplace"))


def write_line(s: str = "") -> None:
    """One line of a text report, control characters made visible."""
    write_text(shown(s) + "\n")


def is_us(key: str) -> bool:
    """A key (or a CSV column, ``a.b`` for nested keys) whose numbers are µs: ``total_us``,
    ``device_us_per_step``, ``busy_by_class_us.gemm``."""
    return key.endswith("_us") or "_us_" in key or "_us." in key


def round_us(doc):
    """``doc`` with every float under a key ending in ``_us`` (and inside such a key's object:
    ``busy_by_class_us``) rounded to the ns, the resolution of a trace's times (3 decimals of a
    µs): sums of µs floats printed ``232.57500000000002``. In place, without recursion (a tree
    document nests as deep as the trace); other floats (ratios, %, GB/s) are left whole."""
    stack = [(doc, False)]
    while stack:
        obj, us = stack.pop()
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, v in list(items):
            ku = us or (isinstance(k, str) and is_us(k))
            if ku and isinstance(v, float):
                obj[k] = round(v, 3)
            elif isinstance(v, (dict, list)):
                stack.append((v, ku))
    return doc


def write_json(obj) -> None:
    """``obj`` as indented JSON (names escaped by ``json_safe``), µs rounded to the ns."""
    round_us(obj)
    write_bytes(json_safe(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)) + b"\n")


def emit_report(doc: dict, fmt: str, table: str | None = None, first: str | None = None,
         tables: list | None = None, title: str | None = None) -> None:
    """Write a report's JSON ``doc`` as ``json``, ``csv`` or ``md`` (``tracetui.report.export``): the one
    path every command's ``--format`` other than ``text`` takes. ``table`` picks one table (csv
    prints one: ``table``, else ``first``, else the first); ``tables`` replaces the generic
    flattening. Raises export.UnknownTable for a name the report lacks."""
    if fmt == "json":
        write_json(doc)
        return
    round_us(doc)
    from tracetui.report.export import render_report, report_tables
    tabs = tables if tables is not None else report_tables(doc)
    for tab in tabs:  # tables built before the rounding (a ladder's) are rounded the same way
        cols = [i for i, c in enumerate(tab.columns) if is_us(c)]
        for row in tab.rows:
            for i in cols:
                if isinstance(row[i], float):
                    row[i] = round(row[i], 3)
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
