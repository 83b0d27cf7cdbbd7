"""Where every report's output goes: text lines, JSON documents and csv/md tables, written to
stdout. The one public module the front ends (cli/, record/) write a report through, and the one
place a write is checked: a failed or short write raises OutputError (one line, exit 2), never a
traceback or a cut file with exit 0 (issue 44). No Textual."""
from __future__ import annotations

import errno
import os
import sys

from tracetui.report.export import is_us
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
    data = json_bytes(obj)
    write_bytes(data)
    write_bytes(b"\n")  # not data + b"\n": a copy of a document that only just fit


def json_bytes(obj, indent: bool = True) -> bytes:
    """``obj`` as JSON bytes, made safe for a terminal (``json_safe``). orjson where it can; where
    it refuses a value, Python's encoder (ensure_ascii): a file name that is not UTF-8 (its
    surrogate escapes written as ``\\udcXX``, which Python's json reads back to the same name) or
    an integer past 64 bits from a trace. Nesting past orjson's limit is the caller's (tree.py
    writes node by node).

    Under a memory limit orjson crashes the process (SIGSEGV) where an allocation fails, and it
    reserves about 8 bytes a character of a string it writes (issue 44 item 9: a 100 MB name
    under ``prlimit --as``). So there, a document holding a string of HUGE_STRING or more is
    written by Python's encoder (whose failure is MemoryError: one line), and any other large
    document only after its room is checked (``reserve``)."""
    if _capped():
        size, longest = json_size(obj)
        if longest >= HUGE_STRING:
            return json_safe(_python_json(obj, indent))
        reserve(size, longest)
    import orjson  # noqa: PLC0415 - here, not at import: a text report never loads it (and json, uuid ...)
    try:
        data = orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0))
    except orjson.JSONEncodeError as e:
        if "ecursion" in str(e):
            raise
        data = _python_json(obj, indent)
    return json_safe(data)


def _python_json(obj, indent: bool) -> bytes:
    import json
    return json.dumps(obj, indent=2 if indent else None, ensure_ascii=True, default=_plain,
                      separators=None if indent else (",", ":")).encode("ascii")


def _plain(o):
    """What Python's json needs for the values orjson's OPT_SERIALIZE_NUMPY writes."""
    tolist = getattr(o, "tolist", None)
    return tolist() if tolist is not None else str(o)


class OutOfMemory(OutputError):
    """No room to build the output in (an address-space limit, a full machine)."""


HUGE_STRING = 1 << 20
"""Characters: a string this long goes to Python's encoder under a memory limit (see json_bytes)."""

RESERVE_BELOW = 1 << 20
"""Documents estimated smaller than this are written without the memory check."""


def json_size(obj) -> tuple[int, int]:
    """(an upper estimate of ``obj``'s JSON in bytes, its longest string in characters): every
    string at 3 bytes a character (1 when ASCII, which CPython knows without looking), 16 bytes a
    number, key and indent."""
    n, longest, stack = 0, 0, [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            n += len(o) + 8 if o.isascii() else 3 * len(o) + 8
            longest = max(longest, len(o))
        elif isinstance(o, dict):
            n += 16 * len(o)
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            n += 16 * len(o)
            stack.extend(o)
        else:
            n += 24
    return n, longest


def _capped() -> bool:
    """An address-space or data limit is set (``ulimit -v``, ``prlimit --as``): the only case where
    orjson's allocation fails inside it (without one, the kernel's OOM killer acts, not a NULL)."""
    try:
        import resource
    except ImportError:
        return False
    limits = [resource.RLIMIT_AS] + ([resource.RLIMIT_DATA] if hasattr(resource, "RLIMIT_DATA") else [])
    return any(resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in limits)


def reserve(size: int, longest: int) -> None:
    """Check there is room for a JSON of ``size`` bytes before orjson builds it: map (and unmap,
    untouched) what its growing buffer, its per-string reservation and json_safe need at once."""
    if size < RESERVE_BELOW:
        return
    import mmap
    try:
        mmap.mmap(-1, 3 * size + 12 * longest).close()
    except (OSError, MemoryError, OverflowError):
        raise OutOfMemory(f"out of memory for the JSON output (about {size / 1e6:,.0f} MB) under this "
                          "process's memory limit: raise it, or write less (--top, --depth, --filter)") from None


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
    from tracetui.report.export import render_report, report_tables, round_rows
    tabs = tables if tables is not None else report_tables(doc)
    for tab in tabs:  # tables built before the rounding (a ladder's) are rounded the same way
        tab.rows = round_rows(tab.columns, tab.rows)
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
