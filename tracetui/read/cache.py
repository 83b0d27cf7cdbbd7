"""The reopen cache: a loaded trace's event store, kept on disk so the next open skips the decode.

Where: ``$XDG_CACHE_HOME/tracetui`` (default ``~/.cache/tracetui``), one file per trace path and
kind: ``<hash>.store`` (the event store, this module) and ``<hash>.model`` (what the model builds
on it: model/reopen.py). Off: ``--no-cache``, or ``TRACETUI_NO_CACHE=1``. Size: at most
``TRACETUI_CACHE_MAX_BYTES`` (default 4 GiB); the least recently used traces go first, their
entries together. Clearing it: delete the folder.

An entry is served only when the trace file is the one it was made from: same size, mtime
(ns), inode and device, and the same hash of its first and last 64 KiB; and only when the same
code made it (``code_key``: a hash of read/ and model/). It is written to a temporary file in the
folder and renamed into place, so a reader sees a whole entry or none, and two processes writing
the same entry at once leave one of the two whole. A truncated or corrupt entry (bad magic, sizes
that disagree, a header that does not decode or fails its CRC, an array past the end) or one of
another format is ignored and replaced by the next load. Only stores decoded from the file's own
bytes are kept (a repaired file's store points into the repaired text, which the file does not
hold).

Format: ``MAGIC``, the header's length, the header (msgpack: the file's identity, the code key,
the kind, the store's lists and dicts, each array's dtype, shape and offset), the arrays' raw
bytes (64-byte aligned), then ``END`` with the length before it and the header's CRC-32. It is
read through a private (copy-on-write) mapping: the arrays are views of it, a reopen pays for the
pages it reads, and writes stay the reader's. Measured against Arrow IPC and Parquet
(benchmarks/bench_reopen.py, docs/perf.md).
"""
from __future__ import annotations

import functools
import hashlib
import mmap
import os
import struct
import tempfile
import time
import zlib
from pathlib import Path

import msgspec
import numpy as np

from tracetui.read.events import EventStore, Flows, Instants

FORMAT = 2
"""The entries' layout; an entry of another format is ignored and replaced. 2: the model entry
(``*.model``) beside the store's, and the code key in every header."""
MAGIC = b"TTCACHE" + bytes([FORMAT])
END = b"TTCEND01"
OFF_ENV = "TRACETUI_NO_CACHE"
MAX_ENV = "TRACETUI_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
EDGE_BYTES = 64 << 10
"""How much of the file's head and of its tail the identity hashes."""
STALE_TMP_S = 3600
"""A temporary file this old is a writer that died: eviction removes it."""

STORE, MODEL = "store", "model"
"""The kinds of entry: the event store (this module), the model built on it (model/reopen.py)."""
ENTRY_SUFFIXES = (".store", ".model")
CODE_FOLDERS = ("read", "model")
"""The folders of tracetui whose code makes what the entries hold (``code_key``)."""

_ARRAYS = ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "seq", "fwd_tid", "file_index")
_COUNTS = ("missing_fields", "wrong_types", "times_out_of_range", "negative_durations")
_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"  # the XDG spec: relative is invalid
    return root / "tracetui"


def enabled(flag: bool | None = True) -> bool:
    """Whether to use the cache: the caller asked (``--no-cache`` says False) and the
    environment does not turn it off. Not under an address-space limit (``ulimit -v``, ``prlimit
    --as``): there msgspec's allocation of an entry can fail inside C and end the process with
    SIGSEGV (a 30 MB name under a cap 100 MB above the imports did), where the load alone gives
    whole output or one line; the cache only saves time, so a capped run goes without it."""
    from tracetui.read.source import _address_space
    return (bool(flag) and os.environ.get(OFF_ENV, "").strip().lower() in ("", "0", "false", "no")
            and not _address_space())


def max_bytes() -> int:
    from tracetui.read.source import parse_size  # noqa: PLC0415
    raw = os.environ.get(MAX_ENV)
    try:
        return parse_size(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def identity(path: Path) -> list | None:
    """(size, mtime ns, inode, device, hash of the head and tail) of a regular file; None else."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not _regular(st.st_mode):
                return None
            h = hashlib.blake2b(f.read(EDGE_BYTES), digest_size=16)
            if st.st_size > EDGE_BYTES:
                f.seek(max(st.st_size - EDGE_BYTES, EDGE_BYTES))
                h.update(f.read(EDGE_BYTES))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, h.hexdigest()]


def _regular(mode: int) -> bool:
    import stat  # noqa: PLC0415
    return stat.S_ISREG(mode)


def entry_path(path: Path, kind: str = "store") -> Path:
    """The cache file of a trace path, of one ``kind`` (``STORE``, ``MODEL``): one entry of each
    per path, so a rewritten trace replaces its own."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:40]
    return cache_dir() / f"{key}.{kind}"


@functools.lru_cache(maxsize=1)
def code_key() -> str:
    """A hash of the code that makes what the entries hold (tracetui/read and tracetui/model):
    an entry made by other code (an upgrade, a checkout of another commit) is never served."""
    h = hashlib.blake2b(digest_size=16)
    h.update(bytes([FORMAT]))
    root = Path(__file__).resolve().parent.parent
    for folder in CODE_FOLDERS:
        for f in sorted((root / folder).glob("*.py")):
            h.update(f.name.encode())
            try:
                h.update(f.read_bytes())
            except OSError:
                h.update(b"?")
    return h.hexdigest()


def load(path: Path, ident: list | None = None) -> tuple[EventStore, dict, dict] | None:
    """(store, the document's other keys, the load report's fields) from the cache, or None:
    no entry, a stale one (the file changed) or an unreadable one."""
    ident = identity(path) if ident is None else ident
    got = _read(entry_path(path), ident, STORE)
    if got is None:
        return None
    header, buf, base = got
    try:
        store = _unpack(header, buf, base)
    except (ValueError, KeyError, TypeError, IndexError):
        return None  # corrupt: the next save replaces it
    return store, header["meta"], header["report"]


def load_arrays(path: Path, ident: list | None, kind: str, key: dict) -> tuple[dict, dict] | None:
    """(header, name -> array) of the file's ``kind`` entry (``MODEL``) made with the options
    ``key``, or None: no entry, a stale one (the file, the code or an option changed), an
    unreadable one. The arrays are views of the entry, mapped copy-on-write (writable: a write
    stays the caller's)."""
    if ident is None:
        return None
    got = _read(entry_path(path, kind), ident, kind)
    if got is None:
        return None
    header, buf, base = got
    try:
        if header.get("key") != key:
            return None
        return header, _arrays(header, buf, base)
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def save_arrays(path: Path, ident: list | None, kind: str, key: dict, header: dict,
                arrays: list[tuple[str, np.ndarray]]) -> bool:
    """Write the file's ``kind`` entry: ``header`` (msgpack-able), the options ``key`` and
    ``arrays``, atomically; False where it could not be (never raises)."""
    if ident is None:
        return False
    return _save(path, kind, {**header, "key": key}, arrays, ident)


def _read(entry: Path, ident: list | None, kind: str) -> tuple[dict, mmap.mmap, int] | None:
    """(header, the whole entry, where its arrays start) of an entry made from the file as
    ``ident`` names it, by this code, of ``kind``; None else (missing, stale, not whole)."""
    if ident is None:
        return None
    try:
        with open(entry, "rb") as f:
            # mapped copy-on-write: only the pages read cost anything, and a caller's writes to
            # an array stay its own. Entries are replaced by rename, never rewritten in place,
            # so the mapped file does not shrink under the reader.
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):  # ValueError: an empty file
        return None
    try:
        header, base = _header(buf)
    except (ValueError, KeyError, TypeError, IndexError, struct.error, msgspec.DecodeError):
        return None  # corrupt: the next save replaces it
    if header.get("identity") != ident or header.get("code") != code_key() or header.get("entry") != kind:
        return None
    try:
        os.utime(entry)  # last used: eviction goes by this
    except OSError:
        pass
    return header, buf, base


def fresh(path: Path) -> bool:
    """Whether ``load`` would find an entry for this file as it is now (a header check only)."""
    ident = identity(path)
    if ident is None:
        return False
    try:
        with open(entry_path(path), "rb") as f:
            head = f.read(len(MAGIC) + 8)
            if head[:len(MAGIC)] != MAGIC:
                return False
            (n,) = struct.unpack("<Q", head[len(MAGIC):])
            header = _dec.decode(f.read(n))
            return header.get("identity") == ident and header.get("code") == code_key()
    except (OSError, ValueError, struct.error, msgspec.DecodeError, AttributeError):
        return False


def reader(path: Path, ident: list):
    """The file's bytes, read (and gunzipped) again for a store from the cache, or None where
    the file is no longer the one the entry was made from (its args would be another file's)."""
    def read() -> bytes | None:
        from tracetui.read.errors import TraceError  # noqa: PLC0415
        from tracetui.read.source import LoadReport, read_bytes  # noqa: PLC0415
        if identity(path) != ident:
            return None
        try:
            data = read_bytes(path, LoadReport())
        except TraceError:
            return None
        return data if identity(path) == ident else None
    return read


def save(path: Path, ident: list | None, store: EventStore, meta: dict, report: dict) -> bool:
    """Write the entry (atomically); False where it could not be (never raises)."""
    if ident is None:
        return False
    try:
        header, arrays = _pack(store)
    except (TypeError, ValueError, OverflowError):
        return False
    header.update(meta=meta, report=report)
    return _save(path, STORE, header, arrays, ident)


def _save(path: Path, kind: str, header: dict, arrays: list[tuple[str, np.ndarray]], ident: list) -> bool:
    folder = cache_dir()
    header = {**header, "format": FORMAT, "entry": kind, "identity": ident, "code": code_key(),
              "path": os.fsdecode(path)}
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="." + kind, dir=folder)
    except OSError:
        return False
    try:
        with open(fd, "wb") as f:
            _write(f, header, arrays)
        os.replace(tmp, entry_path(path, kind))
    except (OSError, TypeError, ValueError, OverflowError, msgspec.EncodeError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    evict(folder, max_bytes())
    return True


def evict(folder: Path, cap: int) -> None:
    """Remove the least recently used traces' entries until the folder holds at most ``cap``
    bytes, and temporary files of writers that died. A trace's entries (store, model) go
    together, last used when its store entry was (every reopen reads that one)."""
    now = time.time()
    groups: dict[str, list] = {}  # trace key -> [last used, bytes, paths]
    try:
        with os.scandir(folder) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.name.startswith(".tmp-"):
                    if now - st.st_mtime > STALE_TMP_S:
                        _unlink(e.path)
                elif e.name.endswith(ENTRY_SUFFIXES):
                    stem, _, suffix = e.name.partition(".")
                    g = groups.setdefault(stem, [None, 0, []])
                    if suffix == STORE or g[0] is None:
                        g[0] = st.st_mtime
                    g[1] += st.st_size
                    g[2].append(e.path)
    except OSError:
        return
    total = sum(g[1] for g in groups.values())
    for _, size, paths in sorted(groups.values(), key=lambda g: g[0]):
        if total <= cap:
            break
        for p in paths:
            _unlink(p)
        total -= size


def _unlink(p: str) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def _pack(store: EventStore) -> tuple[dict, list[tuple[str, np.ndarray]]]:
    arrays = [(k, getattr(store, k)) for k in _ARRAYS]
    arrays += [("memory.file_index", store.memory.file_index), ("memory.ts", store.memory.ts)]
    flows = {}
    for side in ("starts", "ends"):
        flows[side] = []
        for j, (cat, ids) in enumerate(getattr(store.flows, side).items()):
            if ids.dtype == np.int64:
                arrays.append((f"flows.{side}.{j}", ids))
                flows[side].append([cat, f"flows.{side}.{j}", None])
            else:  # ids as written (Chrome's hex strings)
                flows[side].append([cat, None, ids.tolist()])
    header = {"names": store.names, "track_keys": store.track_keys,
              "thread_names": [[p, t, n] for (p, t), n in store.thread_names.items()],
              "process_names": [[p, n] for p, n in store.process_names.items()],
              "skipped": store.skipped, "unreadable": store.unreadable, "flows": flows,
              "memory_keys": store.memory.keys, **{k: getattr(store, k) for k in _COUNTS}}
    return header, arrays


def _write(f, header: dict, arrays: list[tuple[str, np.ndarray]]) -> None:
    specs, offset = [], 0
    for name, a in arrays:
        a = np.ascontiguousarray(a)
        specs.append([name, a.dtype.str, list(a.shape), offset])
        offset += -(-a.nbytes // 64) * 64
    header["arrays"] = specs
    head = _enc.encode(header)
    start = len(MAGIC) + 8 + len(head)
    pad0 = -start % 64
    f.write(MAGIC + struct.pack("<Q", len(head)) + head + bytes(pad0))
    for name, a in arrays:
        a = np.ascontiguousarray(a)
        f.write(memoryview(a).cast("B") if a.nbytes else b"")
        f.write(bytes(-a.nbytes % 64))
    total = start + pad0 + offset
    f.write(END + struct.pack("<QI", total, zlib.crc32(head)))
    f.flush()


def _header(buf) -> tuple[dict, int]:
    """The header and where the arrays start; ValueError where the entry is not whole."""
    m = len(MAGIC)
    if len(buf) < m + 8 + len(END) + 12 or buf[:m] != MAGIC or buf[-20:-12] != END:
        raise ValueError("not a whole entry")
    (n,) = struct.unpack_from("<Q", buf, m)
    total, crc = struct.unpack_from("<QI", buf, len(buf) - 12)
    head = bytes(buf[m + 8:m + 8 + n])
    if total != len(buf) - 20 or len(head) != n or zlib.crc32(head) != crc:
        raise ValueError("sizes or checksum disagree")
    header = _dec.decode(head)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("another format")
    start = m + 8 + n
    return header, start + (-start % 64)


def _arrays(header: dict, buf, base: int) -> dict[str, np.ndarray]:
    """The entry's arrays, as views of ``buf``; ValueError where one lies past the end."""
    end = len(buf) - 20
    arr = {}
    for name, dtype, shape, offset in header["arrays"]:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError("object array")
        count = int(np.prod(shape)) if shape else 1
        if offset < 0 or count < 0 or base + offset + count * dt.itemsize > end:
            raise ValueError("array past the end")
        arr[name] = np.frombuffer(buf, dtype=dt, count=count, offset=base + offset).reshape(shape)
    return arr


def _unpack(header: dict, buf, base: int) -> EventStore:
    arr = _arrays(header, buf, base)
    flows = Flows()
    for side in ("starts", "ends"):
        for cat, ref, values in header["flows"][side]:
            if ref is not None:
                ids = arr[ref]
            else:
                ids = np.empty(len(values), dtype=object)
                ids[:] = values
            getattr(flows, side)[cat] = ids
    tup = lambda xs: [tuple(x) for x in xs]  # noqa: E731 - msgpack gives lists for tuples
    return EventStore(
        names=header["names"], **{k: arr[k] for k in _ARRAYS}, track_keys=tup(header["track_keys"]),
        thread_names={(p, t): n for p, t, n in header["thread_names"]},
        process_names={p: n for p, n in header["process_names"]}, flows=flows,
        skipped=header["skipped"], unreadable=header["unreadable"],
        memory=Instants(arr["memory.file_index"], arr["memory.ts"], tup(header["memory_keys"])),
        **{k: header[k] for k in _COUNTS})


def cached_events(path: Path, ident: list | None):
    """``load.Events`` of the file from its cache entry, or None (no entry, stale, unreadable)."""
    from tracetui.read.load import Events  # noqa: PLC0415
    from tracetui.read.source import LoadReport  # noqa: PLC0415
    if ident is None:
        return None
    got = load(path, ident)
    if got is None:
        return None
    store, meta, report = got
    store.reread = reader(path, ident)
    rep = LoadReport(repairs=list(report.get("repairs", [])), truncated_bytes=int(report.get("truncated_bytes", 0)),
                     compressed=bool(report.get("compressed")), raw_size=int(report.get("raw_size", 0)))
    return Events(path, store, meta, rep)


def keep(path: Path, ident: list | None, data, events) -> bool:
    """Save ``events`` where its store points into ``data``, the file's own bytes (not a
    repaired copy), and the file is still the one ``ident`` names."""
    if ident is None or events.store.source is not data or identity(path) != ident:
        return False
    r = events.report
    report = {"repairs": list(r.repairs), "truncated_bytes": r.truncated_bytes, "compressed": r.compressed,
              "raw_size": r.raw_size}
    return save(path, ident, events.store, events.meta, report)
