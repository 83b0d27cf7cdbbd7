"""Write files whole or not at all: a full disk or a kill mid-write leaves the old files (or none),
never a truncated trace that later loads as "damaged".

Only a regular file (or a new path) is ever replaced. A rename over ``/dev/null`` run as root made
the machine's /dev/null a regular file (issue 44 item 4), so each path is looked at first: a
character device or a FIFO (``-o /dev/null``, ``-o /dev/stdout``, a named pipe) is written
through, as a shell's ``>`` would; anything else that is not a regular file (a folder, a block
device, a socket) is refused with UnsafeTarget, before anything is written."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class UnsafeTarget(ValueError):
    """A path that is neither a regular file, a new name, a character device nor a FIFO."""


WRITE_THROUGH = {stat.S_IFCHR: "a character device", stat.S_IFIFO: "a FIFO"}
"""Kinds written in place, never renamed over: what a shell's ``>`` writes to as well."""

REFUSED = {stat.S_IFDIR: "a folder", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}
"""Kinds refused: replacing them destroys them, and writing into them is not what -o means."""


def target_kind(path) -> str:
    """``"new"``, ``"regular"`` or ``"through"`` (write in place) for ``path``, or UnsafeTarget.
    A symbolic link is judged by what it points to (a link to /dev/null is written through)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "new"
    fmt = stat.S_IFMT(mode)
    if fmt == stat.S_IFREG:
        return "regular"
    if fmt in WRITE_THROUGH:
        return "through"
    what = REFUSED.get(fmt, "not a regular file")
    raise UnsafeTarget(f"{path}: {what}: tracetui writes a file there only if it is a regular file, "
                       "a character device or a FIFO")


def _umask() -> int:
    """The process's umask (Linux reads it without changing it; elsewhere set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_all(files: dict) -> None:
    """Write ``{path: bytes}``: each to a temporary file beside its target, synced, and only when
    every one of them is written are they renamed into place (``os.replace``, atomic per file).
    A character device or FIFO is written through instead (``target_kind``), after the others are
    staged; a path of any other kind refuses the whole call before anything is written."""
    kinds = {Path(p): target_kind(p) for p in files}
    done: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            if kinds[path] == "through":
                continue
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            done.append((tmp, path))
            # mkstemp makes 0600: the file gets the mode a plain open() would (0644 under umask 022),
            # as `tracetui record` writes its traces, so a trace made by `gen` can be shared alike
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for path, data in files.items():
            if kinds[Path(path)] == "through":
                _write_through(Path(path), data)
        for _, path in done:  # looked at again just before the rename: still nothing but a file
            if target_kind(path) == "through":
                raise UnsafeTarget(f"{path}: became a device or FIFO while being written: not replaced")
    except BaseException:
        _discard(done)
        raise
    for tmp, path in done:
        os.replace(tmp, path)


def _discard(done: list[tuple[str, Path]]) -> None:
    for tmp, _ in done:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write_through(path: Path, data: bytes) -> None:
    """Write into a character device or FIFO in place (no O_CREAT: it exists; no rename)."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        if stat.S_IFMT(os.fstat(fd).st_mode) not in WRITE_THROUGH:  # swapped since it was looked at
            raise UnsafeTarget(f"{path}: changed while being written: not written")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
