"""Bytes on disk -> typed events: fast path first, a tolerant path for the files real exporters break.

The fast path decodes straight into msgspec Structs and leaves each event's ``args`` undecoded
(``msgspec.Raw``); only the few link fields are decoded eagerly, in ``events.py``. The tolerant
path (``repair.py``, linear in the file's size) repairs invalid UTF-8, raw control characters,
unescaped quotes in names, stray bytes and a truncated tail (a killed exporter) event by event,
never dropping a complete event, and records what it did, with counts, in ``LoadReport``.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import msgspec

from tracetui.read import repair
from tracetui.read.errors import TraceError

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


@dataclass
class LoadReport:
    """What loading had to do beyond a clean decode; empty lists mean a clean file."""
    repairs: list[str] = field(default_factory=list)
    truncated_bytes: int = 0
    compressed: bool = False
    raw_size: int = 0


MAX_BYTES_ENV = "TRACETUI_MAX_BYTES"
DEFAULT_MAX_BYTES = 8 << 30
"""The most a trace may take once read (and gunzipped): the smaller of 8 GiB and half the
machine's RAM, unless TRACETUI_MAX_BYTES says otherwise (bytes, or with a K/M/G/T suffix). A load
needs about 2.4x the file's size, so anything larger could not be shown; a gzip bomb stops here."""

MAX_BYTES_CEILING = 1 << 40
"""The largest TRACETUI_MAX_BYTES taken (1 TiB): a load needs ~2.4x its input in RAM, so a
larger cap could only mean "no limit", which a gzip bomb would use."""

_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]?)I?B?")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``TRACETUI_MAX_BYTES``'s value in bytes: a positive number, optionally with a K/M/G/T
    suffix (``64M``, ``1.5G``, ``8GiB``), at most ``MAX_BYTES_CEILING``; anything else raises
    TraceError naming the variable (inf, nan, -5, 0, 0x10, ``abc`` are mistakes, not "no limit")."""
    from decimal import Decimal  # noqa: PLC0415
    m = _SIZE.fullmatch(text.strip().upper())
    n = int(Decimal(m.group(1)) * _SCALE[m.group(2)]) if m else 0
    if not m or n <= 0:
        raise TraceError(MAX_BYTES_ENV, f"{text!r} is not a size (a positive number of bytes, "
                                        f"or with K/M/G/T: 64M, 8G; at most 1T)")
    if n > MAX_BYTES_CEILING:
        raise TraceError(MAX_BYTES_ENV, f"{text!r} is over the maximum of 1T ({MAX_BYTES_CEILING:,} bytes)")
    return n


def max_bytes() -> int:
    """The read/gunzip limit in bytes (see DEFAULT_MAX_BYTES); a bad TRACETUI_MAX_BYTES raises."""
    text = os.environ.get(MAX_BYTES_ENV, "")
    if text.strip():
        return parse_size(text)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    return min(DEFAULT_MAX_BYTES, ram // 2) if ram > 0 else DEFAULT_MAX_BYTES


_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _stat(path: Path) -> os.stat_result:
    """``os.stat`` (symlinks followed) with the reasons it fails put for people."""
    try:
        return os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TraceError(path, "symlink loop") from None
        if e.errno == errno.ENOENT:
            if os.path.islink(path):
                raise TraceError(path, f"broken symlink (to {os.readlink(path)})") from None
            raise TraceError(path, "no such file") from None
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None


def _not_regular(st: os.stat_result) -> str | None:
    """What a non-regular file is ("a named pipe", ...), or None for a regular file."""
    if stat.S_ISREG(st.st_mode):
        return None
    return next((what for test, what in _FILE_KINDS if test(st.st_mode)), "not a regular file")


def _candidates(folder: Path) -> list[Path]:
    """The folder's trace files, newest last: regular files only (a broken symlink, a pipe or a
    link to a device is skipped unopened, since reading one could fail, block or never end)."""
    for pattern in TRACE_GLOBS:
        found = []
        for p in folder.glob(pattern):
            try:
                st = os.stat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((st.st_mtime, p.name, p))
        if found:
            return [p for _, _, p in sorted(found)]
    return []


def resolve_input(path: Path) -> Path:
    """A trace file, or the newest trace inside a tensorboard_trace_handler folder.

    Only regular files are taken: the path is stat'ed, never opened, to decide."""
    path = Path(path)
    st = _stat(path)
    if stat.S_ISDIR(st.st_mode):
        found = _candidates(path)
        if found:
            return found[-1]
        raise TraceError(path, "folder holds no *.pt.trace.json[.gz] trace (regular files only)")
    what = _not_regular(st)
    if what:
        raise TraceError(path, f"{what}, not a trace file")
    return path


def folder_traces(path: Path) -> list[Path]:
    """Every trace in a folder, newest last (for pickers)."""
    return _candidates(Path(path))


def first_byte(data) -> bytes:
    """The first non-blank byte, without copying a GB-sized buffer (``lstrip`` of a bytearray would)."""
    head = data[:4096].lstrip()
    return bytes(head[:1]) if head else bytes(data).lstrip()[:1]


def read_bytes(path: Path, report: LoadReport, limit: int | None = None) -> bytes | bytearray:
    """File contents, gunzipped when it starts with the gzip magic; a damaged gzip keeps its prefix.

    A plain file comes back as a bytearray, so the two-process decode can close each half of
    traceEvents in place instead of copying half a file (the file itself is never written).
    Only a regular file is read (checked before and after opening, without blocking), and no
    more than ``limit`` bytes (``max_bytes()``) of it or of what it gunzips to.
    """
    limit = max_bytes() if limit is None else limit
    what = _not_regular(_stat(path))
    if what:
        raise TraceError(path, f"{what}, not a trace file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a pipe swapped in cannot block us
        with open(fd, "rb") as f:
            st = os.fstat(fd)
            what = _not_regular(st)
            if what:
                raise TraceError(path, f"{what}, not a trace file")
            if st.st_size > limit:
                raise TraceError(path, f"{st.st_size:,} bytes, over the {limit:,}-byte limit ({MAX_BYTES_ENV})")
            head = f.read(HEAD_BYTES)
            f.seek(0)
            _check_head(path, head)
            if head[:2] == b"\x1f\x8b":
                data = f.read()
            else:
                data = bytearray(st.st_size)
                n = f.readinto(data)
                if n < len(data):  # the file shrank meanwhile
                    del data[n:]
                while more := f.read(1 << 20):  # or grew (in steps: read(n) allocates n up front)
                    data += more
                    if len(data) > limit:
                        raise TraceError(path, f"grew past the {limit:,}-byte limit ({MAX_BYTES_ENV}) while read")
    except OSError as e:
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None
    report.raw_size = len(data)
    if not data:
        raise TraceError(path, "empty file")
    if data[:2] != b"\x1f\x8b":
        return _text(path, data, report)
    report.compressed = True
    out = gunzip(path, data, report, limit)
    if not out:
        raise TraceError(path, "gzip holds no data (empty once gunzipped)")
    return _text(path, out, report)


HEAD_BYTES = 1 << 16
"""What is read of a file before the rest, to refuse one that cannot be JSON unread: a 2 GB
sparse file (all NULs) cost 2.1 GB of memory per MCP call before it was found not to be JSON."""

_JSON_STARTS = frozenset(b'{["\xef\xfe\xff\x00') | frozenset(b" \t\r\n")
"""Bytes a trace can start with: JSON, a byte-order mark, UTF-16/32 without one (a NUL)."""


def _check_head(path: Path, head: bytes) -> None:
    """Refuse, before the file is read, a head that no trace has: a first non-blank byte that
    starts no JSON text (gzip aside), or four NULs (no UTF-16/32 JSON starts so: a sparse hole)."""
    if head[:2] == b"\x1f\x8b" or not head:
        return
    first = head.lstrip()[:1]
    if head[:4] == b"\x00" * 4 or (first and first[0] not in _JSON_STARTS):
        raise TraceError(path, f"not JSON (starts with {(first or head[:1])!r})")


_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"),
         (b"\xfe\xff", "UTF-16"), (b"\xff\xfe", "UTF-16"))


def _text(path: Path, data: bytearray | bytes, report: LoadReport) -> bytearray | bytes:
    """The JSON text: a UTF-8 byte-order mark dropped (noted); UTF-16/32 and blank input named."""
    if data[:3] == b"\xef\xbb\xbf":
        report.repairs.append("skipped a UTF-8 byte-order mark")
        if isinstance(data, bytearray):
            del data[:3]
            return data
        return bytearray(memoryview(data)[3:])
    for bom, enc in _BOMS:
        if data[:len(bom)] == bom:
            raise TraceError(path, f"{enc} text, not UTF-8 JSON (convert it: iconv -f {enc} -t UTF-8)")
    head = bytes(data[:4])
    if len(head) == 4 and head.count(0) in (2, 3) and not head.replace(b"\x00", b"").strip(b'{["\r\n\t '):
        enc = "UTF-32" if head.count(0) == 3 else "UTF-16"
        raise TraceError(path, f"{enc} text, not UTF-8 JSON (convert it: iconv -f {enc} -t UTF-8)")
    if not first_byte(data):
        raise TraceError(path, f"holds only whitespace ({len(data):,} bytes), no JSON")
    return data


GZ_IN_STEP = 1 << 20
"""Compressed bytes fed to zlib at a time; a failing step is replayed in smaller steps."""
GZ_OUT_STEP = 4 << 20
"""The most zlib may write per call. With the buffer capped at the limit, a gzip bomb is
refused holding at most the limit plus one step (measured in tests/read/test_bounded_memory.py)."""


def gunzip(path: Path, data: bytes, report: LoadReport, limit: int) -> bytearray:
    """Every gzip member of ``data`` (``cat a.gz b.gz`` is one valid file), at most ``limit`` bytes.

    Damage keeps every byte that decompressed before it (a bad CRC: all of them), and a
    truncated stream keeps what it has; both are noted in ``report.repairs``.
    """
    out = _Out(data, limit, path)
    pos, view = 0, memoryview(data)
    while pos < len(data):
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not d.eof and pos < len(data):
            step = view[pos:pos + GZ_IN_STEP]
            saved, n0 = d.copy(), len(out)
            try:
                _inflate(d, step, out)
            except zlib.error as e:
                out.cut(n0)
                _inflate_until_error(saved, step, out)
                if not len(out):
                    raise TraceError(path, f"damaged gzip: {e}") from None
                report.repairs.append(f"gzip damaged ({e}); kept the {len(out):,} bytes before the damage")
                return out.done()
            pos += len(step) - (len(d.unused_data) if d.eof else 0)
        if not d.eof:
            report.repairs.append("gzip stream ends early (truncated file)")
            break
        rest = view[pos:]
        if bytes(rest[:2]) != b"\x1f\x8b":  # not another member
            if bytes(rest).strip(b"\x00"):  # zero padding is allowed after the last one
                report.repairs.append(f"ignored {len(rest):,} bytes after the gzip data")
            break
    return out.done()


class _Out:
    """The gunzipped bytes, grown in place into one bytearray (sized up front from the gzip
    trailer's length hint, never past the limit, so a GB-sized trace is not copied while it
    grows and a bomb that lies in its trailer gets no more than the limit)."""

    def __init__(self, data: bytes, limit: int, path: Path):
        hint = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
        self.buf = bytearray(min(hint, limit, 64 * len(data)))
        self.n, self.limit, self.path = 0, limit, path

    def __len__(self) -> int:
        return self.n

    def room(self) -> int:
        """How much zlib may write next: one step, or one byte past the limit (to see it crossed)."""
        return max(1, min(GZ_OUT_STEP, self.limit - self.n + 1))

    def add(self, piece: bytes) -> None:
        k = len(piece)
        if self.n + k > self.limit:
            raise TraceError(self.path, f"gzip expands past the {self.limit:,}-byte limit "
                                        f"(a gzip bomb? {MAX_BYTES_ENV} raises it)")
        if self.n + k <= len(self.buf):
            self.buf[self.n:self.n + k] = piece
        else:
            del self.buf[self.n:]
            self.buf += piece
        self.n += k

    def cut(self, n: int) -> None:
        self.n = n

    def done(self) -> bytearray:
        del self.buf[self.n:]
        return self.buf


def _inflate(d, buf, out: _Out) -> None:
    """Feed ``buf`` to the decompressor ``d``, at most ``out.room()`` bytes out per call."""
    while True:
        room = out.room()
        piece = d.decompress(buf, room)
        out.add(piece)
        if d.eof:
            return
        buf = d.unconsumed_tail
        if not buf and len(piece) < room:
            return


def _inflate_until_error(d, buf, out: _Out) -> None:
    """Replay ``buf`` (which made ``d`` fail) in ever smaller steps, down to single bytes, so
    that everything zlib produces before the damage is kept (a bad CRC loses nothing)."""
    for size in (4096, 64, 1):
        pos = 0
        while pos < len(buf):
            saved, n0 = d.copy(), len(out)
            try:
                _inflate(d, buf[pos:pos + size], out)
            except zlib.error:
                d = saved
                out.cut(n0)
                break
            pos += size
        buf = buf[pos:pos + size]


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


NESTING_NOTE = "JSON nested deeper than the decoder's limit (about 990 levels)"


def decode(path: Path, data: bytes, report: LoadReport) -> tuple[Document, bytes]:
    """Typed decode -> (document, the bytes it came from, repaired if it had to be).

    Invalid JSON takes the tolerant path; a non-trace raises TraceError.
    """
    try:
        try:
            return _decode_fast(path, data, report), data
        except msgspec.DecodeError as e:
            first = first_byte(data)
            if first not in (b"{", b"["):
                raise TraceError(path, f"not JSON (starts with {first!r})") from None
            return _decode_tolerant(path, data, report, e)
    except RecursionError:  # msgspec counts depth, also while skipping a value it does not keep
        raise TraceError(path, NESTING_NOTE) from None


BAD_EVENT_CAT = "\x00"
"""Category prefix of the stand-in for an event that could not be read (``build_store`` counts
them by the field named after it): it keeps every later event at its position in the file."""

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


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:160]


def _decode_tolerant(path: Path, data: bytes, report: LoadReport, first_error: Exception) -> tuple[Document, bytes]:
    """Repair what real exporters break (see repair.py), saying what was repaired and dropped."""
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
