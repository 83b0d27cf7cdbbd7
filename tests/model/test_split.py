"""The two-process decode+index builds exactly the store the one-process path builds, or steps aside."""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.model import split
from tracetui.model.events import build_store
from tracetui.model.load import LoadReport, decode, read_bytes

from tests.conftest import DATA, PEER, TRACES

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


@pytest.mark.parametrize("in_place", [False, True], ids=["copied", "in-place"])
@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_split_store_equals_serial(path, in_place):
    data = read_bytes(path, LoadReport())
    data = bytearray(data) if in_place else bytes(data)  # a bytearray lets each half close in place
    before = bytes(data)
    got = split.decode_index(data, min_bytes=0)
    assert data == before  # the bracket swapped in for the parent's half is a comma again
    doc, want = _serial(path)
    if got is None:  # only files the one-process path has to repair may step aside
        report = LoadReport()
        decode(path, read_bytes(path, report), report)
        assert report.repairs, f"{path.name}: valid file but the split path stepped aside"
        return
    doc2, store, lenient = got
    _assert_same(want, store)
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


def test_load_trace_is_the_same_either_way(tmp_path, monkeypatch):
    src = TRACES / "mlp_eager.json.gz"
    p = tmp_path / "t.json"
    p.write_bytes(gzip.decompress(src.read_bytes()))
    monkeypatch.setenv("TRACETUI_PARALLEL", "0")
    serial = load_trace(p)
    monkeypatch.setenv("TRACETUI_PARALLEL", "1")
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    both = load_trace(p)
    assert "decode+index (2 processes)" in both.timings and "index" in serial.timings
    for f in ("kind", "parent", "cparent", "start", "dur", "child_idx"):
        assert np.array_equal(getattr(serial.tree, f), getattr(both.tree, f)), f
    for f in ("cpu_total", "cpu_self", "device", "kernels"):
        assert np.array_equal(getattr(serial.roll, f), getattr(both.roll, f)), f
    assert serial.tree.diagnostics == both.tree.diagnostics
    assert serial.device_name == both.device_name


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
