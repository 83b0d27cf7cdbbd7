"""Stages 1 and 2 of loading: resolve the input (a file, or a folder's newest trace), then its
bytes, with the caps and refusals that keep one file from taking the machine: only regular
files, at most ``max_bytes()`` (TRACETUI_MAX_BYTES) once gunzipped, a head that could be JSON
checked before the rest is read, gzip inflated into one buffer that never grows past the limit.
"""
from __future__ import annotations

import errno
import io
import mmap
import os
import re
import stat
import weakref
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tracetui.read.errors import TraceError
from tracetui.read.spill import FileOut, Mapped, spill_fd

TRACE_GLOBS = ("*.pt.trace.json.gz", "*.pt.trace.json", "*.json.gz", "*.json")
"""What a trace folder (tensorboard_trace_handler's output) is searched for, best match first."""


@dataclass
class LoadReport:
    """What loading had to do beyond a clean decode; empty lists mean a clean file."""
    repairs: list[str] = field(default_factory=list)
    truncated_bytes: int = 0
    compressed: bool = False
    raw_size: int = 0



MAX_BYTES_ENV = "TRACETUI_MAX_BYTES"
DEFAULT_MAX_BYTES = 8 << 30
"""The most a trace may take once read (and gunzipped): the smaller of 8 GiB, half the
machine's RAM and a third of an address-space limit, unless TRACETUI_MAX_BYTES says otherwise
(bytes, or with a K/M/G/T suffix). A load needs about 2.4x the file's size, so anything larger
could not be shown; a gzip bomb stops here."""

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
    limit = min(DEFAULT_MAX_BYTES, ram // 2) if ram > 0 else DEFAULT_MAX_BYTES
    space = _address_space()
    return min(limit, space // 3) if space else limit


def _address_space() -> int:
    """This process's address-space limit (``ulimit -v``, ``prlimit --as``) in bytes, 0 for none:
    a load needs ~2.4x its input, so the default limit stays under a third of it (a gzip bomb
    under --as=3G ran out of memory instead of being refused)."""
    try:
        import resource  # noqa: PLC0415 - not on every platform
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return 0
    return soft if soft not in (resource.RLIM_INFINITY, -1) and soft > 0 else 0


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
    traceEvents in place instead of copying half a file (the file itself is never written);
    from ``MMAP_MIN_BYTES`` on, as a read-only ``mmap`` of the file.
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
            check_head(path, head)
            if head[:2] == b"\x1f\x8b":
                data = f.read()
            elif st.st_size >= MMAP_MIN_BYTES and (mapped := _mapped(f, limit, path)) is not None:
                data = mapped
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


MMAP_MIN_BYTES = 16 << 20
"""Plain files from this size are memory-mapped read-only instead of read: the load then holds no
copy of the file in its own memory (the page cache has it), decoders read the pages and give
them back as they go (``release``), and the lazy args pass reads the file again through the same
map. Smaller files are read into a bytearray as before (the two-process decode closes its
pieces in place there)."""


def _mapped(f, limit: int, path: Path) -> Mapped | None:
    """The open file mapped read-only (the app never writes its input), or None where it cannot
    be mapped (then it is read). A file that grew past the limit meanwhile is refused."""
    try:
        st = os.fstat(f.fileno())
        m = Mapped(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, OverflowError):
        return None
    m.path, m.stamp = Path(path), (st.st_ino, st.st_size, st.st_mtime_ns)
    if len(m) > limit:
        m.close()
        raise TraceError(path, f"grew past the {limit:,}-byte limit ({MAX_BYTES_ENV}) while read")
    try:
        m.fd = os.dup(f.fileno())
        weakref.finalize(m, os.close, m.fd)
    except OSError:
        m.fd = None  # no spare descriptor: the pieces are copied from the map, as before
    return m


CUT_SHORT = "the file changed while it was read (cut short or rewritten meanwhile)"


def read_piece(data: Mapped, view: memoryview, offset: int) -> None:
    """Fill ``view`` with the bytes of ``data``'s file from ``offset`` through its descriptor
    (``pread``): a file cut short since it was mapped raises TraceError where reading the map
    past the file's new end would kill the process with SIGBUS."""
    got = 0
    while got < len(view):
        try:
            n = os.preadv(data.fd, [view[got:]], offset + got)
        except OSError as e:
            raise TraceError(data.path or Path("?"), f"cannot read: {e.strerror or e}") from None
        if not n:
            raise TraceError(data.path or Path("?"), CUT_SHORT)
        got += n


def release(data, lo: int = 0, hi: int | None = None) -> None:
    """Drop the pages of ``data[lo:hi]`` from this process's memory where ``data`` is a file's
    read-only map (a no-op for anything else): they stay in the page cache, and a later read
    maps them again, so this only keeps what was decoded from counting as this process's."""
    if not isinstance(data, mmap.mmap) or data.closed:
        return
    hi = len(data) if hi is None else min(hi, len(data))
    a = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages inside [lo, hi) only
    b = hi // mmap.PAGESIZE * mmap.PAGESIZE if hi < len(data) else len(data)
    if b > a:
        try:
            data.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (OSError, ValueError, AttributeError):
            pass


def in_memory(data, step: int = 16 << 20) -> bytes | bytearray:
    """``data`` as bytes in this process's memory: a file's map is copied a step at a time, each
    step's pages released once copied, so the copy never sits beside the whole file's pages
    (the repairs of a damaged file work on such a copy)."""
    if isinstance(data, (bytes, bytearray)):
        return data
    release(data)  # what a failed decode read
    out = bytearray(len(data))
    for i in range(0, len(data), step):
        out[i:i + step] = data[i:i + step]
        release(data, i, i + step)
    return out


def still_whole(data) -> bool:
    """False where ``data`` is a file's map and the file has shrunk since it was mapped (reading
    past its new end would kill the process with SIGBUS) or was written over in place (the map
    would show other bytes than those loaded): the caller must not read it then. A file replaced
    by another one (a new inode at its path) leaves the map on the old one, which is still whole."""
    if not isinstance(data, mmap.mmap):
        return True
    try:
        if data.closed or data.size() < len(data):
            return False
        stamp = getattr(data, "stamp", None)
        if stamp is None:
            return True
        try:
            st = os.stat(data.path)
        except OSError:  # gone from its path: the map holds the file that was loaded
            return True
        return st.st_ino != stamp[0] or (st.st_size, st.st_mtime_ns) == stamp[1:]
    except (OSError, ValueError):
        return False


HEAD_BYTES = 1 << 16
"""What is read of a file before the rest, to refuse one that cannot be JSON unread: a 2 GB
sparse file (all NULs) cost 2.1 GB of memory per MCP call before it was found not to be JSON."""

def check_head(path: Path, head: bytes) -> None:
    """Refuse, before the file is read, a file that starts with four NULs: no JSON text starts so
    (UTF-16/32 JSON has at most three), and a sparse file's hole does. Other non-JSON is refused
    once read, by the decode, as before (its error then says the same)."""
    if head[:4] == b"\x00" * 4:
        raise TraceError(path, "not JSON (starts with b'\\x00')")


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


def gunzip(path: Path, data: bytes, report: LoadReport, limit: int) -> bytearray | Mapped:
    """Every gzip member of ``data`` (``cat a.gz b.gz`` is one valid file), at most ``limit`` bytes.

    Damage keeps every byte that decompressed before it (a bad CRC: all of them), and a
    truncated stream keeps what it has; both are noted in ``report.repairs``. A whole, healthy
    file goes through ISA-L first where ``isal`` is installed (``tracetui[fast]``); anything
    else it meets (damage, a bomb, trailing bytes) is read again by zlib below, which says what.
    From ``spill.SPILL_MIN_BYTES`` compressed, the text goes into an unnamed temporary file and
    comes back as a read-only map of it (spill.py), so the load holds no copy of it.
    """
    fd = spill_fd(len(data))
    if fd is not None:  # a large file: into an unnamed temporary file, read through a map
        over = lambda: TraceError(path, f"gzip expands past the {limit:,}-byte limit "  # noqa: E731
                                        f"(a gzip bomb? {MAX_BYTES_ENV} raises it)")
        out = FileOut(fd, limit, GZ_OUT_STEP, over)
        notes = len(report.repairs)
        try:
            return out.done() if isal_into(data, out) else _gunzip(path, data, report, out)
        except OSError:  # the disk filled up (or failed): into memory after all
            del report.repairs[notes:]
        finally:
            out.close()
    out = _Out(data, limit, path)
    return out.done() if isal_into(data, out) else _gunzip(path, data, report, out)


def _gunzip(path: Path, data: bytes, report: LoadReport, out) -> bytearray | Mapped:
    """zlib's gunzip of ``data`` into ``out`` (``_Out``, or a ``FileOut``), as ``gunzip`` says."""
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


def isal_into(data: bytes, out) -> bool:
    """Gunzip ``data`` with ISA-L's igzip (1.6x zlib's speed: docs/perf.md) into ``out`` (``_Out``
    or a spill file's ``FileOut``) a step at a time; False, ``out`` emptied, where isal is not
    installed or the file is anything but whole gzip members within the limit: zlib's path then
    reads it again and says what."""
    try:
        from isal import igzip  # noqa: PLC0415 - optional: the `fast` extra
    except ImportError:
        return False
    buf = bytearray(out.step)
    try:
        with igzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            while k := f.readinto(buf):
                if out.n + k > out.limit:
                    raise ValueError("over the limit")  # a bomb: zlib's path refuses it with the usual line
                out.add(memoryview(buf)[:k])
    except OSError as e:
        if e.errno is not None:
            raise  # the disk of a spill file (full, failing): the caller gunzips into memory
        out.cut(0)  # "not a gzipped file" and the like: damage
        return False
    except Exception:  # noqa: BLE001 - damaged, truncated, trailing bytes
        out.cut(0)
        return False
    return True


class _Out:
    """The gunzipped bytes, grown in place into one bytearray (sized up front from the gzip
    trailer's length hint, never past the limit, so a GB-sized trace is not copied while it
    grows and a bomb that lies in its trailer gets no more than the limit)."""

    step = GZ_OUT_STEP

    def __init__(self, data: bytes, limit: int, path: Path):
        hint = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
        self.buf = bytearray(min(hint, limit, 64 * len(data)))
        self.n, self.limit, self.path = 0, limit, path

    def __len__(self) -> int:
        return self.n

    def room(self) -> int:
        """How much zlib may write next: one step, or one byte past the limit (to see it crossed)."""
        return max(1, min(self.step, self.limit - self.n + 1))

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




@dataclass
class Source:
    """Stages 1-2's output: the trace file and its contents (gunzipped), and how they were read."""
    path: Path
    data: bytes | bytearray | Mapped
    report: LoadReport


def read_input(path, early=None) -> Source:
    """Resolve ``path`` (a file, or the newest trace in a folder) and read it (``read_bytes``);
    ``early`` is a load started before the UI (``model.trace.start_load``): its bytes are used
    when it read the same file."""
    path = resolve_input(Path(path))
    if early is not None and early.path == path:
        data, report = early.bytes()
    else:
        report = LoadReport()
        data = read_bytes(path, report)
    return Source(path, data, report)
