"""The tolerant path: rebuild a damaged trace event by event, in time linear in its size.

A file that fails the fast decode is repaired in three passes, each linear:

1. invalid UTF-8 is replaced with U+FFFD (the only repair made over the whole file: msgspec
   reports it without a position);
2. the traceEvents array is walked in chunks that end between two events (``}, {``); a chunk
   that decodes is kept as it is, and one that does not is narrowed, from the byte offset
   msgspec names, down to the one event that fails. That event alone is repaired (raw control
   characters escaped; unescaped quotes escaped inside its ``name`` value only), joined with the
   next piece when the ``}, {`` was inside a string, or else dropped and counted;
3. the pieces that decode are joined into a new document, which decodes by construction.

Every step is proved by a decode, never assumed, so no complete event is dropped for damage
elsewhere, and what was repaired or dropped is said with counts.
"""
from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from dataclasses import dataclass, field

import msgspec

from tracetui.read.blanks import last_non_blank
from tracetui.read.errors import TraceError

_SEP = re.compile(rb"}[ \t\r\n]*,[ \t\r\n]*{")
"""Where one event may end and the next begin: a guess that the decodes on both sides prove."""

_BYTE = re.compile(r"\(byte (\d+)\)")
_STRING_CTRL = re.compile(rb"[\x00-\x1f]")
"""Raw control characters: invalid inside a JSON string (tab and newline too), escaped only there."""
_NAME_KEY = re.compile(rb'"name"[ \t]*:[ \t]*"')
_EVENT_KEYS = rb"ph|cat|name|pid|tid|ts|dur|id|id2|args|s|bp|cname|tts|scope|bind_id|flow_in|flow_out"
_NAME_END = re.compile(rb'"(?=[ \t\r\n]*(?:,[ \t\r\n]*"(?:' + _EVENT_KEYS + rb')"[ \t]*:|}))')
"""The quote that really ends a name value: one followed by the next event key or the event's end."""
_QUOTE_OR_ESCAPE = re.compile(rb'\\.|"', re.DOTALL)
_NEXT_EVENT = re.compile(rb",[ \t\r\n]*{")
_LEAD = re.compile(rb"[ \t\r\n]*")
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')

CHUNK_BYTES = 1 << 16
"""The first chunk decoded after a failure; each chunk that decodes doubles the next one."""

MAX_CHUNK_BYTES = 1 << 24
"""Chunks stop doubling here: a failed chunk costs at most this much to narrow down."""

MAX_EVENT_BYTES = 1 << 24
"""The largest run of bytes repaired as one event (16 MiB; Kineto's largest events are KBs):
a longer one, with no event boundary in it (a sparse file's hole of NULs after a valid head),
is dropped unrepaired, since each repair step copies it (a 1 GB hole took 7 GB)."""

MAX_JOIN = 8
"""How many ``}, {`` guesses in a row the repair may join when the first was inside a string."""

UTF8_CHUNK = 1 << 24

_elements = msgspec.json.Decoder(list[msgspec.Raw])
_any = msgspec.json.Decoder()


@dataclass
class _Fail:
    """Why a decode failed: ``bad`` at byte ``at``, ``trunc`` (ran out of input, no position),
    or ``close``: the array closed at ``at`` and the bytes after it are the document's tail."""
    kind: str
    at: int = -1


@dataclass
class Repairs:
    """What the event walk did: counts for the report, pieces for the new document."""
    pieces: list = field(default_factory=list)
    tail: bytes | None = None        # the bytes after the events array's ``]``; None: it never closed
    ctrl: int = 0
    ctrl_events: int = 0
    quotes: int = 0
    quote_events: int = 0
    joined: int = 0
    dropped: int = 0
    dropped_bytes: int = 0
    first_drop: int = -1
    stray: int = 0
    cut_bytes: int = 0              # an incomplete last event (a truncated file)


def fix_utf8(data) -> tuple[bytes | bytearray, int]:
    """``data`` with invalid UTF-8 replaced by U+FFFD, and how many sequences were replaced.

    Checked in chunks so a GB-sized file never becomes one str; an incomplete character at the
    very end (a cut file) is left as it is, for the truncation repair to drop with its event.
    """
    check = codecs.getincrementaldecoder("utf-8")("strict")
    with memoryview(data) as view:
        try:
            for i in range(0, len(data), UTF8_CHUNK):
                check.decode(view[i:i + UTF8_CHUNK])
            return data, 0
        except UnicodeDecodeError:
            pass
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        out, marks = [], 0
        for i in range(0, len(data), UTF8_CHUNK):
            s = dec.decode(view[i:i + UTF8_CHUNK])
            marks += s.count("\ufffd")
            out.append(s.encode("utf-8"))
    out.append(bytes(dec.getstate()[0]))
    return b"".join(out), marks - data.count(b"\xef\xbf\xbd")  # U+FFFD the file already held


def locate_events(text) -> tuple[int, bool] | None:
    """(index of the events array's ``[``, bare Chrome array?) or None when there is none."""
    lead = _LEAD.match(text).end()
    if text[lead:lead + 1] == b"[":
        return lead, True
    m = _EVENTS_KEY.search(text)
    return (m.end() - 1, False) if m else None


class _Runs:
    """The state of one pass over the events array of ``buf`` (a private copy with one spare
    byte at the end, so that any run of events can be closed in place as ``[ ... ]`` and
    decoded without a copy): decoding runs of events in place, keeping them, and what was
    repaired."""

    def __init__(self, buf: bytearray, n: int):
        self.buf, self.n = buf, n
        self.r = Repairs()
        self.done = False
        self._next: int | None = None

    def _try(self, s: int, e: int) -> _Fail | None:
        """Decode ``buf[s:e]`` as the elements of an array; None when it decodes."""
        buf = self.buf
        before, after = buf[s - 1], buf[e]
        buf[s - 1], buf[e] = 0x5B, 0x5D  # "[", "]"
        try:
            _elements.decode(memoryview(buf)[s - 1:e + 1])
            return None
        except msgspec.DecodeError as ex:
            msg = str(ex)
        finally:
            buf[s - 1], buf[e] = before, after
        return _failure(buf, msg, s - 1, self.n)

    def _keep(self, s: int, e: int) -> None:
        self.r.pieces.append(memoryview(self.buf)[s:e])

    def _closed(self, s: int, close: int) -> None:
        """The array ends at ``close``: keep what precedes it from ``s``, and the tail after it."""
        body = _strip_sep(self.buf, s, close)
        if body > s:
            self._keep(s, body)
        self.r.tail = bytes(self.buf[close + 1:self.n])
        self.done = True

    def _commit(self, fix: "_Fix") -> None:
        """Keep a repaired run and count what its repair did."""
        if fix.kind == "close":  # the array closes inside: the events before the "]", the tail after it
            body = fix.ev[:_strip_sep(fix.ev, 0, fix.at)]
            self.r.tail = fix.ev[fix.at + 1:]
            self.done = True
        else:
            body = fix.ev
        if body:
            self.r.pieces.append(body)
        self.r.ctrl += fix.ctrl
        self.r.ctrl_events += bool(fix.ctrl)
        self.r.quotes += fix.quotes
        self.r.quote_events += bool(fix.quotes)
        self.r.stray += fix.stray


class _EventFix(_Runs):
    """One event that fails alone: joined with the next ones (a ``}, {`` inside a string),
    repaired (control characters, quotes in names, stray bytes) or dropped and counted."""

    def _one(self, starts: list, ends: list, i: int, f: _Fail | None) -> int:
        """The event at ``starts[i]`` fails alone: join, repair or drop it; the next index."""
        buf, n = self.buf, self.n
        s, j, first = starts[i], i, None
        while True:
            if f is None:
                f = self._try(s, ends[j])
            if f is None:
                self._keep(s, ends[j])
                self.r.joined += j - i
                return j + 1
            if f.kind == "close":
                self._closed(s, f.at)
                return len(starts)
            first = first or f
            if ends[j] - s > MAX_EVENT_BYTES:
                break
            if f.kind == "bad":
                if j == i and first.at < ends[i]:
                    nxt = self._stray(starts, ends, i, first.at)
                    if nxt is not None:
                        return nxt
                fix = _repaired(bytes(buf[s:ends[j]]))
                if fix.kind in ("ok", "close"):
                    self._commit(fix)
                    self.r.joined += j - i
                    return len(starts) if self.done else j + 1
                if fix.kind != "trunc":
                    break
            # ran out of input, maybe once repaired: the "}, {" may be inside a string
            if ends[j] == n:  # the run reaches the end of the file
                whole = _strip_sep(buf, s, n)  # complete, cut after its comma?
                if whole < n and self._try(s, whole) is None:
                    self._keep(s, whole)
                    self.r.joined += j - i
                else:  # an incomplete last event (a killed exporter)
                    self.r.cut_bytes = n - s
                return j + 1
            if j - i + 1 >= MAX_JOIN:
                break
            if j + 1 >= len(starts) and not self._more(starts, ends):
                break
            j, f = j + 1, None
        self.r.dropped += 1
        self.r.dropped_bytes += ends[i] - s
        if self.r.first_drop < 0:
            self.r.first_drop = s
        return i + 1

    def _stray(self, starts: list, ends: list, i: int, at: int) -> int | None:
        """Complete events before a failure at ``at``, then bytes that are not JSON: keep the
        events, count the stray bytes, and go on with the next event (the index to go on at)."""
        s, e = starts[i], ends[i]
        if e - s > MAX_EVENT_BYTES:
            return None
        whole = _strip_sep(self.buf, s, at)
        if whole <= s or self._try(s, whole) is not None:
            return None
        self._keep(s, whole)
        m = _NEXT_EVENT.search(self.buf, at, e)
        self.r.stray += _junk(bytes(self.buf[whole:m.end() - 1 if m else e]))
        if m is None:
            return i + 1
        starts[i] = m.end() - 1
        return i


class _Walk(_EventFix):
    """The walk: chunks that double while they decode; a failed chunk is narrowed to its
    events, and the failing ones go to ``_EventFix``."""

    def run(self, first: int) -> Repairs:
        buf, n = self.buf, self.n
        first = _LEAD.match(buf, first, n).end()
        if first < n and buf[first] == 0x5D:  # "]": an empty array
            self.r.tail = bytes(buf[first + 1:n])
            return self.r
        pos, size = (first if first < n else None), CHUNK_BYTES
        while pos is not None and not self.done:
            m = _SEP.search(buf, min(pos + size, n), n)
            end, nxt = (m.start() + 1, m.end() - 1) if m else (n, None)
            f = self._try(pos, end)
            if f is None:
                self._keep(pos, end)
                pos, size = nxt, min(2 * size, MAX_CHUNK_BYTES)
            elif f.kind == "close":
                self._closed(pos, f.at)
            else:
                pos, size = self._narrow(pos, end, nxt), CHUNK_BYTES
        return self.r

    def _narrow(self, pos: int, end: int, nxt: int | None) -> int | None:
        """A chunk failed: split it at every ``}, {`` and keep, repair or drop event by event.
        Returns where the walk goes on (None: at the end of the file)."""
        starts, ends = [pos], []
        for m in _SEP.finditer(self.buf, pos, end):
            ends.append(m.start() + 1)
            starts.append(m.end() - 1)
        ends.append(end)
        self._next = nxt
        i, hi = 0, len(starts)
        while i < len(starts) and not self.done:
            f = self._try(starts[i], ends[hi - 1])
            if f is None:
                self._keep(starts[i], ends[hi - 1])
                i, hi = hi, len(starts)
            elif f.kind == "close":
                self._closed(starts[i], f.at)
            elif hi - i == 1:
                i, hi = self._one(starts, ends, i, f), len(starts)
            elif f.kind == "bad":  # keep the events before the one the error is in, then that one alone
                k = min(max(bisect_right(starts, f.at) - 1, i), hi - 1)
                if k == i:
                    i, hi = self._one(starts, ends, i, None), len(starts)
                else:
                    hi = k
            else:  # ran out of input with no position: halve the run until the event that does is alone
                hi = i + (hi - i) // 2
        return self._next

    def _more(self, starts: list, ends: list) -> bool:
        """Add the event after the last one known (for a join across a chunk's end)."""
        if self._next is None:
            return False
        m = _SEP.search(self.buf, self._next, self.n)
        starts.append(self._next)
        ends.append(m.start() + 1 if m else self.n)
        self._next = m.end() - 1 if m else None
        return True


@dataclass
class _Fix:
    """A run of events after repair: ``kind`` is how its decode ended (ok, close, trunc, bad)."""
    kind: str
    ev: bytes
    at: int = -1
    ctrl: int = 0
    quotes: int = 0
    stray: int = 0


def _repaired(ev: bytes) -> _Fix:
    """``ev`` with the raw control characters inside its strings escaped, the unescaped quotes
    inside name values escaped, and stray bytes after its last complete event cut.

    Each step fixes the byte the decoder stopped at and decodes again, so a repair never acts
    on a guess about where strings are (an unescaped quote would make such a guess wrong)."""
    ev = ev[:_strip_sep(ev, 0, len(ev))]
    ctrl = quotes = 0
    f = _decode_one(ev)
    for _ in range(MAX_REPAIR_STEPS):
        if f is None or f.kind != "bad" or f.at >= len(ev):
            break
        if ev[f.at] < 0x20:  # a raw control character: inside a string, unless after complete events
            cut = _strip_sep(ev, 0, f.at)
            if cut > 0 and _decode_one(ev[:cut]) is None:
                break  # stray bytes after the event: cut below
            if ctrl >= MAX_CONTROL_STEPS:  # many: escape those inside strings in one pass
                cand, k = _escape_controls(ev)
            else:
                cand, k = ev[:f.at] + b"\\u%04x" % ev[f.at] + ev[f.at + 1:], 1
            g = _decode_one(cand)
            if g is not None and g.kind == "bad" and g.at <= f.at:
                break
            ev, f, ctrl = cand, g, ctrl + k
            continue
        fixed = _escape_name_quotes(ev, f.at)
        if fixed is None:
            break
        g = _decode_one(fixed[0])
        if g is not None and g.kind == "bad" and g.at <= f.at:
            break  # escaping did not move the error on: it is not a quote in the name
        ev, f, quotes = fixed[0], g, quotes + fixed[1]
    stray = 0
    if f is not None and f.kind == "bad":  # complete events, then stray bytes
        cut = _strip_sep(ev, 0, f.at)
        if cut > 0 and _decode_one(ev[:cut]) is None:
            stray = _junk(ev[cut:])
            ev, f = ev[:cut], None
    if f is None:
        return _Fix("ok", ev, ctrl=ctrl, quotes=quotes, stray=stray)
    return _Fix(f.kind, ev, f.at, ctrl, quotes, stray)


MAX_REPAIR_STEPS = 80
"""Fixes one event may need (each one decode of the event): its control characters and names."""

MAX_CONTROL_STEPS = 64
"""Control characters escaped one at a time; past this many, those inside strings in one pass."""


def _failure(buf, msg: str, base: int, n: int) -> _Fail:
    """Classify a msgspec error on ``buf[base:]`` (which starts with the array's ``[``)."""
    m = _BYTE.search(msg)
    if m is None:
        return _Fail("trunc")
    at = base + int(m.group(1))
    if "trailing characters" not in msg:  # at the "]" the run was closed with: its input ran out
        return _Fail("trunc") if at >= n else _Fail("bad", at)
    close = at - 2  # msgspec points one past the first byte after the "]" and the blanks after it
    if close > base:
        close = max(last_non_blank(buf, base + 1, close + 1), base)
    if buf[close] != 0x5D:
        return _Fail("bad", at - 1)
    rest = bytes(buf[close + 1:min(n, close + 64)]).lstrip()
    if rest[:1] == b"," and rest[1:].lstrip()[:1] == b"{":
        return _Fail("bad", close)  # a stray "]" with more events after it
    return _Fail("close", close)


def _junk(b: bytes) -> int:
    """Stray bytes in ``b``, not counting blanks and the one comma that separates events anyway."""
    b = b.strip(b" \t\r\n")
    return len(b) - (b"," in b)


def _strip_sep(buf, lo: int, hi: int) -> int:
    """``hi`` moved back over blanks and one separating comma (the end of the last whole element)."""
    hi = last_non_blank(buf, lo, hi) + 1
    if hi > lo and buf[hi - 1] == 0x2C:
        hi = last_non_blank(buf, lo, hi - 1) + 1
    return hi


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _escape_controls(ev: bytes) -> tuple[bytes, int]:
    """Raw control characters inside the strings of ``ev`` as ``\\u00XX``; those outside strings
    (a layout's newlines, padding after an event) are left alone or for the stray-byte cut."""
    count = 0

    def fix(m: re.Match) -> bytes:
        nonlocal count
        s = m.group(0)
        if not _STRING_CTRL.search(s):
            return s
        s, k = _STRING_CTRL.subn(lambda c: b"\\u%04x" % c.group(0)[0], s)
        count += k
        return s
    return _STRING.sub(fix, ev), count


def _decode_one(ev: bytes) -> _Fail | None:
    """Decode one event's bytes on their own (offsets in the result are into ``ev``)."""
    doc = b"[" + ev + b"]"
    try:
        _elements.decode(doc)
        return None
    except msgspec.DecodeError as ex:
        f = _failure(doc, str(ex), 0, len(doc) - 1)
    if f.at >= 0:
        f.at -= 1
    return f


def _escape_name_quotes(ev: bytes, at: int) -> tuple[bytes, int] | None:
    """Escape the unescaped quotes of the name value a decode error at ``at`` lies in.

    The value runs from ``"name": "`` to the quote followed by the next event key (or by the
    event's ``}``). Only a value whose first unescaped quote is *not* such an end is touched,
    and only when the error lies inside it: the damage is then that name's own quotes.
    """
    key = None
    for key in _NAME_KEY.finditer(ev, 0, at):
        pass
    if key is None:
        return None
    vs = key.end()
    first = _QUOTE_OR_ESCAPE.search(ev, vs)
    while first is not None and first.group(0) != b'"':
        first = _QUOTE_OR_ESCAPE.search(ev, first.end())
    if first is None or first.start() >= at or _NAME_END.match(ev, first.start()):
        return None  # the name ends where it should: the damage is elsewhere
    end = _NAME_END.search(ev, first.start() + 1)
    if end is None or end.start() + 1 < at:
        return None
    count = 0

    def esc(m: re.Match) -> bytes:
        nonlocal count
        if m.group(0) == b'"':
            count += 1
            return b'\\"'
        return m.group(0)
    inner = _QUOTE_OR_ESCAPE.sub(esc, ev[vs:end.start()])
    return ev[:vs] + inner + ev[end.start():], count


def recover(path, text, first_error: Exception) -> tuple[bytes, list[str], int]:
    """A new document holding every event of ``text`` that decodes or could be repaired.

    Returns (document bytes, what was done as report lines, bytes cut from the end). Raises
    TraceError when the file has no events array, or none of its events could be kept.
    """
    where = locate_events(text)
    if where is None:
        if "truncated" in str(first_error):
            raise TraceError(path, "file ends before its traceEvents array (truncated file)")
        raise TraceError(path, f"invalid JSON that could not be repaired ({_short(first_error)})")
    arr, bare = where
    n = len(text)
    buf = bytearray(text)
    buf.append(0x20)  # the spare byte a run of events ending at the end of the file is closed with
    r = _Walk(buf, n).run(arr + 1)
    if not r.pieces:
        if r.dropped:
            raise TraceError(path, f"invalid JSON that could not be repaired ({_short(first_error)})")
        if r.tail is None:
            raise TraceError(path, "trace ends before its first complete event (truncated file)")
    notes = []
    if r.ctrl:
        notes.append(f"escaped {r.ctrl:,} raw control character(s) in {r.ctrl_events:,} event(s)")
    if r.quotes:
        notes.append(f"escaped {r.quotes:,} unescaped quote(s) in {r.quote_events:,} event name(s)")
    if r.dropped:
        notes.append(f"dropped {r.dropped:,} damaged event(s) that could not be repaired "
                     f"({r.dropped_bytes:,} bytes, the first at byte {r.first_drop:,})")
    if r.stray:
        notes.append(f"dropped {r.stray:,} stray byte(s) after complete events")
    if r.cut_bytes:
        notes.append(f"trace ends early: dropped its incomplete last event ({r.cut_bytes:,} bytes)")
    elif r.tail is None:
        notes.append("trace ends early: the events array is not closed (no event was cut)")
    head, close, cut = _envelope(bytes(buf[:arr + 1]), bare, r.tail, notes)
    parts = [head]
    for i, piece in enumerate(r.pieces):
        if i:
            parts.append(b",")
        parts.append(piece)
    parts.append(close)
    doc = b"".join(parts)  # the one copy of the repaired document
    del parts, r.pieces[:], buf
    return doc, notes, r.cut_bytes + cut


def _envelope(head: bytes, bare: bool, tail: bytes | None, notes: list) -> tuple[bytes, bytes, int]:
    """(what goes before the events, what closes the document, bytes cut after the events):
    the file's own fields around the array where they decode, else the least that does."""
    if bare:
        if tail is not None and tail.strip():
            notes.append(f"dropped the {len(tail):,} bytes after the events array (not JSON)")
            return head, b"]", len(tail)
        return head, b"]", 0
    if not _valid(head + b"]}"):
        notes.append(f"dropped the damaged top-level fields before traceEvents ({len(head) - 1:,} bytes)")
        head = b'{"traceEvents":['
    if tail is None:
        return head, b"]}", 0
    kept = _valid_tail(head, tail)
    if kept is None:
        if tail.strip():
            notes.append(f"dropped the {len(tail):,} bytes after the events array (damaged or cut short)")
        else:
            notes.append("trace ends early: the file ends right after the events array")
        return head, b"]}", len(tail)
    if len(kept) < len(tail):
        notes.append(f"dropped {len(tail) - len(kept):,} stray byte(s) after the end of the document")
    return head, b"]" + kept, len(tail) - len(kept)


MAX_TAIL_TRIES = 64


def _valid_tail(head: bytes, tail: bytes) -> bytes | None:
    """The shortest start of ``tail`` that ends the document (stray bytes after it are cut)."""
    if _valid(head + b"]" + tail):
        return tail
    at = tail.find(b"}")
    for _ in range(MAX_TAIL_TRIES):
        if at < 0:
            return None
        if _valid(head + b"]" + tail[:at + 1]):
            return tail[:at + 1]
        at = tail.find(b"}", at + 1)
    return None


def _valid(doc: bytes) -> bool:
    try:
        _any.decode(doc)
        return True
    except msgspec.DecodeError:
        return False


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:160]
