"""Where the per-rank work runs: in this process, or on local processes (the default).

Each rank is loaded and turned into tables in a worker; only the tables come back. Workers never
fork again (``TRACETUI_PARALLEL=0``): the pool already keeps the cores busy.

Where this process can fork, the workers are forked children that take the next task index from
a shared counter and send each result down their own pipe: no task is pickled, and the driver
runs no queue or manager threads, which on a 2-core machine took the cores from the workers
(32 ranks: ``ProcessPoolExecutor`` 1.76x with 2 workers, this 1.82x, in one run alternating
them; docs/perf.md).
Elsewhere, or when a start method is named, a ``ProcessPoolExecutor`` does the same map.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import select
import signal
import struct
import threading
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
import multiprocessing as mp


def default_workers(n_tasks: int) -> int:
    """One worker per core, never more than there are ranks."""
    return max(1, min(os.cpu_count() or 1, n_tasks))


def _init_worker() -> None:
    os.environ["TRACETUI_PARALLEL"] = "0"


def _context(start_method: str | None = None):
    """fork where there is one (no re-import per worker), else the platform's default."""
    if start_method is None:
        start_method = "fork" if "fork" in mp.get_all_start_methods() else None
    return mp.get_context(start_method)


class Stopped(Exception):
    """``should_stop`` said so: the pool's processes were ended and the map returns nothing."""


STOP_POLL_S = 0.1
"""How often a running map asks ``should_stop`` (the app quitting mid-load must not wait for a
rank that takes minutes)."""


def workers_for(n_tasks: int, workers: int | None) -> int:
    """How many processes a map of ``n_tasks`` uses (``None``: one per core; never more than
    there are tasks: `--workers 64` on 2 ranks forked 64 copies of the driver)."""
    return default_workers(n_tasks) if workers is None else max(1, min(workers, n_tasks))


def as_done(fn, tasks: list, workers: int | None = None, start_method: str | None = None, should_stop=None):
    """Yield ``(i, fn(*tasks[i]))`` as each task finishes, on ``workers`` local processes (1: in
    this process, in order). A task's error, or ``should_stop()`` (polled: it raises
    ``Stopped``), ends the pool's processes at once instead of running the rest.

    ``start_method`` None: forked children where this process can fork (``_forked``), else the
    platform's ``ProcessPoolExecutor``; a named one: a ``ProcessPoolExecutor`` started that way."""
    from tracetui.read import forked
    n = workers_for(len(tasks), workers)
    if n == 1 or len(tasks) <= 1:
        with forked.serial() if workers == 1 else contextlib.nullcontext():  # one worker asked: one process
            for i, t in enumerate(tasks):
                if should_stop is not None and should_stop():
                    raise Stopped()
                yield i, fn(*t)
        return
    if start_method is None and hasattr(os, "fork") and "fork" in mp.get_all_start_methods():
        yield from _forked(fn, tasks, n, should_stop)
        return
    ex = ProcessPoolExecutor(max_workers=n, mp_context=_context(start_method), initializer=_init_worker)
    try:
        futs = {ex.submit(fn, *t): i for i, t in enumerate(tasks)}
        left = set(futs)
        while left:
            finished, left = wait(left, timeout=STOP_POLL_S, return_when=FIRST_COMPLETED)
            for f in finished:
                yield futs[f], f.result()
            if left and should_stop is not None and should_stop():
                raise Stopped()
    except BaseException:  # a task's error, Stopped, or the consumer gave up (GeneratorExit)
        _end(ex)
        raise
    ex.shutdown()


class WorkerLost(RuntimeError):
    """A worker process died without reporting its task (killed by a signal: out of memory?)."""


class RemoteTraceback(Exception):
    """A task's traceback in its worker, kept as the re-raised error's cause."""


_HEAD = struct.Struct("<Q")
"""A result message's length, before its pickle."""

_COUNTER = struct.Struct("<q")
"""The next task index, in a shared anonymous page."""


def _forked(fn, tasks: list, n: int, should_stop=None):
    """``as_done`` on ``n`` forked children. Each takes the next index from a shared counter
    (under a lock), runs it and writes ``(i, ok, value)`` to its own pipe, until the counter
    passes the end; then it exits without tearing down the interpreter. The driver polls every
    pipe without blocking (a worker stopped mid-message never holds it), so ``should_stop`` is
    asked every ``STOP_POLL_S``; an error, a stop or a consumer that gives up kills the children."""
    from tracetui.read import forked
    kids: dict[int, int] = {}  # read end -> pid
    bufs: dict[int, bytearray] = {}  # read end -> bytes not yet a whole message; only open pipes
    poller = select.poll()  # not select(): it refuses descriptors past 1023
    try:
        _fork_children(fn, tasks, n, kids, bufs)
        for r in bufs:
            poller.register(r, select.POLLIN)
        left = len(tasks)
        while left:
            for r, _ in poller.poll(STOP_POLL_S * 1000):
                chunk = os.read(r, 1 << 20)
                if not chunk:
                    poller.unregister(r)
                    _closed(r, kids, bufs)
                    continue
                buf = bufs[r]
                buf += chunk
                while len(buf) >= _HEAD.size and len(buf) >= _HEAD.size + _HEAD.unpack_from(buf)[0]:
                    size = _HEAD.unpack_from(buf)[0]
                    with memoryview(buf) as view:  # no copy of a large result; released before the del
                        i, ok, value = pickle.loads(view[_HEAD.size:_HEAD.size + size])
                    del buf[:_HEAD.size + size]
                    left -= 1
                    if not ok:
                        err, tb = value
                        raise err from RemoteTraceback(tb)
                    yield i, value
            if left and not bufs:
                raise WorkerLost(f"the worker processes ended with {left} of {len(tasks)} tasks not done")
            if left and should_stop is not None and should_stop():
                raise Stopped()
    except BaseException:  # an error, a stop, a consumer that gave up: no child outlives the map
        _close_all(bufs)
        _reap([pid for pid in kids.values() if pid in forked._LIVE], kill=True)
        raise
    _close_all(bufs)
    left_over = [pid for pid in kids.values() if pid in forked._LIVE]
    if left_over:  # every result is in and these are only exiting: reaped off the caller's path
        t = threading.Thread(target=_reap, args=(left_over, False), name="tracetui-reap", daemon=True)
        t.start()
        _REAPERS[:] = [x for x in _REAPERS if x.is_alive()] + [t]


_REAPERS: list[threading.Thread] = []
"""Threads reaping finished maps' children."""


def settle() -> None:
    """Wait until every finished map's children are reaped (their CPU time then counts in
    ``RUSAGE_CHILDREN``: the benchmark reads it)."""
    while _REAPERS:
        _REAPERS.pop().join()


def _fork_children(fn, tasks: list, n: int, kids: dict, bufs: dict) -> None:
    """Fork ``n`` children running ``_child`` (``forked.fork_child``), each with its own result
    pipe (into ``kids`` and ``bufs`` as each starts). A fork that fails raises (the caller reaps
    the children already started)."""
    from tracetui.read import forked
    # the counter is a page of its own, shared with this map's children only: a block of
    # multiprocessing's shared heap (RawValue) is reused by the next map once freed, while a
    # finished map's children may still take one last look at it; one did, and took an index
    # of the next map (66 maps of 300 run back to back lost a task). The lock is the fork
    # context's: another start method's registers with a resource-tracker process, which
    # cannot start under Textual (its stderr has no descriptor)
    counter, lock = mmap.mmap(-1, _COUNTER.size), mp.get_context("fork").Lock()
    for _ in range(n):
        pid, r = forked.fork_child(lambda w: _child(fn, tasks, counter, lock, w), close=tuple(kids))
        kids[r], bufs[r] = pid, bytearray()


def _close_all(bufs: dict) -> None:
    for r in bufs:
        with contextlib.suppress(OSError):
            os.close(r)
    bufs.clear()


def _reap(pids: list, kill: bool) -> None:
    """Wait for ``pids`` (killed first with ``kill``); a finished map's last children end by
    themselves, and waiting for the kernel to free their memory took ~7 ms off its result."""
    from tracetui.read import forked
    for pid in pids:
        if kill:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        forked._LIVE.discard(pid)


def _closed(r: int, kids: dict, bufs: dict) -> None:
    """A child's pipe reached its end: reap it. A child killed by a signal or failing with a
    status may have lost the task it held, so the map ends; one that exits cleanly has sent every
    result it took (a task lost anyway shows as results missing once all pipes are closed)."""
    from tracetui.read import forked
    del bufs[r]
    os.close(r)
    pid = kids[r]
    _, status = os.waitpid(pid, 0)
    forked._LIVE.discard(pid)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        raise WorkerLost(f"a worker process was killed by {name}" + (" (out of memory?)" if sig == signal.SIGKILL else ""))
    if os.WEXITSTATUS(status) != 0:
        raise WorkerLost(f"a worker process exited with status {os.WEXITSTATUS(status)}")


def _child(fn, tasks: list, counter, lock, w: int) -> None:
    """A forked worker's loop: take an index, run it, send the result, until none is left.

    What it inherited is frozen out of its cyclic GC first (Python's advice for fork without
    exec): its collections then never scan, and so never copy, the pages it shares with the
    driver (31.5-32.3k page faults against 33.5-35.3k over 32 HTA ranks in one forked worker)."""
    import gc
    gc.freeze()
    _init_worker()
    while True:
        with lock:
            (i,) = _COUNTER.unpack_from(counter)
            if i >= len(tasks):
                return
            _COUNTER.pack_into(counter, 0, i + 1)
        try:
            msg = pickle.dumps((i, True, fn(*tasks[i])), protocol=5)
        except BaseException as e:  # noqa: BLE001 - the driver re-raises it
            msg = _error_message(i, e)
        _send(w, _HEAD.pack(len(msg)), msg)


def _send(w: int, *parts: bytes) -> None:
    """Write ``parts`` whole, without joining them (a result can be hundreds of MB)."""
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(w, view):]


def _error_message(i: int, e: BaseException) -> bytes:
    """``(i, False, (e, its traceback))`` pickled; an error that does not survive pickling
    becomes a RuntimeError with its text (its type's name where even that fails)."""
    try:
        tb = "".join(traceback.format_exception(e))
    except Exception:  # noqa: BLE001
        tb = f"{type(e).__name__} (its traceback could not be formatted)"
    try:
        msg = pickle.dumps((i, False, (e, tb)), protocol=5)
        pickle.loads(msg)
        return msg
    except Exception:  # noqa: BLE001
        try:
            text = f"{type(e).__name__}: {e}"
        except Exception:  # noqa: BLE001 - its __str__ fails too
            text = f"{type(e).__name__} (its message could not be read)"
        return pickle.dumps((i, False, (RuntimeError(text), tb)), protocol=5)


def run_map(fn, tasks: list, workers: int | None = None, progress=None, start_method: str | None = None,
            should_stop=None) -> list:
    """``[fn(*t) for t in tasks]`` on ``as_done``'s processes, in order. ``progress(done,
    total)`` is called after each task finishes."""
    out = [None] * len(tasks)
    for done, (i, r) in enumerate(as_done(fn, tasks, workers, start_method, should_stop), 1):
        out[i] = r
        if progress:
            progress(done, len(tasks))
    return out


def _end(ex: ProcessPoolExecutor) -> None:
    """Stop a pool now: queued tasks dropped, running ones' processes terminated.

    A worker killed while writing its result leaves half a message in the result pipe, and the
    executor's manager thread blocks reading the rest: the pipe never reaches end-of-file while
    this process holds its write end, and interpreter exit joins that thread (a hang in ~1 run
    in 4 of an error mid-map). So once the workers are gone, the write end is closed too: the
    read ends, the manager sees a broken pool and exits.
    """
    procs = list((getattr(ex, "_processes", None) or {}).values())
    manager = getattr(ex, "_executor_manager_thread", None)
    writer = getattr(getattr(ex, "_result_queue", None), "_writer", None)  # shutdown drops the queue
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=1)
        if p.is_alive():
            p.kill()
            p.join(timeout=1)
    if writer is not None and manager is not None and manager.is_alive():
        manager.join(timeout=0.2)  # a manager not stuck mid-message ends by itself
        if manager.is_alive():
            try:
                writer.close()
            except OSError:
                pass
            manager.join(timeout=2)
