"""Keep a load's large temporaries on the malloc heap instead of fresh mmaps (glibc only).

glibc serves a request above its mmap threshold (at most 32 MiB) with a fresh mmap and unmaps
it on free, so on a GB-sized trace (4M nodes: 32.4 MB per int64 column) every numpy temporary
was a new mapping that the kernel zero-filled page by page. During a load, ``large_arrays_on_heap``
turns mmap off for malloc and keeps freed memory in the heap for reuse; afterwards it restores
glibc's defaults and hands the free heap back to the system (``malloc_trim``), so the process
then holds less than before. 1 GB replica, 4 interleaved rounds (docs/perf.md): load 8.4-9.8 ->
7.3-8.3 s, peak 2,200 -> 2,259 MB, held after the load 2,170 -> 1,937 MB (in the app, which loads
in a worker thread: 2,203 -> 1,727 MB). A 94 MB trace: no change beyond the noise. Elsewhere
(musl, macOS, no libc found) it does nothing.

The load's stages run side by side in threads (together.py), and glibc gives each new thread
an arena of its own, whose freed memory only that arena reuses: with nothing handed back,
every thread kept its own high-water mark (1 GB replica, 2 workers: peak RSS 759 -> 1,272 MB).
So a load also stops glibc making new arenas (``M_ARENA_MAX`` 1): new threads share the arenas
there are. In the CLI that is the main one (918 MB); in the app the loading worker's own arena
and the main one. The cap is not put back (threads made later share too, which costs Python
code nothing: it holds the GIL around most of its allocations), and it does nothing where glibc
fixed its limit already (once a process had more arenas than its arena_test, 8 on 64 bits).
"""
from __future__ import annotations

import ctypes
import os

from tracetui.read.held import Held

M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8  # mallopt parameters (malloc.h)
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536  # glibc's defaults
KEEP_FREED = 2**31 - 1                         # mallopt takes an int

_libc = None


def _glibc():
    """The C library's functions where it is glibc, else None. ``os.confstr`` names it and
    ``dlopen(NULL)`` reaches it without ``ctypes.util.find_library`` and ``platform.libc_ver``,
    which cost ~10 ms of every load's start (a subprocess and a read of the interpreter)."""
    global _libc
    if _libc is None:
        _libc = False
        try:
            if (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
                lib = ctypes.CDLL(None)
                lib.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
                lib.malloc_trim.argtypes = (ctypes.c_size_t,)
                _libc = lib
        except (OSError, ValueError, AttributeError):
            pass
    return _libc or None


def _on_heap() -> None:
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_MAX, 0)
        libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREED)


def _defaults() -> None:
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)


large_arrays_on_heap = Held(_on_heap, _defaults)
"""``with large_arrays_on_heap():`` malloc takes no mmaps and keeps what is freed; glibc's
defaults come back when the last load in flight leaves (held.py: nests, safe across threads; a
decode helper forked meanwhile keeps the mode)."""
