"""Where an index lives on disk, and how a new one replaces the old so that a reader always sees a
whole index.

``-o INDEX`` is a symlink to a versioned folder beside it (``.INDEX.v-STAMP``). A build writes
into ``.INDEX.building-PID``, renames it to a new version when complete, and swaps the link with
one ``rename`` of a new link over it: a reader that resolved the link reads one version whole,
and the previous version is kept until the next build (a reader still on it can finish). A build
killed at any moment leaves either the old link or the new one, never none, and its
``.building-PID`` folder is removed by the next build (``clean_litter``). Every write failure
(read-only, full disk, no permission) is one ``TraceError`` naming the index
(``writing``). Reading, every file of the index must be a regular file (``check_files``): a FIFO
would hang DuckDB.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from pathlib import Path

from tracetui.read.errors import TraceError

MANIFEST = "tracetui-index.json"
"""The index's manifest: job, ranks, diagnostics; written last, so its presence means complete."""

LINK_HOPS = 40
"""Symlinks followed from ``-o`` to the index they name (the kernel's own limit)."""


INNER_FOLDER = re.compile(r"^\.(?P<index>.+)\.(?:v-\d+-\d+|(?:building|old|link)-\d+)$")
"""The name of a version folder (or a killed build's leftover) beside an index link."""


def _version_re(name: str) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(name)}\.v-\d+-\d+$")


def _litter_re(name: str) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(name)}\.(?:building|old|link)-(\d+)$")


def is_ours(out: Path) -> bool:
    """Whether ``out`` is a link this module made: to a version folder beside it."""
    try:
        target = os.readlink(out)
    except OSError:
        return False
    return "/" not in target and bool(_version_re(out.name).match(target))


def target(out, inputs: list) -> Path:
    """The path the index goes to: ``out`` made absolute (``-o .`` and ``-o ..`` name folders),
    a user's symlink followed to what it names (never replaced by a folder), and refused when it
    holds the job's own traces or is something other than an index."""
    out = Path(os.path.abspath(out))
    for _ in range(LINK_HOPS):
        if not out.is_symlink() or is_ours(out):
            break
        out = Path(os.path.abspath(out.parent / os.readlink(out)))
    else:
        raise TraceError(out, "-o: too many symlinks (a loop?)")
    if out.parent == out:
        raise TraceError(out, "-o: the root folder cannot be an index")
    inner = INNER_FOLDER.match(out.name)
    if inner and not is_ours(out):  # a build there named its own version after it, which none removed
        raise TraceError(out, f"-o: a folder inside the index {inner['index']} (give -o {inner['index']})")
    for p in inputs:
        if Path(os.path.abspath(p)).is_relative_to(out):
            raise TraceError(out, f"-o: holds the job's own traces ({Path(p).name}): not replaced")
    if out.exists() and not is_ours(out) and not (out.is_dir() and (out / MANIFEST).is_file()):
        raise TraceError(out, "exists and is not a tracetui index: not replaced")
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_litter(out: Path) -> list[str]:
    """Remove what builds killed before they finished left beside ``out`` (``.building-PID``,
    ``.old-PID``, ``.link-PID`` of a process no longer running). Returns the names removed."""
    rx = _litter_re(out.name)
    gone = []
    with contextlib.suppress(OSError):
        for p in out.parent.iterdir():
            m = rx.match(p.name)
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
                _remove(p)
                gone.append(p.name)
    return gone


def _remove(p: Path) -> None:
    if p.is_symlink() or not p.is_dir():
        with contextlib.suppress(OSError):
            p.unlink()
    else:
        shutil.rmtree(p, ignore_errors=True)


def building(out: Path) -> Path:
    """The folder this process builds the index in (removed first if a run of this pid left it)."""
    tmp = out.with_name(f".{out.name}.building-{os.getpid()}")
    _remove(tmp)
    return tmp


def swap(out: Path, built: Path) -> None:
    """Make ``built`` the index at ``out``: renamed to a version folder, then the link at ``out``
    replaced by one ``rename``. An old index that is a plain folder (built before versions) is
    moved aside first, the one moment without an index, once; the previous version is kept."""
    version = out.with_name(f".{out.name}.v-{time.time_ns()}-{os.getpid()}")
    os.replace(built, version)
    link = out.with_name(f".{out.name}.link-{os.getpid()}")
    _remove(link)
    os.symlink(version.name, link)
    aside = None
    if out.exists() and not out.is_symlink():
        aside = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, aside)
    os.replace(link, out)
    if aside is not None:
        _remove(aside)
    _prune(out, keep=version.name)


def _prune(out: Path, keep: str) -> None:
    """Versions beside ``out`` other than the current and the newest before it: removed."""
    rx = _version_re(out.name)
    versions = sorted((p for p in out.parent.iterdir() if rx.match(p.name) and p.name != keep),
                      key=lambda p: [int(x) for x in p.name.rsplit(".v-", 1)[1].split("-")])
    for p in versions[:-1]:
        _remove(p)


@contextlib.contextmanager
def writing(out: Path):
    """Around a build: an OS error writing the index (read-only, disk full, a file size limit,
    no permission) becomes one line naming the index."""
    try:
        yield
    except OSError as e:
        if isinstance(e, (TraceError, ConnectionError)):  # an input's error, a cluster's: not the output's
            raise
        why = e.strerror or (str(e).splitlines() or [type(e).__name__])[0]
        raise TraceError(out, f"cannot write the index: {why}") from None


def resolved(index) -> Path:
    """The version folder an index link names (resolved once, so every file read is of one
    version while a build swaps the link)."""
    return Path(os.path.realpath(index))


def check_files(index: Path, names: list[str]) -> None:
    """Refuse, before DuckDB or a read opens them, any of ``names`` (files or folders of the index)
    that holds something other than regular files: a FIFO blocks its reader forever, a device
    reads without end."""
    for name in names:
        p = index / name
        try:
            entries = [p] if not p.is_dir() else [p, *p.iterdir()]
        except OSError:
            continue
        for q in entries:
            try:
                mode = os.stat(q).st_mode
            except OSError:
                continue  # missing: the reader says so
            if q is p and stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                what = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) \
                    else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode) else "not a file"
                raise TraceError(index, f"{q.relative_to(index)} is {what}, not a file: not read "
                                        "(rebuild it with tracetui index)")
