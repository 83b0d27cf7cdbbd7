"""Loading is stages: resolve the input -> bytes (caps, refusals) -> decode strategy (two
processes / fast / tolerant) -> events -> store. ``read_store`` runs them in that order; the model
(``tracetui.model.trace.load_trace``) goes on with steps -> tree -> rollups.

The decode strategies, first that applies: a large valid file is decoded and indexed in pieces
on N cores (``split.py``; a plain one is read through a read-only map, source.py); else the fast path decodes straight into msgspec Structs (``schema.py``);
invalid JSON takes the tolerant path (``repair.py``, linear in the file's size), which repairs
invalid UTF-8, raw control characters, unescaped quotes in names, stray bytes and a truncated
tail (a killed exporter) event by event, never dropping a complete event, and says what it did
in ``LoadReport``.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import msgspec
import numpy as np

from tracetui.read import split as _split
from tracetui.read.depth import decode_limit
from tracetui.read.errors import TraceError
from tracetui.read.events import GPU_KINDS, EventStore, build_store, kind_mask
from tracetui.read.schema import (  # noqa: F401 - the schema's names, as read.load has always offered them
    BAD_EVENT_CAT, LENIENT_NOTE, NAN, TEXT_TIMES, Document, EachDocument, Event, LenientDocument, LenientEvent,
    LenientLinkArgs, LenientTextTimesDocument, LenientTextTimesEvent, LinkArgs, RawArgs, RawDocument, RawTimes,
    RawTimesDocument, TextTimesDocument, TextTimesEvent, _decoders, _each_decoders, _text_decoders, base_time_ns,
    clean_meta, raw_args, raw_times, text_times)
from tracetui.read.source import (  # noqa: F401 - as above
    DEFAULT_MAX_BYTES, GZ_IN_STEP, GZ_OUT_STEP, HEAD_BYTES, MAX_BYTES_CEILING, MAX_BYTES_ENV, TRACE_GLOBS,
    CUT_SHORT, LoadReport, Source, first_byte, folder_traces, gunzip, in_memory, max_bytes, parse_size,
    read_bytes, read_input, resolve_input, still_whole)


@dataclass
class Events:
    """Stages 3-5's output: the trace's events as one columnar store, the document's other keys
    (``clean_meta``), what loading had to do, and how long decoding and indexing took."""
    path: Path
    store: EventStore
    meta: dict
    report: LoadReport
    timings: dict = field(default_factory=dict)


LOST_GPU_NOTE = ("no GPU activity survived the cut (Kineto writes runtime calls and kernels after "
                 "the CPU events): device times read 0")
"""Said of a truncated trace of a GPU run (it lists devices) whose kept part has no GPU activity."""


def decode_store(src: Source, early=None, progress: Callable[[str, float], None] | None = None,
                 workers: int | None = None) -> Events:
    """Stages 3-5: the decode strategy -> events -> store. Two processes where the file is large
    and valid (``early``'s child, started before the UI, or one forked now), else one process:
    fast, or tolerant for invalid JSON. ``progress(stage, fraction of the whole load)``: decoding
    from 0.15 to 0.75 after each piece decoded here (it may raise to cancel), indexing at 0.55.
    ``workers``: decode processes (``forked.default_workers()`` when None; 1: this one only)."""
    say = progress or (lambda stage, frac: None)
    decoded = lambda frac: say("decoding", 0.15 + 0.6 * frac)  # noqa: E731
    path, data, report = src.path, src.data, src.report
    t0 = time.perf_counter()
    split = early.finish(decoded) if early is not None and early.path == path else None
    if split is None:
        split = _split.decode_index(data, progress=decoded, workers=workers)  # None: small, invalid, no fork
    if split is not None:
        doc, store, lenient = split
        if lenient:
            report.repairs.append(LENIENT_NOTE)
        timings = {f"decode+index ({_split.TIMES.get('processes', 2)} processes)": time.perf_counter() - t0}
    else:
        doc, data = decode(path, data, report)
        t1 = time.perf_counter()
        say("indexing", 0.55)
        store = build_store(doc.traceEvents, source=data)
        timings = {"decode": t1 - t0, "index": time.perf_counter() - t1}
    if not len(store) and not store.flows:
        raise TraceError(path, _why_empty(store))
    if report.truncated_bytes and doc.deviceProperties and not kind_mask(store.kind, GPU_KINDS).any():
        report.repairs.append(LOST_GPU_NOTE)
    return Events(path, store, clean_meta(doc), report, timings)


PROFILER_OWN = frozenset({"Trace", "(none) (i)"})
"""Skipped-category labels of what torch's profiler writes about itself (its ``cat: Trace`` span
and its uncategorised window instants): a trace holding only these recorded nothing."""


def _why_empty(store: EventStore) -> str:
    """Why a trace gave no events, naming what was left out (categories, unreadable events)."""
    if store.skipped and set(store.skipped) <= PROFILER_OWN and not store.unreadable and not store.times_out_of_range:
        return ("the profiler recorded no events: only its own span and markers; the profiled code ran no torch ops, or a "
                "schedule= never reached an active step (call prof.step() once per step)")
    left = [f"{c:,} {k}" for k, c in sorted(store.skipped.items(), key=lambda kv: -kv[1])]
    bad = sum(store.unreadable.values())
    if bad:
        fields = ", ".join(sorted(store.unreadable))
        return f"not a PyTorch profiler trace: {bad:,} event(s) with a field of the wrong type ({fields})"
    if store.times_out_of_range:
        left.insert(0, f"{store.times_out_of_range:,} with ts/dur out of range")
    if not left:
        return "trace holds no events"
    more = f" and {len(left) - 5} more" if len(left) > 5 else ""
    return f"trace holds no events tracetui uses (skipped: {', '.join(left[:5])}{more})"

NESTING_NOTE = "JSON nested deeper than the decoder's limit (about 990 levels)"


def decode(path: Path, data: bytes, report: LoadReport) -> tuple[Document, bytes]:
    """Typed decode -> (document, the bytes it came from, repaired if it had to be).

    Invalid JSON takes the tolerant path; a non-trace raises TraceError. A file's map whose file
    was cut short since (a decode helper met the short read) raises too: reading it would SIGBUS.
    """
    if not still_whole(data):
        raise TraceError(path, CUT_SHORT)
    try:
        with decode_limit():  # the same nesting limit whatever the process set (read/depth.py)
            try:
                return _decode_fast(path, data, report), data
            except msgspec.DecodeError as e:
                first = first_byte(data)
                if first not in (b"{", b"["):
                    raise TraceError(path, f"not JSON (starts with {first!r})") from None
                data = in_memory(data)  # a file's map: the repairs work on a copy
                return _decode_tolerant(path, data, report, e)
    except RecursionError:  # msgspec counts depth, also while skipping a value it does not keep
        raise TraceError(path, NESTING_NOTE) from None



_one_event = msgspec.json.Decoder(LenientEvent)
_FIELD = re.compile(r"at `\$(?:\[\d+\])?\.?([A-Za-z_ ]*)")


def _decode_fast(path: Path, data: bytes, report: LoadReport) -> Document:
    """Strict schema first (ints where Kineto writes ints); a lenient one if a file disagrees;
    event by event if even that fails, skipping (and counting) the events that do not fit."""
    bare = first_byte(data) == b"["  # Chrome's bare array form
    decoders = _text_decoders if text_times(data) else _decoders
    for lenient in (False, True):
        doc_dec, list_dec = decoders[lenient]
        try:
            doc = Document(traceEvents=list_dec.decode(data)) if bare else doc_dec.decode(data)
        except msgspec.ValidationError:
            if lenient:
                return _decode_each(path, data, bare, report)
            continue
        if lenient:
            report.repairs.append(LENIENT_NOTE)
        return doc


def _decode_each(path: Path, data: bytes, bare: bool, report: LoadReport) -> Document:
    """One event at a time (slow, only for a file some event of which has a wrong-typed field):
    an event that does not fit becomes a stand-in that ``build_store`` counts by field."""
    try:
        each = EachDocument(traceEvents=_each_decoders[1].decode(data)) if bare else _each_decoders[0].decode(data)
    except msgspec.ValidationError as e:
        raise TraceError(path, f"not a PyTorch profiler trace ({_short(e)})") from None
    events, bad = [], 0
    for raw in each.traceEvents:
        try:
            events.append(_one_event.decode(raw))
        except msgspec.ValidationError as e:
            m = _FIELD.search(str(e))
            field_name = (m.group(1) if m else "") or "(not an object)"
            events.append(LenientEvent(cat=BAD_EVENT_CAT + field_name))
            bad += 1
    report.repairs.append(LENIENT_NOTE)
    if bad:
        report.repairs.append(f"left out {bad:,} event(s) with a field of the wrong type")
    return Document(traceEvents=events, deviceProperties=each.deviceProperties,
                    distributedInfo=each.distributedInfo, tracetui=each.tracetui,
                    schemaVersion=each.schemaVersion, baseTimeNanoseconds=each.baseTimeNanoseconds,
                    host_name=each.host_name)


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:160]


def _decode_tolerant(path: Path, data: bytes, report: LoadReport, first_error: Exception) -> tuple[Document, bytes]:
    """Repair what real exporters break (see repair.py), saying what was repaired and dropped."""
    from tracetui.read import repair  # noqa: PLC0415 - damaged files only: not on every load's import
    text, utf8 = repair.fix_utf8(data)
    if utf8:
        report.repairs.append(f"replaced {utf8:,} invalid UTF-8 sequence(s) with U+FFFD")
        try:
            return _decode_fast(path, text, report), text
        except msgspec.DecodeError:
            pass
    fixed, notes, cut = repair.recover(path, text, first_error)
    del text
    report.repairs.extend(notes)
    report.truncated_bytes = cut
    try:
        return _decode_fast(path, fixed, report), fixed
    except msgspec.DecodeError as e:  # each piece decoded on its own: this is tracetui's bug, not the file's
        raise TraceError(path, f"tracetui's repair of this file went wrong ({_short(e)}); "
                               "please report it with the file") from None

