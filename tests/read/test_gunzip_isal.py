"""ISA-L's gunzip (the `fast` extra) gives the bytes and the load report zlib's path gives, and
steps aside for anything but whole gzip members within the limit (issue 39.1)."""
from __future__ import annotations

import gzip

import pytest

from tracetui.read import source
from tracetui.read.errors import TraceError
from tracetui.read.source import LoadReport, gunzip

from tests.conftest import PEER, TRACES

pytest.importorskip("isal")


def _zlib_only(monkeypatch, data, limit):
    monkeypatch.setattr(source, "isal_into", lambda data, out: False)
    report = LoadReport()
    try:
        return bytes(gunzip(None, data, report, limit)), report.repairs
    except TraceError as e:
        return "error", e.problem
    finally:
        monkeypatch.undo()


def _either(data, limit):
    report = LoadReport()
    try:
        return bytes(gunzip(None, data, report, limit)), report.repairs
    except TraceError as e:
        return "error", e.problem


def _cases():
    body = b'{"traceEvents": [' + b",".join(b'{"ph": "X", "name": "k%d"}' % i for i in range(5000)) + b"]}"
    z = gzip.compress(body)
    cut = bytearray(z)
    cut[len(cut) // 2] ^= 0xFF
    return {"whole": z, "two members": gzip.compress(body[:100]) + gzip.compress(body[100:]),
            "zero padding": z + bytes(16), "trailing bytes": z + b"junk", "truncated": z[:-100],
            "damaged": bytes(cut), "bad crc": z[:-8] + bytes(4) + z[-4:], "lying size": z[:-4] + b"\xff\xff\xff\x7f"}


@pytest.mark.parametrize("name", list(_cases()))
@pytest.mark.parametrize("limit", [1 << 30, 50_000])
def test_isal_path_equals_zlib_path(name, limit, monkeypatch):
    data = _cases()[name]
    assert _either(data, limit) == _zlib_only(monkeypatch, data, limit)


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.json.gz")) + sorted(PEER.glob("*.json.gz")), ids=lambda p: p.name)
def test_isal_gunzips_every_trace_as_zlib_does(path):
    data = path.read_bytes()
    out = source._Out(data, 1 << 32, path)
    assert source.isal_into(data, out) and bytes(out.done()) == gzip.decompress(data)
