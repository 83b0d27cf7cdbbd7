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


def run_map(fn, tasks: list, workers: int | None = None, progress=None, start_method: str | None = None,
            should_stop=None) -> list:
    """``[fn(*t) for t in tasks]``, on ``workers`` local processes (1: in this process), in order.

    ``progress(done, total)`` is called after each task finishes; ``should_stop()``, polled,
    ends the pool's processes at once and raises ``Stopped``.
    """
    from . import forked
    asked = workers
    workers = default_workers(len(tasks)) if workers is None else max(1, workers)
    out = [None] * len(tasks)
    if workers == 1 or len(tasks) <= 1:
        with forked.serial() if asked == 1 else contextlib.nullcontext():  # one worker: one process
            for i, t in enumerate(tasks):
                if should_stop is not None and should_stop():
                    raise Stopped()
                out[i] = fn(*t)
                if progress:
                    progress(i + 1, len(tasks))
        return out
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=_context(start_method), initializer=_init_worker)
    try:
        futs = {ex.submit(fn, *t): i for i, t in enumerate(tasks)}
        left, done = set(futs), 0
        while left:
            finished, left = wait(left, timeout=STOP_POLL_S, return_when=FIRST_COMPLETED)
            for f in finished:
                out[futs[f]] = f.result()
                done += 1
                if progress:
                    progress(done, len(tasks))
            if left and should_stop is not None and should_stop():
                _end(ex)
                raise Stopped()
    except BaseException:
        _end(ex)
        raise
    ex.shutdown()
    return out


def _end(ex: ProcessPoolExecutor) -> None:
    """Stop a pool now: queued tasks dropped, running ones' processes terminated."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=1)


def map_ranks(job, workers: int | None = None, load_opts: dict | None = None, progress=None) -> list[dict]:
    """Every rank of ``job`` loaded into tables (``ranks.load_rank``), in rank order."""
    from .ranks import load_rank
    return run_map(load_rank, [(rf, job.world, load_opts) for rf in job.ranks], workers, progress)
