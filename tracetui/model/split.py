"""Decode and index a large trace on two cores: the second half of ``traceEvents`` in a forked child.

Decoding and indexing are per-event Python work that holds the GIL, so threads cannot share it;
a forked child can, and it sees the file's bytes without a copy. This is only an optimisation:
anything unexpected (no fork, a file that is not valid JSON, a split that lands inside a value,
a child that fails or hangs) returns None and the caller takes the one-process path, which is
also the one that repairs broken files. The result is the same store the one-process path builds.
"""
from __future__ import annotations

import re
import time
from typing import Union

import msgspec

from . import forked
from .events import EventStore, build_store, concat_stores
from .load import LENIENT_NOTE, Document, Event, LenientEvent, first_byte

MIN_BYTES = 16 << 20
"""Below this the fork costs more than it saves (measured ~60 ms on 61 MB, when a full envelope pass preceded it)."""


class _Envelope(msgspec.Struct):
    """The document with traceEvents left undecoded: validates the whole file and locates the array."""
    traceEvents: msgspec.Raw
    deviceProperties: Union[list, None] = None
    distributedInfo: Union[dict, None] = None
    tracetui: Union[dict, None] = None
    schemaVersion: Union[int, str, None] = None
    baseTimeNanoseconds: Union[int, float, None] = None


_envelope = msgspec.json.Decoder(_Envelope)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_lists = (msgspec.json.Decoder(list[Event]), msgspec.json.Decoder(list[LenientEvent]))
_SEP = re.compile(rb"\}\s*,")
TIMES: dict = {}
"""Stage times of the last split load, both processes (for benchmarks)."""


def enabled(data: bytes, min_bytes: int | None = None) -> bool:
    return len(data) >= (MIN_BYTES if min_bytes is None else min_bytes) and forked.available()


def _decode_list(buf) -> tuple[list, bool]:
    """A JSON array of events: strict schema first, then the lenient one (like load._decode_fast)."""
    try:
        return _lists[0].decode(buf), False
    except msgspec.ValidationError:
        return _lists[1].decode(buf), True


def _split_point(arr: memoryview, tries: int = 64) -> int | None:
    """A comma near the middle that looks like it separates two events (the next one decodes as one).

    Only a guess: the parent's decode of the first half is what proves the comma is between events.
    """
    pos = len(arr) // 2
    for _ in range(tries):
        m = _SEP.search(arr, pos)
        if m is None:
            return None
        c = m.end() - 1
        n = _SEP.search(arr, c + 1)
        end = n.start() + 1 if n else len(arr) - 1
        try:
            evs = _lists[1].decode(b"[" + bytes(arr[c + 1:end]) + b"]")
            if evs and evs[0].ph:
                return c
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
        pos = c + 1
    return None


def _quick_envelope(data: bytes, tries: int = 16, brackets: int = 4096) -> tuple[_Envelope, memoryview, int] | None:
    """The document's other keys and its traceEvents array, without scanning the array (~1.5 s/GB).

    The head before the array and the tail after its closing bracket (a ``]`` right after an
    event's ``}``) are decoded as one document with an empty traceEvents. That places the array
    only together with the two halves' decodes, which must then succeed: a bracket guessed
    wrong (a list of objects in the tail) makes the second half fail, and the caller retries
    with the full pass.
    """
    m = _EVENTS_KEY.search(data)
    if m is None:
        return None
    a = m.end() - 1  # the array's opening bracket
    end = len(data)
    for _ in range(brackets):
        p = data.rfind(b"]", a, end)
        if p < 0:
            return None
        end = p
        q = p - 1
        while q > 0 and data[q] in b" \t\r\n":
            q -= 1
        if data[q] not in b"}[":
            continue
        try:
            env = _envelope.decode(data[:a] + b"[]" + data[p + 1:])
        except (msgspec.DecodeError, msgspec.ValidationError):
            tries -= 1
            if not tries:
                return None
            continue
        return (env, memoryview(data)[a:p + 1], a) if bytes(env.traceEvents) == b"[]" else None
    return None


def _full_envelope(data: bytes) -> tuple[_Envelope, memoryview, None] | None:
    """The same by decoding the whole document once: proves where the array is, at full cost."""
    try:
        env = _envelope.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return env, memoryview(env.traceEvents), None  # the array's offset in data is not known


def decode_index(data: bytes, min_bytes: int | None = None) -> tuple[Document, EventStore, bool] | None:
    """(document without its events, the full event store, needed the lenient schema) or None."""
    if not enabled(data, min_bytes) or first_byte(data) != b"{":
        return None
    found = _quick_envelope(data)
    got = _decode_halves(data, *found) if found else None
    if got is None:
        found = _full_envelope(data)
        got = _decode_halves(data, *found) if found else None
    return got


def _decode_halves(data: bytes | bytearray, env: _Envelope, arr: memoryview,
                   base: int | None) -> tuple[Document, EventStore, bool] | None:
    """Fork; each process decodes and indexes one half of ``arr`` (the traceEvents array).

    Each half needs one bracket where the split comma is. When ``data`` is a bytearray and
    ``base`` is where ``arr`` starts in it, that byte is swapped in place (the child's copy is
    its own after the fork; the parent restores the comma), else the half is copied out.
    """
    c = _split_point(arr)
    if c is None:
        return None
    in_place = base is not None and isinstance(data, bytearray)

    def half(first: bool) -> tuple[list, bool]:
        """Decode one half. In place, the split comma becomes its bracket and is put back (in a
        child that write stays in its own copy-on-write page)."""
        if in_place:
            data[base + c] = 0x5D if first else 0x5B  # "]" or "["
            try:
                return _decode_list(arr[:c + 1] if first else arr[c:])
            finally:
                data[base + c] = 0x2C  # the comma again: the buffer is the lazy args pass's source
        if first:
            buf = bytearray(c + 1)
            buf[:c] = arr[:c]
            buf[c:] = b"]"
        else:
            buf = bytearray(len(arr) - c)
            buf[0:1] = b"["
            buf[1:] = arr[c + 1:]
        return _decode_list(buf)

    def second() -> tuple:
        t0 = time.perf_counter()
        events, lenient = half(first=False)
        t1 = time.perf_counter()
        store = build_store(events)
        return store, lenient, {"child decode": t1 - t0, "child index": time.perf_counter() - t1}

    def first() -> tuple:
        t0 = time.perf_counter()
        events, lenient = half(first=True)
        t1 = time.perf_counter()
        store = build_store(events, source=data)
        return store, len(events), lenient, {"parent decode": t1 - t0, "parent index": time.perf_counter() - t1}

    t0 = time.perf_counter()
    try:
        got, (store1, offset, lenient1, parent_t) = forked.beside(second, first, retry=False)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # a split inside a value, or a broken file: the one-process path decides
    if got is None:
        return None  # no fork, or the child failed: the one-process path, as for any surprise
    store2, lenient2, child_t = got
    TIMES.clear()
    TIMES.update({**parent_t, **child_t, "both": time.perf_counter() - t0})
    doc = Document(traceEvents=[], deviceProperties=env.deviceProperties, distributedInfo=env.distributedInfo,
                   tracetui=env.tracetui, schemaVersion=env.schemaVersion,
                   baseTimeNanoseconds=env.baseTimeNanoseconds)
    return doc, concat_stores(store1, store2, offset), lenient1 or lenient2
