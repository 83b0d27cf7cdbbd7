"""Where the per-rank work runs: in this process, or on a local process pool (the default).

Each rank is loaded and turned into tables in a worker; only the tables come back. Workers never
fork again (``TRACETUI_PARALLEL=0``): the pool already keeps the cores busy.
"""
from __future__ import annotations

import contextlib
import os
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
    """How many processes a map of ``n_tasks`` uses (``None``: one per core)."""
    return default_workers(n_tasks) if workers is None else max(1, workers)


def as_done(fn, tasks: list, workers: int | None = None, start_method: str | None = None, should_stop=None):
    """Yield ``(i, fn(*tasks[i]))`` as each task finishes, on ``workers`` local processes (1: in
    this process, in order). A task's error, or ``should_stop()`` (polled: it raises
    ``Stopped``), ends the pool's processes at once instead of running the rest."""
    from . import forked
    n = workers_for(len(tasks), workers)
    if n == 1 or len(tasks) <= 1:
        with forked.serial() if workers == 1 else contextlib.nullcontext():  # one worker asked: one process
            for i, t in enumerate(tasks):
                if should_stop is not None and should_stop():
                    raise Stopped()
                yield i, fn(*t)
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


def map_ranks(job, workers: int | None = None, load_opts: dict | None = None, progress=None) -> list[dict]:
    """Every rank of ``job`` loaded into tables (``ranks.load_rank``), in rank order."""
    from .ranks import load_rank
    return run_map(load_rank, [(rf, job.world, load_opts) for rf in job.ranks], workers, progress)
