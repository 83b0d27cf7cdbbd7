"""A second core for per-event Python work: run one part in a forked child beside the rest.

Per-event Python holds the GIL, so threads cannot share it; a forked child can, and it sees the
parent's arrays without a copy. This is only an optimisation: when fork is unavailable or the
child fails or hangs, the caller does the child's part itself, so results never depend on it.
"""
from __future__ import annotations

import atexit
import gc
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
from typing import Callable, TypeVar

from tracetui.read.together import together

T = TypeVar("T")
U = TypeVar("U")

CHILD_TIMEOUT_S = 120.0
"""How long the parent waits for the child beyond its own part before giving up on it."""


_LIVE: set[int] = set()
"""Children not yet reaped: killed when this process exits (e.g. the user quit mid-load)."""


@atexit.register
def _kill_live() -> None:
    for pid in list(_LIVE):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        _LIVE.discard(pid)


_SERIAL = threading.local()
"""Depth of ``serial()`` blocks, per thread: a one-worker map in one of the app's threads must not
turn off the two-process decode of a trace another thread loads meanwhile."""


class serial:
    """``with serial():`` loads in this thread use one core (a map asked for one worker must not
    fork a helper per rank: one worker means one process)."""

    def __enter__(self):
        _SERIAL.depth = getattr(_SERIAL, "depth", 0) + 1

    def __exit__(self, *exc):
        _SERIAL.depth -= 1


def available() -> bool:
    """Fork-based parallelism is on (Linux, more than one core, TRACETUI_PARALLEL not 0, not
    inside ``serial()`` in this thread)."""
    return (hasattr(os, "fork") and sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1
            and os.environ.get("TRACETUI_PARALLEL", "1") != "0" and not getattr(_SERIAL, "depth", 0))


WORKERS_ENV = "TRACETUI_WORKERS"
MAX_DEFAULT_WORKERS = 8
"""The default number of decode processes: one per CPU this process may run on
(``os.sched_getaffinity``), at most this many; ``--workers N`` or TRACETUI_WORKERS=N say otherwise."""


def default_workers() -> int:
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_DEFAULT_WORKERS))


def cores(workers: int | None) -> int:
    """How many cores a load asked for ``workers`` may use, in threads beside its processes
    (together.py): 1 where fork-based parallelism is off (``available``: one CPU,
    TRACETUI_PARALLEL=0, inside ``serial()``), so a one-worker load stays on one core; else
    ``workers``, or ``default_workers()``."""
    if not available():
        return 1
    return max(1, default_workers() if workers is None else workers)


def spread(parts: list[Callable[[], T]], retry: bool = True) -> list[T | None]:
    """``[part() for part in parts]``, the first computed in this process while each other one is
    computed in a forked child of its own. A child that delivers no result (None counts as none)
    has its part run here too, or with ``retry=False`` None stands in its place; children not
    collected when this process fails are killed."""
    pending = [spawn(part) for part in parts[1:]]
    try:
        t0 = time.perf_counter()
        out = [parts[0]()]
        extra = 4 * (time.perf_counter() - t0)
        # read back side by side: a child blocks on its full pipe until it is read
        got = together([lambda p=p: p.result(extra=extra) if p is not None else None for p in pending], len(pending))
        for part, value in zip(parts[1:], got):
            out.append(value if value is not None or not retry else part())
        return out
    finally:
        for p in pending:
            if p is not None:
                p.cancel()  # a no-op for those collected


def beside(child: Callable[[], T], parent: Callable[[], U], retry: bool = True) -> tuple[T | None, U]:
    """``(child(), parent())``, the first computed in a forked child while this process computes
    the second (``spread`` of two)."""
    mine, got = spread([parent, child], retry)
    return got, mine


class Pending:
    """A forked child computing one value; ``result()`` collects it, ``cancel()`` discards it."""

    def __init__(self, pid: int, r: int, shared: int | None = None):
        self.pid, self.r, self.done, self.shared = pid, r, False, shared

    def result(self, extra: float = 0.0):
        """The child's value, or None when it failed, hung past the timeout or was cancelled."""
        if self.done:
            return None
        self.done = True
        try:
            return receive(self.r, self.pid, timeout=CHILD_TIMEOUT_S + extra, shared=self.shared)
        finally:
            self._close_shared()

    def _close_shared(self) -> None:
        """The result's file, once mapped or not wanted (a mapping keeps its pages)."""
        if self.shared is not None:
            os.close(self.shared)
            self.shared = None

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            reap(self.pid, self.r, kill=True)
            self._close_shared()
        elif self.pid in _LIVE:  # result() is still reading in another thread: end the child now,
            try:                 # so no child outlives a cancel (the reader then sees EOF)
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (OSError, ChildProcessError):
                pass
            _LIVE.discard(self.pid)


def spawn(child: Callable[[], T]) -> Pending | None:
    """Start ``child()`` in a forked child; None when this process cannot fork."""
    shared = _memfd()

    def send(w: int) -> None:
        gc.disable()  # the child computes one value and exits: collecting cycles would only cost time
        value = child()
        with os.fdopen(w, "wb") as f:
            write_value(f, value, shared)

    try:
        pid, r = fork_child(send)
    except OSError:
        if shared is not None:
            os.close(shared)
        return None
    return Pending(pid, r, shared)


def _memfd() -> int | None:
    """A new anonymous in-memory file for a child's large buffers (``write_value``), or None
    where there is none (not Linux, an old kernel, no descriptor left): then they go through the pipe."""
    try:
        return os.memfd_create("tracetui-result", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None


def fork_child(body: Callable[[int], None], close: tuple = ()) -> tuple[int, int]:
    """Fork a child that runs ``body(w)`` with the write end of a new pipe, then exits (status 0
    when ``body`` returned, 1 on any error: the parent reads the pipe and checks the status),
    never returning into the parent's code. Returns ``(pid, read end)``; the child is in
    ``_LIVE`` until reaped. ``close``: the parent's descriptors the child must not hold (other
    children's pipes, whose end of file would otherwise wait for it). A failed fork closes the
    pipe and raises."""
    r, w = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # pragma: no cover - the child; what it does is seen through the pipe
        code = 1
        try:
            os.close(r)
            for fd in close:
                os.close(fd)
            quiet_child(parent)
            body(w)
            code = 0
        except BaseException:  # noqa: BLE001 - the status says it
            pass
        finally:
            os._exit(code)
    os.close(w)
    _LIVE.add(pid)
    return pid, r


def quiet_child(parent: int | None = None) -> None:
    """The child must not touch the parent's event loop (signal wake-up fd) or catch Ctrl-C, and
    dies with the thread that forked it, however that ends (SIGHUP or SIGKILL too, where no
    handler of the parent's runs: the helper went on for about 3 s after a SIGHUP)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGWINCH, signal.SIG_DFL)
    except (ValueError, OSError, AttributeError):
        pass
    if parent is not None:
        die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """Linux: the kernel SIGKILLs this process when the thread that started it ends
    (PR_SET_PDEATHSIG); a ``parent`` already gone by then shows as a changed parent id."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


_HEAD = struct.Struct("<QQQ")
SHARED_MIN_BYTES = 1 << 20
"""From this many bytes of buffers a child's result goes through its in-memory file, not the pipe."""


def write_value(f, value, shared: int | None = None) -> None:
    """``value`` pickled with its large buffers (numpy columns) out of band: a header (the
    pickle's length, how many buffers, whether they are in ``shared``), each buffer's length,
    the pickle, then each buffer's bytes straight from the array's memory, so neither side
    makes a whole copy of them. With ``shared`` (an in-memory file the parent also holds) and
    at least SHARED_MIN_BYTES of buffers, the buffers are written there instead (each from an
    ALIGN boundary): the child need not wait for the parent to read them, and the parent maps
    them without a copy. Should the file take no more (a memory limit), the pipe carries them."""
    bufs: list = []
    meta = pickle.dumps(value, protocol=5, buffer_callback=bufs.append)
    raws = [b.raw() for b in bufs]
    into_file = shared is not None and sum(r.nbytes for r in raws) >= SHARED_MIN_BYTES and _write_file(shared, raws)
    f.write(_HEAD.pack(len(meta), len(raws), into_file) + b"".join(struct.pack("<Q", r.nbytes) for r in raws))
    f.write(meta)
    if not into_file:
        for r in raws:
            f.write(r)


ALIGN = 64
"""Each buffer in the in-memory file starts at a multiple of this, as numpy's own buffers do
(a column after an odd-length one came out unaligned)."""


def _offsets(sizes: list[int]) -> list[int]:
    """Where each buffer starts in the in-memory file (both sides compute the same)."""
    out, at = [], 0
    for n in sizes:
        out.append(at)
        at += -(-n // ALIGN) * ALIGN
    return out


def _write_file(fd: int, raws: list) -> bool:
    """Every buffer into ``fd`` at its ``_offsets`` place; False (the file emptied again) when
    it takes no more (ENOSPC, EFBIG: a memory cgroup or a file-size limit)."""
    try:
        for r, at in zip(raws, _offsets([r.nbytes for r in raws])):
            view = memoryview(r).cast("B")
            while view:
                n = os.pwrite(fd, view[:1 << 30], at)
                view, at = view[n:], at + n
        return True
    except OSError:
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        return False


def _mapped(shared: int, sizes: list[int]) -> list:
    """The buffers a child wrote to ``shared`` (``_offsets``), as views of one private
    (copy-on-write) mapping of it: no copy, and writable as the pipe's were. The mapping lives
    until the last of its views goes: the join (events.concat_stores) drops a child's columns
    one by one, but its pages all go back only after the last column (1 GB, 8 workers, 16 cores:
    this code's peak PSS 802-821 MB against 4a157c7's 823-865 MB through the pipe, interleaved;
    the peak is later in the load)."""
    offsets = _offsets(sizes)
    total = max((at + n for at, n in zip(offsets, sizes) if n), default=0)  # the last byte written
    if not total:
        return [bytearray(0) for _ in sizes]
    # not MAP_POPULATE: the join reads the pages in its threads (157 MB from 7 children, 2-core
    # VM: populated 0.075 s to map + 0.03 s to join, against 0.02 + 0.03; the pipe 0.18-0.20 + 0.05)
    m = memoryview(mmap.mmap(shared, total, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE))
    return [m[at:at + n] for at, n in zip(offsets, sizes)]


def _fill(r: int, view: memoryview, deadline: float) -> bool:
    """Read exactly ``len(view)`` bytes from the pipe ``r`` into ``view``; False on end of file
    or past the deadline."""
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            return False
        n = os.readv(r, [view[:1 << 24]])
        if not n:
            return False
        view = view[n:]
    return True


def receive(r: int, pid: int, timeout: float, shared: int | None = None):
    """The value the child ``pid`` writes (``write_value``) to the pipe ``r`` (its buffers
    perhaps to ``shared``), or None when it fails, ends early or takes longer than ``timeout``
    seconds (it is then killed)."""
    deadline = time.monotonic() + timeout
    try:
        head = bytearray(_HEAD.size)
        got = _fill(r, memoryview(head), deadline)
        if got:
            n_meta, n_bufs, in_file = _HEAD.unpack(head)
            sizes = bytearray(8 * n_bufs)
            got = _fill(r, memoryview(sizes), deadline) and (not in_file or shared is not None)
        if got:
            meta = bytearray(n_meta)
            lengths = [n for (n,) in struct.iter_unpack("<Q", sizes)]
            got = _fill(r, memoryview(meta), deadline)
        if got and not in_file:
            bufs = [bytearray(n) for n in lengths]
            got = all(_fill(r, memoryview(b), deadline) for b in bufs)
    except (OSError, MemoryError, OverflowError, ValueError):
        got = False
    if not got:
        reap(pid, r, kill=True)
        return None
    if not reap(pid, r, kill=False):
        return None
    try:
        if in_file:  # the child has exited cleanly: every byte is there
            bufs = _mapped(shared, lengths)
        return pickle.loads(meta, buffers=bufs)
    except Exception:  # noqa: BLE001
        return None


def reap(pid: int, r: int, kill: bool) -> bool:
    """Close the pipe and wait for the child; True when it exited cleanly."""
    try:
        os.close(r)
    except OSError:
        pass
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    finally:
        _LIVE.discard(pid)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
