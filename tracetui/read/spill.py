"""A large ``.json.gz`` trace is gunzipped into an unnamed temporary file and read through a
read-only map of it, as a plain trace is (source.py): the load then holds no copy of the
unzipped text in its own memory, and the lazy args pass reads its pages again.

The file is made with ``O_TMPFILE`` in the temporary folder (``TMPDIR``): it has no name, so
nothing is left behind whatever happens to the process, and it is gone once closed and unmapped.
Where the folder is in memory (tmpfs, ramfs) or cannot take such a file, or the disk fills up,
the caller gunzips into memory as before.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path
from typing import Callable

SPILL_MIN_BYTES = 4 << 20
"""Compressed files from this size are gunzipped into a temporary file (a trace compresses
10-20x: this is ~40-80 MB of JSON); smaller ones into memory."""

IN_MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs"})


class Mapped(mmap.mmap):
    """A read-only map of a trace's text, with the identity of the file it maps (``path`` and
    ``stamp``: inode, size, mtime) where that is the user's file; None for a gunzipped one."""
    path: Path | None = None
    stamp: tuple | None = None
    fd: int | None = None
    """A descriptor of the user's file, kept open beside the map: the decode reads its pieces
    with ``pread`` (source.read_piece), where a file cut short since gives a short read and a
    clear error instead of a SIGBUS from the map."""


def _fs_type(folder: str) -> str | None:
    """The file system type of the mount holding ``folder`` (Linux /proc), None where unknown."""
    try:
        real = os.path.realpath(folder)
        with open("/proc/self/mountinfo") as f:
            best, kind = "", None
            for line in f:
                left, _, right = line.partition(" - ")
                at = left.split()[4].replace("\\040", " ")
                inside = real == at or real.startswith(at.rstrip("/") + "/")
                if inside and len(at) >= len(best) and right:
                    best, kind = at, right.split()[0]
            return kind
    except (OSError, IndexError):
        return None


def spill_fd(compressed: int) -> int | None:
    """A new unnamed file to gunzip into, or None: a small file, no O_TMPFILE, a temporary
    folder in memory or of unknown type."""
    if compressed < SPILL_MIN_BYTES or not hasattr(os, "O_TMPFILE"):
        return None
    folder = tempfile.gettempdir()
    kind = _fs_type(folder)
    if kind is None or kind in IN_MEMORY_FS:
        return None
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600)
    except OSError:
        return None


class FileOut:
    """The gunzipped bytes written into the unnamed file ``fd``, with the interface of
    source._Out (``add``, ``cut``, ``room``, ``done``); ``over()`` is the error raised past ``limit``."""

    def __init__(self, fd: int, limit: int, step: int, over: Callable[[], Exception]):
        self.fd, self.n, self.limit, self.step, self.over = fd, 0, limit, step, over

    def __len__(self) -> int:
        return self.n

    def room(self) -> int:
        return max(1, min(self.step, self.limit - self.n + 1))

    def add(self, piece) -> None:
        k = len(piece)
        if self.n + k > self.limit:
            raise self.over()
        view = memoryview(piece)
        while view:
            view = view[os.write(self.fd, view):]
        self.n += k

    def cut(self, n: int) -> None:
        os.ftruncate(self.fd, n)
        os.lseek(self.fd, n, os.SEEK_SET)
        self.n = n

    def done(self) -> Mapped | bytearray:
        """The text as a read-only map (the file closes; the map keeps it), or an empty bytearray."""
        try:
            return Mapped(self.fd, self.n, access=mmap.ACCESS_READ) if self.n else bytearray()
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
