"""The shapes a trace's JSON is decoded into (msgspec Structs), their decoders, and the lazy
re-reads of the same bytes (each event's written times, its raw args); ``clean_meta`` turns the
document's other keys into what the model uses.

Only the few link fields are decoded eagerly (``LinkArgs``); ``args`` stay undecoded
(``msgspec.Raw``) until the detail pane or the memory model asks.
"""
from __future__ import annotations

import re
from typing import Union

import msgspec

from tracetui.read.source import first_byte

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


class TextTimesEvent(Event):
    """An event whose fractional ts stays its text (decoded with ``float_hook=str``): used
    where the file's head shows epoch-sized fractional times, so no second pass re-reads them.
    (Durations are small: a large fractional one is re-read, see times.py.)"""
    ts: object = NAN


class LenientTextTimesEvent(LenientEvent):
    ts: object = NAN


TEXT_TIMES = (TextTimesEvent, LenientTextTimesEvent)

_BIG_FRACTION = re.compile(rb'"ts"\s*:\s*-?\d{14,}[.eE]')
"""A ts of 14+ integer digits (>= 1e13 µs, past times.EXACT_BELOW_US) with a fraction: float64
does not hold it to the ns (an epoch timestamp, 16 digits)."""


def text_times(data) -> bool:
    """Whether to decode times as text: the file's first MB has an epoch-sized fractional time."""
    return _BIG_FRACTION.search(data, 0, min(len(data), 1 << 20)) is not None


class RawArgs(msgspec.Struct, gc=False):
    """Second, lazy pass: each event's args as undecoded bytes, for the detail pane."""
    args: msgspec.Raw = msgspec.Raw(b"{}")


class Document(msgspec.Struct):
    """The top-level object; unknown keys are skipped. The other keys take any JSON value, so
    an odd one cannot reject the file: ``clean_meta`` keeps what is usable."""
    traceEvents: list[Event]
    deviceProperties: object = None
    distributedInfo: object = None
    tracetui: object = None
    schemaVersion: object = None
    baseTimeNanoseconds: object = None
    host_name: object = None


class LenientDocument(Document):
    traceEvents: list[LenientEvent]


class TextTimesDocument(Document):
    traceEvents: list[TextTimesEvent]


class LenientTextTimesDocument(Document):
    traceEvents: list[LenientTextTimesEvent]


class RawDocument(msgspec.Struct):
    traceEvents: list[RawArgs]


class EachDocument(msgspec.Struct):
    """The document with every event left undecoded, to decode them one by one."""
    traceEvents: list[msgspec.Raw]
    deviceProperties: object = None
    distributedInfo: object = None
    tracetui: object = None
    schemaVersion: object = None
    baseTimeNanoseconds: object = None
    host_name: object = None


class RawTimes(msgspec.Struct, gc=False):
    """Each event's ts and dur as written, for the large ones a float cannot hold to the ns:
    decoded with ``float_hook=str``, so a number with a fraction or exponent stays its text
    (an integer is an int, exact already)."""
    ts: object = None
    dur: object = None


class RawTimesDocument(msgspec.Struct):
    traceEvents: list[RawTimes]



_decoders = {False: (msgspec.json.Decoder(Document), msgspec.json.Decoder(list[Event])),
             True: (msgspec.json.Decoder(LenientDocument), msgspec.json.Decoder(list[LenientEvent]))}
_text_decoders = {
    False: (msgspec.json.Decoder(TextTimesDocument, float_hook=str),
            msgspec.json.Decoder(list[TextTimesEvent], float_hook=str)),
    True: (msgspec.json.Decoder(LenientTextTimesDocument, float_hook=str),
           msgspec.json.Decoder(list[LenientTextTimesEvent], float_hook=str))}
_raw_decoders = (msgspec.json.Decoder(RawDocument), msgspec.json.Decoder(list[RawArgs]))


_raw_times_decoders = (msgspec.json.Decoder(RawTimesDocument, float_hook=str),
                       msgspec.json.Decoder(list[RawTimes], float_hook=str))


_each_decoders = (msgspec.json.Decoder(EachDocument), msgspec.json.Decoder(list[msgspec.Raw]))


def _raws(data) -> list:
    """Every entry of traceEvents, undecoded (the document's shape was checked already)."""
    if first_byte(data) == b"[":
        return _each_decoders[1].decode(data)
    return _each_decoders[0].decode(data).traceEvents


def _one_by_one(data, decoder, default) -> list:
    """Each entry decoded on its own, ``default`` where one does not fit (a file whose
    wrong-typed events were skipped: the positions must still line up)."""
    try:
        raws = _raws(data)
    except msgspec.DecodeError:  # invalid UTF-8 the first decode never read: replaced (same positions)
        from tracetui.read import repair  # noqa: PLC0415 - damaged files only
        raws = _raws(repair.fix_utf8(data)[0])
    out = []
    for r in raws:
        try:
            out.append(decoder.decode(r))
        except msgspec.DecodeError:
            out.append(default)
    return out


_one_times, _one_args = msgspec.json.Decoder(RawTimes, float_hook=str), msgspec.json.Decoder(RawArgs)


def raw_times(data) -> list:
    """Every event's written ts/dur (``RawTimes``), in file order: the exact-time re-read."""
    try:
        if first_byte(data) == b"[":
            return _raw_times_decoders[1].decode(data)
        return _raw_times_decoders[0].decode(data).traceEvents
    except msgspec.DecodeError:  # a wrong-typed event, or invalid UTF-8 inside one the decode left out
        return _one_by_one(data, _one_times, RawTimes())


def raw_args(data: bytes) -> list:
    """Every event's raw args, in file order (the lazy second pass over the same bytes)."""
    try:
        if first_byte(data) == b"[":
            return [e.args for e in _raw_decoders[1].decode(data)]
        return [e.args for e in _raw_decoders[0].decode(data).traceEvents]
    except msgspec.DecodeError:
        return [e.args for e in _one_by_one(data, _one_args, RawArgs())]


BAD_EVENT_CAT = "\x00"
"""Category prefix of the stand-in for an event that could not be read (``build_store`` counts
them by the field named after it): it keeps every later event at its position in the file."""

_PROVENANCE_TEXT = ("workload", "impl", "dtype", "device", "device_type", "torch", "triton", "cuda",
                    "python", "date", "command")
"""Keys of the ``tracetui`` provenance block that are shown as text."""


def _plain(v, depth: int = 0):
    """A JSON value made safe to show and re-serialise: ints beyond 64 bits as text, nesting
    cut at 16 levels (orjson refuses deeper), so no odd value can crash a report."""
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 64) else str(v)
    if depth >= 16:
        return "..."
    if isinstance(v, dict):
        return {str(k): _plain(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x, depth + 1) for x in v]
    return str(v)


def clean_meta(doc: Document) -> dict:
    """The document's other keys as the model uses them: each of the expected JSON type (else
    None), the provenance block's text fields as text, nothing that cannot be re-serialised."""
    prov = doc.tracetui if isinstance(doc.tracetui, dict) else None
    if prov is not None:
        prov = _plain(prov)
        for k in _PROVENANCE_TEXT:
            if prov.get(k) is not None and not isinstance(prov[k], str):
                prov[k] = msgspec.json.encode(prov[k]).decode()
    schema = doc.schemaVersion
    return {"deviceProperties": _plain(doc.deviceProperties) if isinstance(doc.deviceProperties, list) else None,
            "distributedInfo": _plain(doc.distributedInfo) if isinstance(doc.distributedInfo, dict) else None,
            "tracetui": prov,
            "schemaVersion": schema if isinstance(schema, str) or (type(schema) is int and abs(schema) < 1 << 63) else None,
            "host_name": doc.host_name if isinstance(doc.host_name, str) else None,
            "baseTimeNanoseconds": base_time_ns(doc.baseTimeNanoseconds)}


def base_time_ns(v) -> int | None:
    """``baseTimeNanoseconds`` as an int (a float or, decoded with ``float_hook=str``, a text
    number is read from its digits), else None."""
    if type(v) is int:
        return v if abs(v) < 1 << 63 else None
    if isinstance(v, (float, str)):
        try:
            from decimal import Decimal
            d = Decimal(str(v))
            return int(d) if d.is_finite() and abs(d) < 1 << 63 else None
        except ArithmeticError:
            return None
    return None


