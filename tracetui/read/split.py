"""Decode and index a large trace in pieces, on N cores: each part of ``traceEvents`` in a forked child.

Decoding and indexing are per-event Python work that holds the GIL, so threads cannot share it;
a forked child can, and it sees the file's bytes without a copy (a large plain file is a
read-only map of it: source.py). Each process decodes its part a piece at a time, so only one
piece's decoded events are alive at once, and drops the piece's pages once it is indexed; one
worker runs every piece in this process. This is only an optimisation: anything unexpected (a
file that is not valid JSON, a split that lands inside a value, a child that fails or hangs)
returns None and the caller takes the one-process path, which is also the one that repairs
broken files. The result is the same store the one-process path builds.
"""
from __future__ import annotations

import os
import re
import struct
import time
from typing import Callable, Iterable, Iterator

import msgspec

from tracetui.read import forked
from tracetui.read.forked import MAX_DEFAULT_WORKERS, WORKERS_ENV, default_workers  # noqa: F401 - as split has offered them
from tracetui.read.blanks import last_non_blank
from tracetui.read.depth import decode_limit
from tracetui.read.source import read_piece, release
from tracetui.read.together import together
from tracetui.read.events import EventStore, build_store, concat_stores
from tracetui.read.schema import (
    LENIENT_NOTE,
    Document,
    Event,
    LenientEvent,
    LenientTextTimesEvent,
    RawTimes,
    TextTimesEvent,
    first_byte,
    text_times,
)

MIN_BYTES = 16 << 20
"""Below this the fork costs more than it saves (measured ~60 ms on 61 MB, when a full envelope pass preceded it)."""


class _Envelope(msgspec.Struct):
    """The document with traceEvents left undecoded: validates the whole file and locates the array."""
    traceEvents: msgspec.Raw
    deviceProperties: object = None  # as load.Document: any value, load.clean_meta sorts it out
    distributedInfo: object = None
    tracetui: object = None
    schemaVersion: object = None
    baseTimeNanoseconds: object = None
    host_name: object = None


_envelope = msgspec.json.Decoder(_Envelope)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_lists = (msgspec.json.Decoder(list[Event]), msgspec.json.Decoder(list[LenientEvent]))
_times = msgspec.json.Decoder(list[RawTimes], float_hook=str)  # as load.raw_times
_SEP = re.compile(rb"\}\s*,")
TIMES: dict = {}
"""Stage times of the last split load, both processes, and the helper's private memory (for benchmarks)."""


def private_mb() -> float:
    """This process's memory not shared with others (its copy-on-write pages included); -1
    where /proc cannot say."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            kb = sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean", "Private_Dirty")))
    except (OSError, ValueError, IndexError):
        return -1.0
    return kb / 1024


def enabled(data: bytes, min_bytes: int | None = None) -> bool:
    return len(data) >= (MIN_BYTES if min_bytes is None else min_bytes) and forked.available()


_text_lists = (msgspec.json.Decoder(list[TextTimesEvent], float_hook=str),
               msgspec.json.Decoder(list[LenientTextTimesEvent], float_hook=str))


def _decode_list(buf, text: bool = False) -> tuple[list, bool]:
    """A JSON array of events: strict schema first, then the lenient one (like load._decode_fast);
    with ``text``, fractional times stay text (load.text_times)."""
    lists = _text_lists if text else _lists
    try:
        return lists[0].decode(buf), False
    except msgspec.ValidationError:
        return lists[1].decode(buf), True


def _split_point(arr: memoryview, tries: int = 64, at: float = 0.5, pos: int | None = None,
                 end: int | None = None) -> int | None:
    """A comma near ``at`` (a fraction of the array; or from byte ``pos``, before byte ``end``)
    that looks like it separates two events (the next one decodes as one).

    Only a guess: the decodes of the pieces on both sides are what prove the comma is between events.
    """
    pos = int(len(arr) * at) if pos is None else pos
    stop = len(arr) - 1 if end is None else end
    for _ in range(tries):
        m = _SEP.search(arr, pos, stop)
        if m is None:
            return None
        c = m.end() - 1
        n = _SEP.search(arr, c + 1)
        nxt = n.start() + 1 if n else len(arr) - 1
        try:
            evs = _lists[1].decode(b"[" + bytes(arr[c + 1:nxt]) + b"]")
            if evs and evs[0].ph:
                return c
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass
        pos = c + 1
    return None


def _cuts(arr: memoryview, lo: int, hi: int, most: int | None = None, least: int = 1) -> list[int]:
    """Event-separating commas that split ``arr[lo..hi]`` (its ends: a bracket or a comma) into
    pieces of about PIECE_BYTES (at least ``least``, at most ``most``, default MAX_PIECES);
    fewer, larger pieces where no comma qualifies."""
    n = min(MAX_PIECES if most is None else most, max(least, round((hi - lo) / PIECE_BYTES)))
    cuts = [lo]
    for i in range(1, n):
        c = _split_point(arr, pos=max(lo + (hi - lo) * i // n, cuts[-1] + 1), end=hi)
        if c is not None and cuts[-1] < c < hi:
            cuts.append(c)
    cuts.append(hi)
    return cuts


TAIL_WAYS = 4
"""The last pieces (one per process) are cut this many ways each: the processes run out of
pieces at about the same time, and one still decoding a whole last piece (~70 ms at 1 GB with 8
processes) was waited for by the rest."""


def _finer_tail(arr: memoryview, cuts: list[int], processes: int) -> list[int]:
    """``cuts`` with each of its last ``processes`` pieces cut ``TAIL_WAYS`` ways (``_cuts``)."""
    k = len(cuts) - 1 - processes
    if processes < 2 or k < processes or k + TAIL_WAYS * processes > MAX_CLAIMED:
        return cuts  # few pieces (each process's first ones are all there is), or past the claims' cap
    out = cuts[:k]
    for a, b in zip(cuts[k:], cuts[k + 1:]):
        out += _cuts(arr, a, b, most=TAIL_WAYS, least=TAIL_WAYS)[:-1]
    return out + [cuts[-1]]


class _Claims:
    """Which pieces each process decodes: its own first ones (``home`` each: process ``j``
    takes pieces ``j*home .. (j+1)*home - 1``), then whatever is left, claimed one at a time
    while the processes run, so one that runs slower (a busy core, a piece of larger events)
    leaves more to the others instead of being waited for. The pieces left are 4-byte numbers
    in a pipe written whole before the fork: a read takes one or sees its end, and a pipe's
    readers are served one at a time, so no piece is taken twice.

    16 cores, 1 GB, 8 processes decoding fixed parts: the slowest helper finished 0.87-0.99 s
    after the start where the average took 0.78 s (bench_load_scaling, 2026-12-06)."""

    def __init__(self, n: int, processes: int):
        self.n = n
        self.home = max(1, n // (2 * processes)) if processes > 1 else n
        first = min(n, self.home * processes)
        self.r = None
        if first < n:
            r, w = os.pipe()
            try:
                os.set_blocking(w, False)  # a pipe smaller than the numbers raises, never waits
                tokens = struct.pack(f"<{n - first}I", *range(first, n))  # < 64 KiB: MAX_CLAIMED
                if os.write(w, tokens) != len(tokens):
                    raise BlockingIOError("the pipe holds fewer piece numbers than there are")
            except OSError:
                os.close(r)
                raise
            finally:
                os.close(w)
            # every number is in before any fork: an empty pipe means every piece is taken. Not
            # blocking: another thread's fork between os.pipe() and close(w) leaves a writer
            # behind, and a blocking read would wait for its end of file
            os.set_blocking(r, False)
            self.r = r

    def pieces(self, j: int) -> Iterator[int]:
        """Process ``j``'s pieces: its own, then claimed ones until none is left."""
        yield from range(min(j * self.home, self.n), min((j + 1) * self.home, self.n))
        while self.r is not None:
            try:
                b = os.read(self.r, 4)
            except BlockingIOError:
                return  # none left
            if len(b) < 4:
                return
            yield struct.unpack("<I", b)[0]

    def close(self) -> None:
        if self.r is not None:
            os.close(self.r)
            self.r = None


MAX_CLAIMED = 4096
"""At most this many pieces in all (their numbers fill 16 KiB of a pipe that holds 64 KiB)."""


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
        q = max(last_non_blank(data, 0, p), 0)
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


def decode_index(data: bytes, min_bytes: int | None = None,
                 progress: Callable[[float], None] | None = None,
                 workers: int | None = None) -> tuple[Document, EventStore, bool] | None:
    """(document without its events, the full event store, needed the lenient schema) or None.

    ``workers`` processes (default ``default_workers()``) each decode and index one part of the
    events, piece by piece; one worker (or no fork) decodes every piece in this process, so a
    large file's decoded events are never all alive at once. ``progress(fraction)`` is called after each
    piece of this process's part (it may raise to stop the load: the helpers are then killed)."""
    workers = default_workers() if workers is None else workers
    if workers > 1 and not forked.available():
        workers = 1  # no fork here (or ``serial()``): the pieces in this process alone
    if len(data) < (MIN_BYTES if min_bytes is None else min_bytes) or first_byte(data) != b"{":
        return None
    try:
        with decode_limit():  # the same nesting limit whatever the process set (read/depth.py)
            found = _quick_envelope(data)
            got = _decode_parts(data, *found, progress, workers) if found else None
            if got is None:
                found = _full_envelope(data)
                got = _decode_parts(data, *found, progress, workers) if found else None
    except RecursionError:  # nested too deep: the one-process path says so
        return None
    return got


def _decode_parts(data: bytes | bytearray, env: _Envelope, arr: memoryview, base: int | None,
                  progress: Callable[[float], None] | None = None,
                  workers: int = 2) -> tuple[Document, EventStore, bool] | None:
    """Fork ``workers - 1`` children that decode and index pieces of ``arr`` (the traceEvents
    array) while this process does too (``_Claims`` says which); the pieces' stores are joined
    in file order."""
    cuts = _finer_tail(arr, _cuts(arr, 0, len(arr) - 1, most=min(MAX_PIECES * workers, MAX_CLAIMED // 2),
                                  least=workers), workers)
    n = len(cuts) - 1
    if n < min(workers, 2):
        return None  # no comma to split at: the one-process path
    processes = min(workers, n)
    part = _part_decoder(data, arr, base)
    t0 = time.perf_counter()
    try:
        claims = _Claims(n, processes)
    except OSError:
        return None  # no pipe for the piece numbers: the one-process path
    pending = []
    try:
        for j in range(1, processes):  # every child forks before this process touches the bytes
            p = forked.spawn(lambda j=j: part(cuts, claims.pieces(j), child=True))
            if p is None:
                break
            pending.append(p)
        if len(pending) < processes - 1:
            return None  # no fork: the one-process path
        try:
            mine = part(cuts, claims.pieces(0), child=False, progress=progress, share=processes / n)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None  # a split inside a value, or a broken file: the one-process path decides
        t_mine = time.perf_counter() - t0
        # read back side by side: a child blocks on its full pipe until it is read, so reading
        # them one at a time made each wait for those before it
        got = together([lambda p=p: p.result(extra=4 * t_mine) for p in pending], len(pending))
    finally:
        claims.close()
        for p in pending:
            p.cancel()  # a no-op for those collected
    return _joined_parts(env, [mine, *got], t0, n, data)


PIECE_BYTES = 8 << 20
MAX_PIECES = 16
"""Each process decodes its part in pieces of about PIECE_BYTES (at most MAX_PIECES of them)
and indexes each one before decoding the next, so only one piece's decoded events are alive
at a time. 270k-event replica (61 MB): the pair's peak 335 -> 216 MB at the same speed. On 1 GB
(decode_index, two A/Bs of 2 rounds): whole parts 8.75-9.30 s and 1,415 MB private in the
helper; 60 pieces of 8 MB 10.2-10.9 s and 180 MB; 15 of 32 MB 9.07-9.48 s and 249 MB; the cap of
16 (~31 MB each) 8.90-8.94 s."""


def _parts(data: bytes | bytearray, arr: memoryview, base: int | None, c: int) -> tuple[Callable, Callable, int]:
    """(first, second, pieces): decode and index the events before / after the comma at
    ``arr[c]``, each a fixed run of the pieces (``_cuts``) of both halves."""
    part = _part_decoder(data, arr, base)
    head = _cuts(arr, 0, c)  # before the fork: see _part_decoder
    cuts = head + _cuts(arr, c, len(arr) - 1)[1:]
    k, n = len(head) - 1, len(cuts) - 1

    def second() -> tuple:
        return part(cuts, range(k, n), child=True)

    def first(progress=None) -> tuple:
        return part(cuts, range(k), child=False, progress=progress, share=1 / k)

    return first, second, n


def _part_decoder(data: bytes | bytearray, arr: memoryview, base: int | None) -> Callable:
    """``part(cuts, child, progress)``: decode and index the events of ``arr`` between the
    commas (or brackets) at ``cuts[0]`` and ``cuts[-1]``, a piece between each two cuts
    (``_cuts``) -> (store, events, lenient, times). The callers find every part's cuts before
    they fork: finding them reads the file's map, and a process that did so after another had
    seen the file cut short (tests/read/test_cut_mid_load.py) died of SIGBUS.

    Each piece of a part needs brackets at its two ends (the array's own, or commas between
    events). When ``data`` is a bytearray and ``base`` is where ``arr`` starts in it, those
    bytes are swapped in place and put back (in a child the writes stay in its own
    copy-on-write pages), else the piece is copied out (a file's read-only map).
    """
    in_place = base is not None and isinstance(data, bytearray)
    text = text_times(data)
    events_of = lambda buf: _decode_list(buf, text)  # noqa: E731

    def piece(x: int, y: int, decode: Callable = events_of):
        if in_place:
            ox, oy = data[base + x], data[base + y]
            data[base + x], data[base + y] = 0x5B, 0x5D  # "[" and "]"
            try:
                return decode(arr[x:y + 1])
            finally:  # the buffer is the lazy args pass's source: it must be the file again
                data[base + x], data[base + y] = ox, oy
        with copied(x, y) as buf:
            return decode(buf)

    scratch = [bytearray()]
    fd = getattr(data, "fd", None) if base is not None else None  # the user's mapped file

    def copied(x: int, y: int) -> memoryview:
        """``arr[x..y]`` with brackets at its ends, in one buffer reused from piece to piece (the
        decoders keep no reference into it: every field is copied into its Struct). A user's
        mapped file is read with ``pread``: cut short meanwhile, it is a clear error, not SIGBUS."""
        n = y + 1 - x
        if len(scratch[0]) < n:
            scratch[0] = bytearray(n)
        view = memoryview(scratch[0])[:n]
        if fd is not None:
            read_piece(data, view, base + x)
        else:
            view[:] = arr[x:y + 1]
        view[0], view[-1] = 0x5B, 0x5D
        return view

    def forget(x: int, y: int) -> None:  # a mapped file: the decoded piece's pages go back
        release(data, base + x, base + y + 1) if base is not None else None

    def part(cuts: list[int], which: Iterable[int], child: bool, progress=None,
             share: float = 1.0) -> tuple[list, bool, dict]:
        """([(piece number, store, events)], lenient, times) of the pieces ``which`` names,
        ``cuts[i]..cuts[i + 1]`` for piece ``i``; ``progress`` gets ``share`` per piece done."""
        done, lenient = [], False
        t_dec = t_idx = 0.0
        t_part = time.perf_counter()
        for i in which:
            x, y = cuts[i], cuts[i + 1]
            t0 = time.perf_counter()
            events, lax = piece(x, y)
            t1 = time.perf_counter()
            done.append((i, build_store(events, raw_times=lambda: piece(x, y, _times.decode)), len(events)))
            t_dec, t_idx = t_dec + t1 - t0, t_idx + time.perf_counter() - t1
            forget(x, y)
            lenient |= lax
            del events
            if progress is not None:
                progress(min(1.0, len(done) * share))
        release(data)  # what the envelope and the split points read, or a part without ``base``
        who = "child" if child else "parent"
        times = {f"{who} decode": t_dec, f"{who} index": t_idx, f"{who} pieces": len(done)}
        if child:
            # what it holds at its end: every piece's store (and no piece's events any more).
            # Once, not per piece: smaps_rollup walks the whole map of the file (~5 ms at 1 GB)
            times.update({"child private MB": private_mb(), "slowest child s": time.perf_counter() - t_part})
        return done, lenient, times

    return part


_MOST = frozenset({"child private MB", "slowest child s"})
"""The parts' times that ``TIMES`` keeps the largest of (the rest it sums)."""


def _joined_parts(env: _Envelope, parts: list, t0: float, n: int, source) -> tuple[Document, EventStore, bool] | None:
    """The document and whole store from every process's (pieces, lenient, times), the ``n``
    pieces joined in file order (``source``: the bytes they were read from); None when a
    child gave none, or a piece is missing (never expected: the claims hand out each once)."""
    if any(p is None for p in parts):
        return None  # a child failed: the one-process path, as for any surprise
    pieces = sorted((i, store, k) for done, _, _ in parts for i, store, k in done)
    if [i for i, _, _ in pieces] != list(range(n)):
        return None
    TIMES.clear()
    for _, _, times in parts:
        for k, v in times.items():
            TIMES[k] = max(TIMES.get(k, v), v) if k in _MOST else TIMES.get(k, 0) + v
    TIMES.update({"both": time.perf_counter() - t0, "processes": len(parts), "pieces": n})
    offsets = [0]
    for _, _, k in pieces[:-1]:
        offsets.append(offsets[-1] + k)
    stores = [store for _, store, _ in pieces]
    del pieces
    stores[0].source = source
    # the columns four at a time: each holds one more column until its pieces' copies go
    return (_document(env), concat_stores(stores, offsets, min(JOIN_THREADS, forked.cores(len(parts)))),
            any(p[1] for p in parts))


JOIN_THREADS = 4
"""Columns the parts' stores are joined by at once (events.concat_stores): 1 GB, 8 processes on
16 cores, the join took ~0.045 s of the decode's ~0.77 s one column at a time."""


def _document(env: _Envelope) -> Document:
    return Document(traceEvents=[], deviceProperties=env.deviceProperties, distributedInfo=env.distributedInfo,
                    tracetui=env.tracetui, schemaVersion=env.schemaVersion,
                    baseTimeNanoseconds=env.baseTimeNanoseconds, host_name=env.host_name)


EARLY_HEAD_BYTES = 32 << 20
"""How much of a file the child of an early start decodes while this process starts the UI.

Both sides scale with the machine's speed: importing Textual and mounting the app took about as
long as decoding and indexing ~31 MB of trace (0.55 s against 17.5 ns/byte, 2-core VM). Tried
around it (first_screen_pty, 9 interleaved rounds on 61 MB): 24 MB 1.70 s, 32 MB 1.65-1.66 s,
44 MB 1.71 s.
"""


class Early:
    """The tail of a large trace's events, decoding in a forked child since the CLI started.

    The child gets the larger share, sized so both sides finish together although this process
    only starts its part once the UI is up. ``finish()`` decodes the head here and joins the
    two; None from it (or any surprise) means: take the usual path, which proves or repairs.
    """

    def __init__(self, data, env: _Envelope, first: Callable, pending: forked.Pending, share: float, n: int,
                 path=None, report=None):
        self.data, self.env, self.first, self.pending, self.share, self.n = data, env, first, pending, share, n
        self.path, self.report = path, report  # the file ``data`` was read from, and how
        self.started = time.perf_counter()

    def bytes(self) -> tuple:
        """The file's contents as read by the caller, and its LoadReport."""
        return self.data, self.report

    def finish(self, progress: Callable[[float], None] | None = None) -> tuple[Document, EventStore, bool] | None:
        try:
            mine = self.first(progress)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            self.cancel()
            return None
        except BaseException:  # the file cut short (TraceError), a cancelled load: no child left behind
            self.cancel()
            raise
        out = _joined_parts(self.env, [mine, self.pending.result()], self.started, self.n, self.data)
        if out is not None:
            TIMES["child share"] = self.share
        return out

    def cancel(self) -> None:
        self.pending.cancel()


def early_share(n_bytes: int, head_bytes: int = EARLY_HEAD_BYTES) -> float:
    """The child's fraction of the events: both finish together when this process starts its
    part ``head_bytes`` of decoding later (capped at 0.8, so this process always has a part)."""
    return min(0.8, (1 + head_bytes / max(n_bytes, 1)) / 2)


def start(data: bytes | bytearray, path=None, report=None, head_bytes: int = EARLY_HEAD_BYTES) -> Early | None:
    """Fork a child that decodes and indexes the tail of ``data`` (read from ``path``, as
    ``report`` says) now; None where the file is too small, not a plain document, or fork is
    unavailable."""
    if not enabled(data) or first_byte(data) != b"{":
        return None
    try:
        found = _quick_envelope(data)
    except RecursionError:
        return None
    if found is None:
        return None
    env, arr, base = found
    share = early_share(len(arr), head_bytes)
    c = _split_point(arr, at=1 - share)
    if c is None:
        return None
    first, second, n = _parts(data, arr, base, c)
    pending = forked.spawn(second)
    return Early(data, env, first, pending, share, n, path, report) if pending is not None else None
