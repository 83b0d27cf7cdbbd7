"""A large .json.gz is gunzipped into an unnamed temporary file and read through a map of it
(read/spill.py): the same bytes and the same repair notes and errors as gunzipping into memory,
for healthy, multi-member, truncated, damaged, padded and over-the-limit files; memory where the
temporary folder is in memory or the disk fills up."""
from __future__ import annotations

import errno
import gzip
import os

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read import source, spill
from tracetui.read.errors import TraceError
from tracetui.read.load import LoadReport, read_bytes

from tests.conftest import TRACES

TEXT = gzip.decompress((TRACES / "transformer_eager.json.gz").read_bytes())


def _cases() -> dict:
    whole = gzip.compress(TEXT, compresslevel=1)
    half = len(whole) // 2
    damaged = bytearray(whole)
    damaged[half:half + 64] = bytes(64)
    return {
        "healthy": whole,
        "two members": gzip.compress(TEXT[:1000]) + gzip.compress(TEXT[1000:]),
        "truncated": whole[:half],
        "damaged": bytes(damaged),
        "bad crc": whole[:-8] + bytes(4) + whole[-4:],
        "trailing bytes": whole + b"not gzip",
        "zero padding": whole + bytes(512),
    }


def _read(p, limit=None):
    report = LoadReport()
    try:
        data = read_bytes(p, report, limit)
    except TraceError as e:
        return None, str(e), report
    return data, None, report


@pytest.mark.parametrize("isal", [True, False], ids=["isal", "zlib"])
@pytest.mark.parametrize("case", list(_cases()))
def test_spilled_gunzip_equals_the_one_in_memory(case, isal, tmp_path, monkeypatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(_cases()[case])
    if not isal:
        monkeypatch.setattr(source, "isal_into", lambda data, out: False)
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 40)
    want, want_err, want_report = _read(p)
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    got, err, report = _read(p)
    assert err == want_err and report.repairs == want_report.repairs
    assert isinstance(got, spill.Mapped) and got[:] == bytes(want)
    if case == "healthy":
        assert got[:] == TEXT and not report.repairs


def test_over_the_limit_is_the_same_one_line_error(tmp_path, monkeypatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(TEXT))
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    got, err, _ = _read(p, limit=len(TEXT) // 3)
    assert got is None and err.endswith(f"gzip expands past the {len(TEXT) // 3:,}-byte limit "
                                        f"(a gzip bomb? {source.MAX_BYTES_ENV} raises it)")


def test_a_full_disk_or_a_temporary_folder_in_memory_gunzips_into_memory(tmp_path, monkeypatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(TEXT) + b"junk")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)

    def full(self, piece):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill.FileOut, "add", full)
    got, err, report = _read(p)
    assert type(got) is bytearray and got == TEXT and report.repairs == ["ignored 4 bytes after the gzip data"]
    monkeypatch.undo()
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(spill, "_fs_type", lambda folder: "tmpfs")
    assert spill.spill_fd(1 << 30) is None and type(_read(p)[0]) is bytearray


def test_the_mount_of_a_folder_is_its_longest_mount_point():
    kind = spill._fs_type(os.getcwd())
    assert kind is not None and kind == spill._fs_type(os.path.join(os.getcwd(), "tests"))


def test_a_spilled_trace_loads_the_same_and_its_args_read_back(tmp_path, monkeypatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(TEXT))
    want = load_trace(p, workers=1, cache=False)
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    got = load_trace(p, workers=2, cache=False)
    assert isinstance(got.store.source, spill.Mapped) and got.store.source[:] == TEXT
    for f in ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "file_index"):
        assert np.array_equal(getattr(got.store, f), getattr(want.store, f)), f
    last = len(want.store) - 1
    assert got.store.args(last) == want.store.args(last) and got.report.compressed
    assert not [n for n in os.listdir(tmp_path) if n != "t.json.gz"]  # nothing written beside the trace


@pytest.mark.parametrize("spilled", [True, False], ids=["spilled", "in-memory"])
def test_the_early_start_of_a_spilled_trace_loads_the_same(spilled, monkeypatch):
    """The CLI's head start (read/early.py: gunzip in a thread, then a child for the tail), with
    a gunzip that spills (the child decodes from the temporary file's map) or not. The child
    used to die with the gunzip thread that forked it (PR_SET_PDEATHSIG fires when that thread
    ends), so its part was never collected beyond a trace as small as mlp_eager's."""
    from tracetui.read import early as early_mod
    from tracetui.read import forked, split
    from tracetui.model.trace import start_load

    if not forked.available():
        pytest.skip("needs fork and two cores")
    p = TRACES / "transformer_eager.json.gz"
    want = load_trace(p, workers=1, cache=False)
    monkeypatch.setattr(early_mod, "EARLY_GZ_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spilled else 1 << 40)
    early = start_load(p)
    data, _ = early.bytes()
    assert isinstance(data, spill.Mapped) == spilled and early._early is not None
    got = load_trace(p, early=early, cache=False)
    assert split.TIMES["child share"] == early._early.share and got.store.source is data
    for f in ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "file_index"):
        assert np.array_equal(getattr(got.store, f), getattr(want.store, f)), f
    assert np.array_equal(got.roll.device, want.roll.device)
