"""The chunked decode (read/split.py: N processes, each a part of traceEvents) builds exactly the
store the one-process decode builds, event for event, on every bundled trace and every peer trace,
with 1, 2 and 5 workers (issue 39.1)."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read import split
from tracetui.read.events import build_store
from tracetui.read.load import LoadReport, decode, read_bytes

from tests.conftest import PEER, TRACES

ARRAYS = ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "seq", "fwd_tid", "file_index")
FIELDS = ("names", "track_keys", "thread_names", "process_names", "flows", "skipped", "unreadable",
          "missing_fields", "wrong_types", "times_out_of_range", "negative_durations")

BUNDLED = sorted(TRACES.glob("*.json.gz"))
PEERS = sorted(PEER.glob("*.json*")) + sorted((PEER.parent / "tracelens").glob("*.json*"))


def _serial(path):
    report = LoadReport()
    data = read_bytes(path, report)
    doc, data = decode(path, data, report)
    return data, build_store(doc.traceEvents, source=data)


def _same(a, b):
    for f in ARRAYS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for f in FIELDS:
        assert getattr(a, f) == getattr(b, f), f
    assert np.array_equal(a.memory.file_index, b.memory.file_index) and a.memory.keys == b.memory.keys


def _mapped(path, tmp_path):
    """The trace as a plain file read through ``read_bytes``'s read-only map (its size limit
    lowered so that a small file is mapped too)."""
    plain = tmp_path / "plain.json"
    raw = path.read_bytes()
    plain.write_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return plain, plain.read_bytes()


@pytest.mark.parametrize("path", BUNDLED + PEERS, ids=lambda p: p.name)
def test_chunked_decode_equals_one_process(path, tmp_path, monkeypatch):
    """Every column, flow, count, memory instant and the lazy args, for 1, 2 and 5 workers, from a
    read-only map of the file (1 and 5) and a bytearray (2: pieces closed in place), in small
    pieces so that even a small trace is decoded as several."""
    import mmap
    from tracetui.read import source
    data, want = _serial(path)
    plain, before = _mapped(path, tmp_path)
    monkeypatch.setattr(source, "MMAP_MIN_BYTES", 1)
    mapped = read_bytes(plain, LoadReport())
    assert isinstance(mapped, mmap.mmap)
    monkeypatch.setattr(split, "PIECE_BYTES", max(4096, len(data) // 12))
    last = len(want) - 1
    for workers, buf in ((1, mapped), (2, bytearray(data)), (5, mapped)):
        got = split.decode_index(buf, min_bytes=0, workers=workers)
        assert got is not None and split.TIMES["processes"] == workers  # every file here splits N ways
        assert buf[:] == before  # the brackets swapped in for each piece are the file's bytes again
        doc, store, _ = got
        _same(want, store)
        assert len(store) == len(want.kind)
        if len(want) > 200:  # ~12 pieces: each process its own first ones, the rest claimed as they run
            assert split.TIMES["pieces"] > workers and split.TIMES["parent pieces"] >= 1
            assert split.TIMES["parent pieces"] + split.TIMES.get("child pieces", 0) == split.TIMES["pieces"]
        assert store.source is buf and [store.args(i) for i in (0, last // 2, last)] == \
            [want.args(i) for i in (0, last // 2, last)]  # the lazy pass reads the same bytes again
    assert plain.read_bytes() == before


@pytest.mark.parametrize("name", ["transformer_eager.json.gz", "transformer_compile.json.gz"])
def test_five_workers_are_five_processes_and_load_the_same_trace(name, tmp_path):
    p = tmp_path / name.replace(".gz", "")
    p.write_bytes(gzip.decompress((TRACES / name).read_bytes()))
    one = load_trace(p, workers=1)
    split_min = split.MIN_BYTES
    split.MIN_BYTES = 0
    try:
        five = load_trace(p, workers=5)
    finally:
        split.MIN_BYTES = split_min
    assert split.TIMES["processes"] == 5 and "decode+index (5 processes)" in five.timings
    assert "index" in one.timings
    _same(one.store, five.store)
    for f in ("kind", "parent", "start", "dur"):
        assert np.array_equal(getattr(one.tree, f), getattr(five.tree, f)), f
    assert np.array_equal(one.roll.device, five.roll.device) and np.array_equal(one.roll.cpu_self, five.roll.cpu_self)


def test_default_workers_follow_affinity_and_env(monkeypatch):
    import os
    monkeypatch.delenv(split.WORKERS_ENV, raising=False)
    assert split.default_workers() == max(1, min(len(os.sched_getaffinity(0)), split.MAX_DEFAULT_WORKERS))
    monkeypatch.setenv(split.WORKERS_ENV, "3")
    assert split.default_workers() == 3
    monkeypatch.setenv(split.WORKERS_ENV, "zero")
    assert split.default_workers() == max(1, min(len(os.sched_getaffinity(0)), split.MAX_DEFAULT_WORKERS))
