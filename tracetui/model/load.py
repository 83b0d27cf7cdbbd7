"""Bytes on disk -> typed events: fast path first, a tolerant path for the files real exporters break.

The fast path decodes straight into msgspec Structs and leaves each event's ``args`` undecoded
(``msgspec.Raw``); only the few link fields are decoded eagerly, in ``events.py``. The tolerant
path repairs invalid UTF-8, raw control characters, unescaped quotes in names and a truncated tail
(a killed exporter), and records what it did in ``LoadReport``.
"""
from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import msgspec

from .errors import TraceError

TRACE_GLOBS = ("*.pt.trace.json.gz", "*.pt.trace.json", "*.json.gz", "*.json")
"""What a trace folder (tensorboard_trace_handler's output) is searched for, best match first."""


NAN = float("nan")

LENIENT_NOTE = "some link fields have unexpected types (read leniently)"


class LinkArgs(msgspec.Struct, gc=False):
    """The args that link events, typed: decoded for every event in C; the rest stay undecoded."""
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    seq: int = msgspec.field(default=-1, name="Sequence number")
    fwd_tid: int = msgspec.field(default=-1, name="Fwd thread id")
    stream: int = -1
    name: Union[str, None] = None      # thread_name / process_name metadata


class LenientLinkArgs(msgspec.Struct, gc=False):
    """Same fields, any JSON type: the fallback when a file has e.g. string correlation ids."""
    correlation: object = None
    external_id: object = msgspec.field(default=None, name="External id")
    seq: object = msgspec.field(default=None, name="Sequence number")
    fwd_tid: object = msgspec.field(default=None, name="Fwd thread id")
    stream: object = None
    name: object = None


class Event(msgspec.Struct, gc=False):
    """One traceEvents entry as Kineto writes it; missing times decode as NaN and are counted."""
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[int, float] = NAN    # an integer stays a Python int: exact at any size (times.py)
    dur: Union[int, float] = NAN
    id: Union[int, str, None] = None
    args: LinkArgs = msgspec.field(default_factory=LinkArgs)


class LenientEvent(Event):
    """The same event with link fields of any JSON type."""
    args: LenientLinkArgs = msgspec.field(default_factory=LenientLinkArgs)


class RawArgs(msgspec.Struct, gc=False):
    """Second, lazy pass: each event's args as undecoded bytes, for the detail pane."""
    args: msgspec.Raw = msgspec.Raw(b"{}")


class Document(msgspec.Struct):
    """The top-level object; unknown keys are skipped."""
    traceEvents: list[Event]
    deviceProperties: Union[list, None] = None
    distributedInfo: Union[dict, None] = None
    tracetui: Union[dict, None] = None
    schemaVersion: Union[int, str, None] = None
    baseTimeNanoseconds: Union[int, float, None] = None


class LenientDocument(Document):
    traceEvents: list[LenientEvent]


class RawDocument(msgspec.Struct):
    traceEvents: list[RawArgs]


class RawTimes(msgspec.Struct, gc=False):
    """Each event's ts and dur as written, for the large ones a float cannot hold to the ns."""
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


class RawTimesDocument(msgspec.Struct):
    traceEvents: list[RawTimes]


@dataclass
class LoadReport:
    """What loading had to do beyond a clean decode; empty lists mean a clean file."""
    repairs: list[str] = field(default_factory=list)
    truncated_bytes: int = 0
    compressed: bool = False
    raw_size: int = 0


def resolve_input(path: Path) -> Path:
    """A trace file, or the newest trace inside a tensorboard_trace_handler folder."""
    path = Path(path)
    if path.is_dir():
        for pattern in TRACE_GLOBS:
            found = sorted(path.glob(pattern), key=lambda p: (p.stat().st_mtime, p.name))
            if found:
                return found[-1]
        raise TraceError(path, "folder holds no *.pt.trace.json[.gz] trace")
    if not path.exists():
        raise TraceError(path, "no such file")
    if not path.is_file():
        raise TraceError(path, "not a regular file")
    return path


def folder_traces(path: Path) -> list[Path]:
    """Every trace in a folder, newest last (for pickers)."""
    for pattern in TRACE_GLOBS:
        found = sorted(Path(path).glob(pattern), key=lambda p: (p.stat().st_mtime, p.name))
        if found:
            return found
    return []


def first_byte(data) -> bytes:
    """The first non-blank byte, without copying a GB-sized buffer (``lstrip`` of a bytearray would)."""
    head = data[:4096].lstrip()
    return bytes(head[:1]) if head else bytes(data).lstrip()[:1]


def read_bytes(path: Path, report: LoadReport) -> bytes | bytearray:
    """File contents, gunzipped when it starts with the gzip magic; a damaged gzip keeps its prefix.

    A plain file comes back as a bytearray, so the two-process decode can close each half of
    traceEvents in place instead of copying half a file (the file itself is never written).
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic == b"\x1f\x8b":
                data = f.read()
            else:
                data = bytearray(os.fstat(f.fileno()).st_size)
                n = f.readinto(data)
                if n < len(data):  # the file shrank meanwhile
                    del data[n:]
                data += f.read()   # or grew
    except OSError as e:
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None
    report.raw_size = len(data)
    if not data:
        raise TraceError(path, "empty file")
    if data[:2] != b"\x1f\x8b":
        return data
    report.compressed = True
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data)
        if not d.eof:
            report.repairs.append("gzip stream ends early (truncated file)")
    except zlib.error as e:
        # keep whatever decompressed before the damage
        out = _salvage_gzip(data)
        if not out:
            raise TraceError(path, f"damaged gzip: {e}") from None
        report.repairs.append(f"gzip damaged ({e}); kept the {len(out):,} bytes before the damage")
    if not out:
        raise TraceError(path, "gzip holds no data")
    return out


def _salvage_gzip(data: bytes) -> bytes:
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = []
    for i in range(0, len(data), 1 << 16):
        try:
            out.append(d.decompress(data[i:i + (1 << 16)]))
        except zlib.error:
            break
    return b"".join(out)


_decoders = {False: (msgspec.json.Decoder(Document), msgspec.json.Decoder(list[Event])),
             True: (msgspec.json.Decoder(LenientDocument), msgspec.json.Decoder(list[LenientEvent]))}
_raw_decoders = (msgspec.json.Decoder(RawDocument), msgspec.json.Decoder(list[RawArgs]))


_raw_times_decoders = (msgspec.json.Decoder(RawTimesDocument), msgspec.json.Decoder(list[RawTimes]))


def raw_times(data) -> list:
    """Every event's written ts/dur (``RawTimes``), in file order: the exact-time re-read."""
    if first_byte(data) == b"[":
        return _raw_times_decoders[1].decode(data)
    return _raw_times_decoders[0].decode(data).traceEvents


def raw_args(data: bytes) -> list:
    """Every event's raw args, in file order (the lazy second pass over the same bytes)."""
    if first_byte(data) == b"[":
        return [e.args for e in _raw_decoders[1].decode(data)]
    return [e.args for e in _raw_decoders[0].decode(data).traceEvents]


def decode(path: Path, data: bytes, report: LoadReport) -> tuple[Document, bytes]:
    """Typed decode -> (document, the bytes it came from, repaired if it had to be).

    Invalid JSON takes the tolerant path; a non-trace raises TraceError.
    """
    try:
        return _decode_fast(path, data, report), data
    except msgspec.DecodeError as e:
        first = first_byte(data)
        if first not in (b"{", b"["):
            raise TraceError(path, f"not JSON (starts with {first!r})") from None
        return _decode_tolerant(path, data, report, e)


def _decode_fast(path: Path, data: bytes, report: LoadReport) -> Document:
    """Strict schema first (ints where Kineto writes ints); a lenient one if a file disagrees."""
    bare = first_byte(data) == b"["  # Chrome's bare array form
    for lenient in (False, True):
        doc_dec, list_dec = _decoders[lenient]
        try:
            doc = Document(traceEvents=list_dec.decode(data)) if bare else doc_dec.decode(data)
        except msgspec.ValidationError as e:
            if lenient:
                raise TraceError(path, f"not a PyTorch profiler trace ({_short(e)})") from None
            continue
        if lenient:
            report.repairs.append(LENIENT_NOTE)
        return doc


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:160]


_CTRL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_NAME_LINE = re.compile(rb'("name": ")(.*?)(", "(?:pid|tid|ph|cat|ts|dur|id|args)")')


def _escape_inner_quotes(m: re.Match) -> bytes:
    inner = re.sub(rb'(?<!\\)"', rb'\\"', m.group(2))
    return m.group(1) + inner + m.group(3)


def _decode_tolerant(path: Path, data: bytes, report: LoadReport, first_error: Exception) -> Document:
    text = data.decode("utf-8", errors="replace").encode("utf-8")
    if len(text) != len(data) or text != data:
        report.repairs.append("replaced invalid UTF-8 bytes")
    if _CTRL.search(text):
        text = _CTRL.sub(lambda m: b"\\u%04x" % m.group(0)[0], text)
        report.repairs.append("escaped raw control characters")
    fixed = _NAME_LINE.sub(_escape_inner_quotes, text)
    if fixed != text:
        report.repairs.append("escaped unescaped quotes in names")
        text = fixed
    try:
        return _decode_fast(path, text, report), text
    except msgspec.DecodeError:
        pass
    doc, cut = _decode_truncated(path, text, report)
    if doc is None:
        raise TraceError(path, f"invalid JSON that could not be repaired ({_short(first_error)})")
    report.truncated_bytes = len(text) - cut
    report.repairs.append(f"trace ends early: kept {len(doc.traceEvents):,} complete events, "
                          f"dropped the last {report.truncated_bytes:,} bytes")
    closed = text[:cut] + (b"]" if first_byte(text) == b"[" else b"]}")
    return doc, closed


_MAX_CUT_TRIES = 64
"""How many candidate event boundaries, from the end, the truncation repair tries."""


def _decode_truncated(path: Path, text: bytes, report: LoadReport) -> tuple[Document | None, int]:
    """Close the traceEvents list after the last complete event that makes the file decode."""
    start = text.find(b'"traceEvents"')
    bare = first_byte(text) == b"["
    if start < 0 and not bare:
        return None, 0
    end = len(text)
    for _ in range(_MAX_CUT_TRIES):
        cut = text.rfind(b"}", 0, end)
        if cut <= start:
            break
        head = text[: cut + 1]
        try:
            return _decode_fast(path, head + (b"]" if bare else b"]}"), report), cut + 1
        except msgspec.DecodeError:
            end = cut
    return None, 0
