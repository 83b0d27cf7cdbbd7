"""Start loading a large trace before the UI is imported: an uncompressed file's tail decodes in
a forked child (``split.start``), a gzipped one is gunzipped in a thread that then forks the
child. ``model.trace.load_trace(path, early=...)`` joins the result; anything unexpected makes
the handle give nothing, and the load takes its usual path."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from tracetui.read import cache as store_cache
from tracetui.read import split as _split
from tracetui.read.errors import TraceError
from tracetui.read.source import LoadReport, read_bytes, resolve_input

EARLY_GZ_MIN_BYTES = 1 << 20
"""Gzipped files from this size are gunzipped in a thread while the UI starts (zlib releases
the GIL: gunzip of 61 MB beside Python work, 0.29 s together against 0.44 s one after the other)."""


EARLY_GZ_HEAD_BYTES = 16 << 20
"""The head start of a gzipped trace's child, which forks only once the gunzip is done (about
halfway through the UI's start-up, where an uncompressed file's child forks at its beginning)."""


class _Gunzipping:
    """A gzipped trace being read and gunzipped in a thread since the CLI started; once the
    bytes are there, the same thread forks the child that decodes their tail (``split.start``).

    Same interface as ``split.Early``: ``bytes()`` waits for the file's contents (or raises the
    error reading it met), ``finish()`` joins the child's part (None: there is none), ``cancel()``
    drops both.
    """

    def __init__(self, path: Path):
        self.path, self.report = path, LoadReport()
        self._data = self._error = self._early = None
        self._cancelled = False
        self._ready, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._read, name="tracetui-gunzip", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._data = read_bytes(self.path, self.report)
        except BaseException as e:  # noqa: BLE001 - raised again where the load asks for the bytes
            self._error = e
            self._ready.set()
            return
        if not self._cancelled:
            self._early = _split.start(self._data, self.path, self.report, head_bytes=EARLY_GZ_HEAD_BYTES)
            if self._cancelled and self._early is not None:  # cancelled while it forked
                self._early.cancel()
        self._ready.set()
        if self._early is not None:  # the child dies with the thread that forked it (PR_SET_PDEATHSIG):
            self._release.wait()     # this one lives until its part is collected or dropped

    def bytes(self) -> tuple:
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._data, self.report

    def finish(self, progress=None):
        self._ready.wait()
        try:
            return self._early.finish(progress) if self._early is not None else None
        finally:
            self._release.set()

    def cancel(self) -> None:
        self._cancelled = True
        self._data = None
        if self._early is not None:
            self._early.cancel()
        self._release.set()


def start_load(path, cache: bool = False) -> "_split.Early | _Gunzipping | None":
    """Begin loading a large trace file before the UI is imported.

    An uncompressed file is read and the decode of its tail starts in a forked child; a gzipped
    one is gunzipped in a thread. Returns the handle for ``load_trace(path, early=...)``, or None
    where it would not help (a small file, no fork, an envelope it cannot place): loading then
    starts later as usual. Reading errors are left for ``load_trace`` to report. None too where
    ``cache`` is on and the reopen cache holds this file (read/cache.py): nothing to decode.
    """
    try:
        path = resolve_input(Path(path))
        if store_cache.enabled(cache) and store_cache.fresh(path):
            return None
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
            size = os.fstat(f.fileno()).st_size
        if gz:
            return _Gunzipping(path) if size >= EARLY_GZ_MIN_BYTES else None
        if size < _split.MIN_BYTES:
            return None
        report = LoadReport()
        data = read_bytes(path, report)
    except (TraceError, OSError):
        return None
    return _split.start(data, path, report)
