"""The reopen cache (issue 39.2): a second ``tracetui summary`` against the first, and the cache's
format, numpy layout against Arrow IPC and Parquet (pyarrow), in the same run.

    python benchmarks/bench_reopen.py --input TRACE [--repeat 3] [--formats]
    python benchmarks/bench_reopen.py --events 270000      # generates a replica of mlp_eager

Summary: ``python -m tracetui summary TRACE`` in fresh processes with a cache folder of this run's
own: the first run (empty cache: decode, build, write both entries), then ``--repeat`` reopens.
CPU is user + sys of the child (``os.wait4``); wall is mostly other sessions' work on a shared
machine, so the ratio to compare is CPU's. Each round empties the cache and runs first, then the
reopens, so the first and second runs of a round share the machine's state.

Formats (``--formats``): the arrays of one trace's two entries (store and model), written and
read back by each format; read = open and view every array as numpy, and touch = also read one
byte per 4 KiB page (what a reopen that uses every column pays). Writes start after ``os.sync()``
and end when the bytes are in the page cache (no fsync: the cache does not fsync either). The numpy layout is
read/cache.py's own ``_write`` and ``_read`` (a copy-on-write mapping). Arrow: one IPC file per
group of arrays of equal length (a table's columns share a length), uncompressed, memory-mapped
with ``pyarrow.memory_map``; Parquet: the same groups, ``pyarrow.parquet`` with its default
(snappy) compression. pyarrow is the ``dist`` extra; without it the formats part says so.
"""
from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def summary_run(trace: Path, xdg: Path) -> tuple[float, float]:
    """(CPU s, wall s) of one ``tracetui summary TRACE`` in a fresh process."""
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    env.pop("TRACETUI_NO_CACHE", None)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "tracetui", "summary", str(trace)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"summary failed ({p.returncode}): {p.stderr.read().decode()[-500:]}")
    return ru.ru_utime + ru.ru_stime, wall


def bench_summary(trace: Path, repeat: int, rounds: int) -> None:
    firsts, seconds = [], []
    for r in range(rounds):
        xdg = Path(tempfile.mkdtemp(prefix="bench_reopen_"))
        try:
            first = summary_run(trace, xdg)
            again = [summary_run(trace, xdg) for _ in range(repeat)]
            entries = sorted((xdg / "tracetui").glob("*"))
            sizes = ", ".join(f"{e.suffix[1:]} {e.stat().st_size / 1e6:.1f} MB" for e in entries)
        finally:
            shutil.rmtree(xdg, ignore_errors=True)
        firsts.append(first)
        seconds += again
        print(f"round {r + 1}: first {first[0]:.2f} s CPU ({first[1]:.2f} s wall); reopens "
              + ", ".join(f"{c:.2f} s CPU ({w:.2f} s wall)" for c, w in again)
              + f"; ratio CPU {statistics.median(c for c, _ in again) / first[0]:.3f}; entries: {sizes}")
    f_cpu = statistics.median(c for c, _ in firsts)
    s_cpu = statistics.median(c for c, _ in seconds)
    f_wall = statistics.median(w for _, w in firsts)
    s_wall = statistics.median(w for _, w in seconds)
    print(f"summary, medians: first {f_cpu:.2f} s CPU / {f_wall:.2f} s wall; reopen {s_cpu:.2f} s CPU / "
          f"{s_wall:.2f} s wall; reopen/first {s_cpu / f_cpu:.3f} CPU, {s_wall / f_wall:.3f} wall")


def entry_arrays(trace: Path) -> tuple[dict, list]:
    """(header, [(name, array)]) of both entries of ``trace``, as the cache writes them."""
    from tracetui.model import load_trace
    from tracetui.model import reopen
    from tracetui.read import cache
    xdg = Path(tempfile.mkdtemp(prefix="bench_reopen_"))
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(xdg)
    try:
        load_trace(trace, cache=True)  # writes both entries
        ident = cache.identity(trace)
        header, arrays = {}, []
        for kind in (cache.STORE, cache.MODEL):
            h, buf, base = cache._read(cache.entry_path(trace, kind), ident, kind)
            arrays += [(f"{kind}.{k}", np.array(v)) for k, v in cache._arrays(h, buf, base).items()]
            header[kind] = {k: v for k, v in h.items() if k != "arrays"}
        assert reopen.TREE_ARRAYS[0] in {n.split(".", 1)[1] for n, _ in arrays}
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
        shutil.rmtree(xdg, ignore_errors=True)
    return header, arrays


def _touch(arrays) -> int:
    """Read one byte in every 4 KiB page of every array (what using each column costs)."""
    total = 0
    for a in arrays:
        total += int(a.reshape(-1).view(np.uint8)[::4096].sum())
    return total


def fmt_numpy(folder: Path, header: dict, arrays: list) -> tuple[float, float, float, int]:
    from tracetui.read import cache
    path = folder / "entry.store"
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        cache._write(f, {**header, "format": cache.FORMAT}, arrays)
    write = time.perf_counter() - t0
    t0 = time.perf_counter()  # read from the page cache, as a reopen right after a first open is
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    h, base = cache._header(buf)
    got = cache._arrays(h, buf, base)
    read = time.perf_counter() - t0
    _touch(got.values())
    touch = time.perf_counter() - t0
    assert all(np.array_equal(got[n], a) for n, a in arrays)
    return write, read, touch, path.stat().st_size


def _groups(arrays: list) -> dict:
    by_len: dict = {}
    for name, a in arrays:
        by_len.setdefault(a.reshape(-1).size, []).append((name, a.reshape(-1)))
    return by_len


def fmt_arrow(folder: Path, header: dict, arrays: list, parquet: bool) -> tuple[float, float, float, int]:
    import msgspec
    import pyarrow as pa
    import pyarrow.parquet as pq
    t0 = time.perf_counter()
    (folder / "header.msgpack").write_bytes(msgspec.msgpack.encode(header))
    for k, group in enumerate(_groups(arrays).values()):
        table = pa.table({n: pa.array(a) for n, a in group})
        if parquet:
            pq.write_table(table, folder / f"g{k}.parquet")
        else:
            with pa.OSFile(str(folder / f"g{k}.arrow"), "wb") as sink:
                with pa.ipc.new_file(sink, table.schema) as w:
                    w.write_table(table)
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    msgspec.msgpack.decode((folder / "header.msgpack").read_bytes())
    got = {}
    for f in sorted(folder.glob("g*")):
        if parquet:
            table = pq.read_table(f)
        else:
            table = pa.ipc.open_file(pa.memory_map(str(f), "r")).read_all()
        for n in table.column_names:
            got[n] = table.column(n).to_numpy()
    read = time.perf_counter() - t0
    _touch(got.values())
    touch = time.perf_counter() - t0
    assert all(np.array_equal(got[n], a.reshape(-1)) for n, a in arrays)
    size = sum(f.stat().st_size for f in folder.iterdir())
    return write, read, touch, size


def bench_formats(trace: Path, repeat: int) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("formats: pyarrow is not installed (pip install 'tracetui[dist]'): numpy layout only")
        return
    imports = {}
    for mod in ("numpy", "pyarrow, pyarrow.parquet"):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {mod}"], check=True)
        imports[mod] = time.perf_counter() - t0
    print("importing in a fresh Python (wall): " + "; ".join(f"{m} {s:.2f} s" for m, s in imports.items()))
    header, arrays = entry_arrays(trace)
    total = sum(a.nbytes for _, a in arrays)
    print(f"formats: {len(arrays)} arrays, {total / 1e6:.1f} MB of array bytes")
    results: dict = {"numpy layout (read/cache.py)": [], "Arrow IPC (uncompressed, mmap)": [],
                     "Parquet (pyarrow default: snappy)": []}
    names = list(results)
    for r in range(repeat):  # interleaved: each round runs every format once, each first in turn
        for name in names[r % len(names):] + names[:r % len(names)]:
            folder = Path(tempfile.mkdtemp(prefix="bench_reopen_fmt_"))
            os.sync()  # each write starts with no dirty pages: else whoever crosses the kernel's
            # dirty limit waits for the others' writeback (one 768 MB write: 0.55 s or 4.6 s)
            try:
                if name.startswith("numpy"):
                    r = fmt_numpy(folder, header, arrays)
                else:
                    r = fmt_arrow(folder, header, arrays, parquet=name.startswith("Parquet"))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            results[name].append(r)
    print("| format | write (median) | read to numpy | read + touch every page | size |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        med = lambda i: statistics.median(r[i] for r in rs)  # noqa: E731
        print(f"| {name} | {med(0):.3f} s | {med(1):.3f} s | {med(2):.3f} s | {rs[0][3] / 1e6:.1f} MB |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, help="the trace (default: a generated mlp_eager replica)")
    ap.add_argument("--events", type=int, default=270_000, help="events of the generated replica")
    ap.add_argument("--repeat", type=int, default=3, help="reopens per round, format rounds")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of first + reopens")
    ap.add_argument("--formats", action="store_true", help="also measure numpy against Arrow/Parquet")
    ap.add_argument("--no-summary", action="store_true")
    a = ap.parse_args()
    tmp = None
    trace = a.input
    if trace is None:
        tmp = Path(tempfile.mkdtemp(prefix="bench_reopen_in_"))
        trace = tmp / "replica.json"
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"),
                        str(ROOT / "traces" / "mlp_eager.json.gz"), str(trace), "--events", str(a.events)],
                       check=True, stdout=subprocess.DEVNULL)
    try:
        print(f"input: {trace} ({trace.stat().st_size / 1e6:.1f} MB); load average "
              + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        if not a.no_summary:
            bench_summary(trace, a.repeat, a.rounds)
        if a.formats:
            bench_formats(trace, a.repeat)
        print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
