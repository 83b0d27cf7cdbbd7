"""The two-process decode+index builds exactly the store the one-process path builds, or steps aside."""
from __future__ import annotations

import gzip
import json
import os
import time

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read import split
from tracetui.read import early as trace_mod  # start_load and its gzip thread live in read/early.py
from tracetui.read.errors import TraceError
from tracetui.model.trace import start_load
from tracetui.read.events import build_store
from tracetui.read.load import LoadReport, decode, read_bytes

from tests.conftest import DATA, PEER, TRACES, reaped

ARRAYS = ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "seq", "fwd_tid", "file_index")
FIELDS = ("names", "track_keys", "thread_names", "process_names", "flows", "skipped", "missing_fields",
          "wrong_types")


def _serial(path):
    report = LoadReport()
    doc, data = decode(path, read_bytes(path, report), report)
    return doc, build_store(doc.traceEvents, source=data)


def _assert_same(a, b):
    for f in ARRAYS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for f in FIELDS:
        assert getattr(a, f) == getattr(b, f), f


def _inputs():
    paths = sorted(TRACES.glob("*.json.gz")) + sorted(DATA.glob("*.json.gz"))
    if PEER.is_dir():
        paths += sorted(p for p in PEER.rglob("*.json*") if p.is_file())
    return paths


@pytest.mark.parametrize("pieces", [False, True], ids=["whole-parts", "pieces"])
@pytest.mark.parametrize("in_place", [False, True], ids=["copied", "in-place"])
@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_split_store_equals_serial(path, in_place, pieces, monkeypatch):
    data = read_bytes(path, LoadReport())
    if pieces:  # ~12 pieces per part, each decoded and indexed on its own
        monkeypatch.setattr(split, "PIECE_BYTES", max(1024, len(data) // 24))
    data = bytearray(data) if in_place else bytes(data)  # a bytearray lets each half close in place
    before = bytes(data)
    got = split.decode_index(data, min_bytes=0)
    assert data == before  # every bracket swapped in for a piece is the file's byte again
    doc, want = _serial(path)
    if got is None:  # only files the one-process path has to repair may step aside
        report = LoadReport()
        decode(path, read_bytes(path, report), report)
        assert report.repairs, f"{path.name}: valid file but the split path stepped aside"
        return
    doc2, store, lenient = got
    _assert_same(want, store)
    if pieces and len(want) > 200:
        assert split.TIMES["parent pieces"] > 1 and split.TIMES["child pieces"] > 1
    assert doc2.deviceProperties == doc.deviceProperties and doc2.tracetui == doc.tracetui
    assert store.args(len(store) - 1) == want.args(len(want) - 1)  # lazy args still find their event


def _trace(events):
    return {"schemaVersion": 1, "deviceProperties": [{"name": "GPU X"}], "traceEvents": events, "traceName": "t"}


def _ops(n, name="aten::mm", corr=lambda i: i):
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
             "args": {"External id": i, "correlation": corr(i)}} for i in range(n)]


def test_lenient_second_half_is_reported(tmp_path):
    evs = _ops(200) + _ops(200, corr=lambda i: str(i))  # string correlation ids, late in the file
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_trace(evs)))
    doc2, store, lenient = split.decode_index(p.read_bytes(), min_bytes=0)
    assert lenient
    _assert_same(_serial(p)[1], store)
    assert store.wrong_types == 200


def test_split_inside_a_string_steps_aside(tmp_path):
    evs = _ops(50) + _ops(1, name="x" + "}, " * 20000) + _ops(50)  # the middle of the file is this name
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_trace(evs)))
    assert split.decode_index(p.read_bytes(), min_bytes=0) is None


def test_invalid_json_and_bare_arrays_step_aside(tmp_path):
    good = json.dumps(_trace(_ops(100))).encode()
    assert split.decode_index(good[:-40], min_bytes=0) is None
    assert split.decode_index(json.dumps(_ops(100)).encode(), min_bytes=0) is None
    assert split.decode_index(good, min_bytes=len(good) + 1) is None  # small files: one process


def test_failing_child_steps_aside(tmp_path, monkeypatch):
    parent = os.getpid()
    real = split.build_store

    def fails_in_child(*a, **k):
        if os.getpid() != parent:
            raise MemoryError("child ran out")
        return real(*a, **k)

    monkeypatch.setattr(split, "build_store", fails_in_child)
    assert split.decode_index(json.dumps(_trace(_ops(100))).encode(), min_bytes=0) is None


def test_a_slow_helper_leaves_its_pieces_to_this_process(tmp_path, monkeypatch):
    """Past each process's own first pieces, the rest are claimed as the processes run: with the
    helper slowed down this process decodes most of them, and the store, joined from pieces
    decoded out of file order, is still the one-process one."""
    p = _plain_copy(tmp_path)
    data = p.read_bytes()
    monkeypatch.setattr(split, "PIECE_BYTES", max(1024, len(data) // 24))
    parent, real = os.getpid(), split.build_store

    def slow_in_child(*a, **k):
        if os.getpid() != parent:
            time.sleep(0.2)
        return real(*a, **k)

    monkeypatch.setattr(split, "build_store", slow_in_child)
    doc, store, _ = split.decode_index(data, min_bytes=0, workers=2)
    _assert_same(_serial(p)[1], store)
    t = split.TIMES
    assert t["pieces"] >= 12 and t["parent pieces"] + t["child pieces"] == t["pieces"]
    assert 1 <= t["child pieces"] < t["parent pieces"]


def test_a_writer_another_fork_left_behind_does_not_stall_the_claims(tmp_path, monkeypatch):
    """Another thread's fork between the pipe's creation and the close of its write end leaves a
    writer behind (review): a blocking read would then wait for an end of file that never comes.
    Every piece number is in before the fork, so an empty pipe means every piece is taken."""
    import threading
    p = _plain_copy(tmp_path)
    data = p.read_bytes()
    monkeypatch.setattr(split, "PIECE_BYTES", max(1024, len(data) // 24))
    held = []

    class Held(split._Claims):
        def __init__(self, n, processes):
            real = os.pipe

            def pipe():
                r, w = real()
                held.append(os.dup(w))  # as a child forked meanwhile would hold it
                return r, w
            os.pipe = pipe
            try:
                super().__init__(n, processes)
            finally:
                os.pipe = real

    monkeypatch.setattr(split, "_Claims", Held)
    got = []
    t = threading.Thread(target=lambda: got.append(split.decode_index(data, min_bytes=0, workers=2)), daemon=True)
    t.start()
    t.join(60)
    try:
        assert not t.is_alive() and held, "the claims waited for the left-behind writer"
        _assert_same(_serial(p)[1], got[0][1])
    finally:
        for fd in held:
            os.close(fd)


def test_no_array_of_the_joined_store_views_a_helpers_result(tmp_path, monkeypatch):
    """A helper's columns arrive as views of one mapping of its result (forked.py); the join
    copies them, but a flow category found in one piece only was kept as is (review), holding
    that helper's whole result for the life of the trace."""
    import mmap
    from tests.read.test_forked import _owner as owner
    doc = _trace(_ops(400))
    # in the second of 6 pieces: the helper's own first piece (split._Claims), so the helper decodes it
    doc["traceEvents"].insert(100, {"ph": "s", "cat": "xflow", "name": "x", "id": 7, "pid": 1, "tid": 1, "ts": 3000})
    doc["traceEvents"].insert(102, {"ph": "f", "cat": "xflow", "name": "x", "id": 7, "pid": 1, "tid": 1, "ts": 3010,
                                    "bp": "e"})
    data = json.dumps(doc).encode()
    monkeypatch.setattr(split, "PIECE_BYTES", max(1024, len(data) // 6))
    monkeypatch.setattr(split.forked, "SHARED_MIN_BYTES", 0)  # every helper's result through its file
    split.TIMES.clear()
    _, store, _ = split.decode_index(data, min_bytes=0, workers=2)
    assert split.TIMES["child pieces"] >= 1 and "xflow" in store.flows.starts
    arrays = [getattr(store, f) for f in ARRAYS]
    arrays += [a for side in (store.flows.starts, store.flows.ends) for a in side.values()]
    arrays += [store.memory.file_index, store.memory.ts]
    assert not [a for a in arrays if isinstance(owner(a), mmap.mmap)]


def _same_trace(a, b):
    for f in ("kind", "parent", "cparent", "start", "dur", "child_idx"):
        assert np.array_equal(getattr(a.tree, f), getattr(b.tree, f)), f
    for f in ("cpu_total", "cpu_self", "device", "kernels"):
        assert np.array_equal(getattr(a.roll, f), getattr(b.roll, f)), f
    assert a.tree.diagnostics == b.tree.diagnostics
    assert a.device_name == b.device_name


def _plain_copy(tmp_path, name="t.json"):
    p = tmp_path / name
    p.write_bytes(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))
    return p


def test_load_trace_is_the_same_either_way(tmp_path, monkeypatch):
    p = _plain_copy(tmp_path)
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    serial = load_trace(p)
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    both = load_trace(p)
    assert "decode+index (2 processes)" in both.timings and "index" in serial.timings
    _same_trace(serial, both)


@pytest.mark.parametrize("tail", [
    {"logs": ["Profiler.cpp:1232] Traces Recorded:", "x]"]},   # brackets in strings after the events
    {"extra": [{"a": 1}, {"b": [2]}]},                          # a list of objects after the events
    {"traceEvents_like": "\"traceEvents\": ["},
])
def test_keys_after_the_events_do_not_change_the_store(tail):
    doc = {"schemaVersion": 1, "traceEvents": _ops(300), **tail, "traceName": "t"}
    data = json.dumps(doc).encode()
    got = split.decode_index(data, min_bytes=0)
    assert got is not None
    report = LoadReport()
    want = build_store(decode(None, data, report)[0].traceEvents)
    _assert_same(want, got[1])
    assert len(got[1]) == 300


def test_early_start_loads_the_same_trace(tmp_path, monkeypatch):
    p = _plain_copy(tmp_path)
    on_disk = p.read_bytes()
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    serial = load_trace(p)
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    early = start_load(p)
    assert early is not None and 0.5 < early.share <= 0.8  # the child takes the larger part
    got = load_trace(p, early=early)
    assert split.TIMES["child share"] == early.share
    _same_trace(serial, got)
    assert got.tree.store.args(len(got.tree.store) - 1) == serial.tree.store.args(len(serial.tree.store) - 1)
    assert reaped(early.pending.pid) and p.read_bytes() == on_disk


def test_early_start_for_another_file_is_discarded(tmp_path, monkeypatch):
    a, b = _plain_copy(tmp_path, "a.json"), _plain_copy(tmp_path, "b.json")
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    early = start_load(a)
    got = load_trace(b, early=early)
    assert got.path == b and reaped(early.pending.pid)
    _same_trace(load_trace(b), got)


def test_early_start_with_a_failing_child_loads_the_usual_way(tmp_path, monkeypatch):
    p = _plain_copy(tmp_path)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    want = load_trace(p)
    parent, real = os.getpid(), split.build_store

    def fails_in_child(*a, **k):
        if os.getpid() != parent:
            raise MemoryError("child ran out")
        return real(*a, **k)

    monkeypatch.setattr(split, "build_store", fails_in_child)
    split.TIMES.clear()
    early = start_load(p)
    got = load_trace(p, early=early)
    assert "child share" not in split.TIMES  # the early result was not used
    _same_trace(want, got)


def test_early_start_steps_aside(tmp_path, monkeypatch):
    p = _plain_copy(tmp_path)
    assert start_load(p) is None  # a few hundred KB: below MIN_BYTES, the fork would not pay
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    assert start_load(TRACES / "mlp_eager.json.gz") is None  # a small gzip: not worth a thread
    assert start_load(tmp_path / "missing.json") is None  # load_trace reports it, not this
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    assert start_load(p) is None


def test_a_gzipped_trace_is_gunzipped_ahead_and_loads_the_same(monkeypatch):
    monkeypatch.setattr(trace_mod, "EARLY_GZ_MIN_BYTES", 0)
    p = TRACES / "mlp_eager.json.gz"
    early = start_load(p)
    assert isinstance(early, trace_mod._Gunzipping)
    got = load_trace(p, early=early)
    _same_trace(load_trace(p), got)
    assert got.report.compressed and early._early is None  # too small to fork for


def test_a_gunzipped_trace_forks_its_child_as_soon_as_the_bytes_are_there(monkeypatch):
    from tracetui.read import forked

    if not forked.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(trace_mod, "EARLY_GZ_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    p = TRACES / "mlp_eager.json.gz"
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    serial = load_trace(p)
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    early = start_load(p)
    early.bytes()
    child = early._early
    assert child is not None and child.share > 0.5  # forked by the gunzip thread
    got = load_trace(p, early=early)
    assert split.TIMES["child share"] == child.share and got.report.compressed
    _same_trace(serial, got)
    assert reaped(child.pending.pid)

    early = start_load(p)  # dropped before the load: its child is killed and reaped
    early.bytes()
    pid = early._early.pending.pid
    early.cancel()
    assert reaped(pid) and not forked._LIVE


def test_a_gzip_error_met_ahead_is_the_same_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_mod, "EARLY_GZ_MIN_BYTES", 0)
    p = tmp_path / "broken.json.gz"
    p.write_bytes(b"\x1f\x8b" + b"not a gzip stream" * 10)
    with pytest.raises(TraceError) as plain:
        load_trace(p)
    with pytest.raises(TraceError) as ahead:
        load_trace(p, early=start_load(p))
    assert str(ahead.value) == str(plain.value) and "gzip" in str(plain.value)


def test_early_share_balances_the_head_start():
    for n in (20 << 20, 60 << 20, 1 << 30):
        f = split.early_share(n)
        child, parent = f * n, split.EARLY_HEAD_BYTES + (1 - f) * n  # bytes of work until each is done
        assert 0.5 < f <= 0.8 and (f == 0.8 or abs(child - parent) < 1)
    assert split.early_share(60 << 20) > split.early_share(1 << 30)


@pytest.mark.parametrize("odd", ["", "XX", "É"], ids=["missing", "two letters", "not ascii"])
def test_phases_that_are_not_one_ascii_letter_still_pick_the_complete_events(odd):
    evs = _ops(3) + [{"ph": odd, "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1, "ts": 99, "dur": 1}] + _ops(2)
    if not odd:
        del evs[3]["ph"]
    data = json.dumps(_trace(evs)).encode()
    store = build_store(decode(None, data, LoadReport())[0].traceEvents)
    assert len(store) == 5 and "odd" not in store.names
    assert store.file_index.tolist() == [0, 1, 2, 4, 5]


def test_progress_after_each_piece_can_stop_the_load_and_the_helper(tmp_path, monkeypatch):
    from tracetui.read import forked
    p = _plain_copy(tmp_path)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    monkeypatch.setattr(split, "PIECE_BYTES", 16 << 10)
    seen = []

    def progress(stage, frac):
        seen.append((stage, frac))
        if stage == "decoding" and frac > 0.3:
            raise KeyboardInterrupt("the user cancelled")

    with pytest.raises(KeyboardInterrupt):
        load_trace(p, progress=progress)
    fracs = [f for s, f in seen if s == "decoding"]
    assert len(fracs) >= 3 and fracs == sorted(fracs)  # the bar moves piece by piece
    assert not forked._LIVE  # the helper was killed and reaped, not left to finish


@pytest.mark.parametrize("path", ["one process", "two processes", "one event at a time", "times as text"])
def test_header_fields_survive_every_decode_path(tmp_path, monkeypatch, path):
    """host_name and baseTimeNanoseconds (what a rank's tables need) are kept in ``Trace.meta``
    exactly as the file writes them, whichever way it was decoded."""
    evs = _ops(400)
    if path == "one event at a time":
        evs[7]["pid"] = [1]  # a field of the wrong type: decoded event by event
    if path == "times as text":
        evs[3]["ts"] = 1_700_000_000_123_456.789  # past a float's ns: times read from their digits
    base = 1_733_000_000_123_456_789  # more digits than a float holds
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 5, "world_size": 8, "backend": "nccl"},
           "traceEvents": evs, "host_name": "node-7", "baseTimeNanoseconds": base}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    monkeypatch.setenv("TRACETUI_PARALLEL", "1" if path == "two processes" else "0")
    if path == "two processes":
        monkeypatch.setattr(split, "MIN_BYTES", 0)
    t = load_trace(p)
    assert ("decode+index (2 processes)" in t.timings) == (path == "two processes")
    assert (t.meta["host_name"], t.meta["baseTimeNanoseconds"]) == ("node-7", base)
    assert t.meta["distributedInfo"] == doc["distributedInfo"]
