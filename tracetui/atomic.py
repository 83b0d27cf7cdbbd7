"""Write files whole or not at all: a full disk or a kill mid-write leaves the old files (or none),
never a truncated trace that later loads as "damaged"."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
    every one of them is written are they renamed into place (``os.replace``, atomic per file)."""
    done: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            done.append((tmp, path))
            # mkstemp makes 0600: the file gets the mode a plain open() would (0644 under umask 022),
            # as `tracetui record` writes its traces, so a trace made by `gen` can be shared alike
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in done:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    for tmp, path in done:
        os.replace(tmp, path)
