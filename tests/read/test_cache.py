"""The reopen cache (tracetui/read/cache.py): a reopened trace is the trace a fresh load gives,
a changed file is never served from it, a broken entry is replaced, concurrent opens are safe,
and ``--no-cache`` / TRACETUI_NO_CACHE write nothing."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import orjson
import pytest

from tracetui.model import load_trace
from tracetui.read import cache

from tests.conftest import PEER, ROOT, TRACES, loaded_three_ways

ARRAYS = ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "seq", "fwd_tid", "file_index")
FIELDS = ("names", "track_keys", "thread_names", "process_names", "flows", "skipped", "unreadable",
          "missing_fields", "wrong_types", "times_out_of_range", "negative_durations")


def _same_store(a, b):
    for f in ARRAYS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    for f in FIELDS:
        assert getattr(a, f) == getattr(b, f), f
    assert np.array_equal(a.memory.file_index, b.memory.file_index) and np.array_equal(a.memory.ts, b.memory.ts)
    assert a.memory.keys == b.memory.keys


def _raw_x_count(path) -> int:
    raw = path.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sum(1 for e in evs if e.get("ph") == "X")


INPUTS = [TRACES / "transformer_eager_memory.json.gz", TRACES / "mlp_compile.json.gz",
          PEER / "trace_filter_sampled_rank-0.json.gz", PEER / "call_stack_backward_thread.json",
          PEER / "triton_example_triton_example.json.gz"]


@pytest.mark.parametrize("src", INPUTS, ids=lambda p: p.name)
def test_reopen_equals_a_fresh_load(src, xdg, tmp_path):
    path, fresh, first, again = loaded_three_ways(src, tmp_path)
    assert "cache" not in first.timings and len(list(xdg.glob("*.store"))) == 1  # the first wrote the entry
    assert "cache" in again.timings  # served from the entry
    _same_store(fresh.store, again.store)
    assert len(again.store) <= _raw_x_count(path)
    assert again.meta == fresh.meta and again.report == fresh.report
    assert np.array_equal(again.roll.device, fresh.roll.device)
    # the args are read from the file again, lazily, and are the file's
    for i in np.flatnonzero(again.store.kind >= 0)[:: max(1, len(again.store) // 50)].tolist():
        assert again.store.args(i) == fresh.store.args(i)


def _trace(kernel: str, n: int = 3000) -> bytes:
    """A small trace whose kernels are all named ``kernel`` (several hundred KB: the change
    below lies outside the head and tail the identity hashes where ``middle`` is set)."""
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10 * n}]
    for i in range(n):
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
                    "args": {"External id": i + 1}})
        evs.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 10 * i + 2, "dur": 3,
                    "args": {"External id": i + 1, "correlation": i + 1, "stream": 7}})
    return json.dumps({"traceEvents": evs}).encode()


def _kernel_names(t) -> set:
    return {t.store.names[j] for j in np.unique(t.store.name_id[t.store.kind == 8]).tolist()}


def test_same_size_rewrite_is_reloaded(xdg, tmp_path):
    """Rewritten in place with other content of the same size, and the mtime set back: the head
    and tail hash tells the files apart, so the new content is read, not the entry."""
    path = tmp_path / "t.json"
    a, b = _trace("kernel_aaaa"), _trace("kernel_bbbb")
    assert len(a) == len(b)
    path.write_bytes(a)
    st = os.stat(path)
    assert _kernel_names(load_trace(path, cache=True)) == {"kernel_aaaa"}
    assert _kernel_names(load_trace(path, cache=True)) == {"kernel_aaaa"}
    with open(path, "r+b") as f:  # same inode, same size
        f.write(b)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_ino == st.st_ino and os.stat(path).st_mtime_ns == st.st_mtime_ns
    t = load_trace(path, cache=True)
    assert "cache" not in t.timings and _kernel_names(t) == {"kernel_bbbb"}
    assert _kernel_names(load_trace(path, cache=True)) == {"kernel_bbbb"}  # and the entry now says so


def test_a_rewrite_that_changes_the_mtime_is_reloaded(xdg, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 50))
    load_trace(path, cache=True)
    path.write_bytes(_trace("kernel_cccc", 50))
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 1_000_000))
    assert _kernel_names(load_trace(path, cache=True)) == {"kernel_cccc"}


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip header"])
def test_a_broken_entry_is_ignored_and_replaced(damage, xdg, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 200))
    fresh = load_trace(path)
    load_trace(path, cache=True)
    (entry,) = xdg.glob("*.store")
    whole = entry.read_bytes()
    bad = {"truncate": whole[: len(whole) // 2], "garbage": os.urandom(len(whole)), "empty": b"",
           "flip header": whole[:20] + bytes([whole[20] ^ 0xFF]) + whole[21:]}[damage]
    entry.write_bytes(bad)
    assert cache.load(path) is None
    t = load_trace(path, cache=True)
    assert "cache" not in t.timings  # decoded again
    _same_store(fresh.store, t.store)
    assert entry.read_bytes() == whole  # and the entry written whole again
    _same_store(fresh.store, load_trace(path, cache=True).store)


def _cli(*args, env=None, **kw):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "tracetui", *args], cwd=ROOT, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_two_processes_open_the_same_trace_at_once(xdg, tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(_trace("kernel_aaaa", 20000))  # large enough that both decode at the same time
    want = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(path), "--json", "--no-cache"],
                          cwd=ROOT, capture_output=True, check=True).stdout
    for _ in range(3):
        for e in xdg.glob("*"):
            e.unlink()
        procs = [_cli("summary", str(path), "--json") for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-300:] for o in outs]
        assert all(o[0] == want for o in outs)
        assert len(list(xdg.glob("*.store"))) == 1 and not list(xdg.glob(".tmp-*"))
        assert cache.load(path) is not None
    again = _cli("summary", str(path), "--json").communicate(timeout=120)[0]
    assert again == want


@pytest.mark.parametrize("how", ["--no-cache", "env"])
def test_no_cache_writes_nothing(how, tmp_path):
    xdg = tmp_path / "xdg"
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 50))
    args = ["summary", str(path)] + (["--no-cache"] if how == "--no-cache" else [])
    env = {"XDG_CACHE_HOME": str(xdg), **({cache.OFF_ENV: "1"} if how == "env" else {})}
    for _ in range(2):
        p = _cli(*args, env=env)
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert not xdg.exists()
    p = _cli("summary", str(path), env={"XDG_CACHE_HOME": str(xdg)})  # the default writes one entry
    p.communicate(timeout=60)
    assert len(list((xdg / "tracetui").glob("*.store"))) == 1


def test_least_recently_used_entries_are_evicted(xdg, tmp_path, monkeypatch):
    paths = []
    for k in range(3):
        p = tmp_path / f"t{k}.json"
        p.write_bytes(_trace(f"kernel_{k}", 300))
        paths.append(p)
    load_trace(paths[0], cache=True)
    size = sum(e.stat().st_size for e in xdg.glob("*"))  # one trace's entries: its store's and its model's
    monkeypatch.setenv(cache.MAX_ENV, str(int(size * 2.5)))  # room for two traces' entries
    load_trace(paths[1], cache=True)
    for e, when in zip(sorted(xdg.glob("*.store"), key=lambda e: e.stat().st_mtime), (1, 2)):
        os.utime(e, (when, when))  # p0 used first, p1 after it
    assert "cache" in load_trace(paths[0], cache=True).timings  # p0 used again: p1 is now the oldest
    load_trace(paths[2], cache=True)
    assert len(list(xdg.glob("*.store"))) == 2 and len(list(xdg.glob("*.model"))) == 2
    assert cache.fresh(paths[0]) and cache.fresh(paths[2]) and not cache.fresh(paths[1])
    assert not cache.entry_path(paths[1], cache.MODEL).exists()  # a trace's entries go together


def test_a_file_changed_after_a_cached_open_gives_no_args_from_the_new_file(xdg, tmp_path):
    """The args are read from the file lazily: if it changed since the entry was checked, the
    args are not read at all rather than read from another file."""
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 50))
    load_trace(path, cache=True)
    t = load_trace(path, cache=True)
    assert "cache" in t.timings
    path.write_bytes(_trace("kernel_bbbb", 50))
    i = int(np.flatnonzero(t.store.kind == 8)[0])
    assert t.store.args(i) == {}


def test_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "tracetui"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid per the spec: the default
    assert cache.cache_dir() == cache.Path.home() / ".cache" / "tracetui"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == cache.Path.home() / ".cache" / "tracetui"
