"""The tolerant path (model/repair.py): it keeps every complete event, repairs only what it says,
counts what it drops, and its work grows linearly with the file.

Expected event sets are computed here from the JSON text with Python's own decoder, never
through tracetui's code.
"""
from __future__ import annotations

import json
import re
import time

import msgspec
import pytest

from tracetui.model import TraceError, load_trace
from tracetui.read import repair
from tracetui.read.load import LoadReport, decode


def _events(n: int, tricky: bool = True) -> list[dict]:
    """Host ops on two threads and their kernels on a stream, with names and args that hold the
    bytes a repair could trip on: escaped quotes, ``}, {`` and ``]`` inside strings."""
    out = []
    for i in range(n):
        note = ("a}, {b" if i % 2 else "x]y") if tricky else "n"
        out.append({"ph": "X", "cat": "cpu_op", "name": f'aten::op{i} "q"' if tricky else f"aten::op{i}",
                    "pid": 1, "tid": 1 + i % 2, "ts": 10.0 * i, "dur": 5.0,
                    "args": {"External id": i, "Input Dims": [[2, 3], [3]], "note": note}})
        if i % 3 == 0:
            out.append({"ph": "X", "cat": "kernel", "name": f"kernel{i}", "pid": 0, "tid": 7,
                        "ts": 10.0 * i + 1, "dur": 2.0, "args": {"External id": i, "correlation": i}})
    return out


def _layout(kind: str, evs: list) -> bytes:
    if kind == "dumps":    # Python's default: one line, ", " separators
        return json.dumps({"traceEvents": evs, "deviceProperties": [{"name": "H200"}]}).encode()
    if kind == "kineto":   # one event per line, the envelope's keys around it
        return json.dumps({"schemaVersion": 1, "traceEvents": evs, "traceName": "t"}, indent=1).encode()
    if kind == "compact":
        return json.dumps({"traceEvents": evs}, separators=(",", ":")).encode()
    return json.dumps(evs).encode()  # Chrome's bare array


def _event_ends(raw: bytes) -> list[int]:
    """Byte offset just past each event of the events array, found by Python's json decoder."""
    assert raw.isascii()  # json.dumps escapes the rest: character offsets are byte offsets
    txt = raw.decode()
    dec = json.JSONDecoder()
    i = txt.index("[", txt.index("traceEvents") if txt.lstrip()[0] == "{" else 0) + 1
    ends = []
    while True:
        while txt[i] in " \n,":
            i += 1
        if txt[i] == "]":
            return ends
        _, i = dec.raw_decode(txt, i)
        ends.append(i)


def _names(doc) -> list[str]:
    return [e.name for e in doc.traceEvents]


@pytest.mark.parametrize("kind", ["dumps", "kineto", "compact", "bare"])
def test_every_truncation_point_keeps_every_complete_event(kind):
    """Cut the file at every byte: exactly the events that end before the cut load, in order,
    names intact; a cut before the first complete event is a one-line error, never a traceback."""
    evs = _events(4)
    raw = _layout(kind, evs)
    ends = _event_ends(raw)
    assert len(ends) == len(evs)
    names = [e["name"] for e in evs]
    for cut in range(1, len(raw) + 1):
        want = [names[k] for k, end in enumerate(ends) if end <= cut]
        rep = LoadReport()
        try:
            doc, src = decode("cut.json", raw[:cut], rep)
        except TraceError as e:
            assert not want, (cut, str(e))
            assert "\n" not in str(e) and "cut.json" in str(e)
            continue
        assert _names(doc) == want, (cut, raw[max(0, cut - 40):cut])
        if cut < len(raw):
            assert rep.repairs, cut  # a cut file always says so
            assert not any("could not be repaired" in r for r in rep.repairs)
        # the bytes handed on for the lazy args pass decode to the same events
        again = msgspec.json.decode(src)
        assert len(again if kind == "bare" else again["traceEvents"]) == len(want)


def test_one_line_file_with_one_damaged_event_loads_every_event(tmp_path):
    """The issue's 1,001-event json.dumps file: one invalid byte, a raw ESC or NUL, unescaped
    quotes in a name, the closing brackets missing: each loads all 1,001 events and says what it did."""
    evs = _events(1001, tricky=False)
    evs = [e for e in evs if e["cat"] == "cpu_op"]
    raw = json.dumps({"traceEvents": evs}).encode()
    target = b'"aten::op500"'
    cases = {
        "utf8": (raw.replace(target, b'"aten::op500\xff"'), "replaced 1 invalid UTF-8 sequence(s) with U+FFFD"),
        "esc": (raw.replace(target, b'"aten::op500\x1b"'), "escaped 1 raw control character(s) in 1 event(s)"),
        "nul": (raw.replace(target, b'"aten::op500\x00"'), "escaped 1 raw control character(s) in 1 event(s)"),
        "quotes": (raw.replace(target, b'"aten::op500 "x" y"'), "escaped 2 unescaped quote(s) in 1 event name(s)"),
        "unclosed": (raw[:-2], "trace ends early: the events array is not closed (no event was cut)"),
        "bare_unclosed": (json.dumps(evs).encode()[:-1],
                          "trace ends early: the events array is not closed (no event was cut)"),
    }
    for label, (data, note) in cases.items():
        p = tmp_path / f"{label}.json"
        p.write_bytes(data)
        t = load_trace(p)
        assert p.read_bytes() == data
        assert len(t.store) == 1001, label
        assert t.report.repairs == [note], label
        op500 = [t.name(i) for i in range(len(t.tree)) if t.name(i).startswith("aten::op500")]
        assert len(op500) == 1, label
    assert op500 == ["aten::op500"]


def test_quotes_are_repaired_only_inside_a_name_value(tmp_path):
    """A stray quote in an args value is not a name's: that event is dropped and counted, its
    neighbours and their names untouched; the repair never runs across events."""
    evs = [e for e in _events(6, tricky=False) if e["cat"] == "cpu_op"]
    raw = json.dumps({"traceEvents": evs}).encode()
    bad = raw.replace(b'"External id": 2,', b'"External id": 2, "x": "a"b",')
    d = _decode(bad)
    assert _names(d[0]) == [e["name"] for e in evs if e["name"] != "aten::op2"]
    assert any(r.startswith("dropped 1 damaged event(s) that could not be repaired") for r in d[1])
    assert not any("quote" in r for r in d[1])
    # a name that is the event's last key is still a name value
    last = raw.replace(b'"name": "aten::op3", ', b"").replace(b'"note": "n"}}, {"ph": "X", "cat": "cpu_op", "name": "aten::op4"',
                                                              b'"note": "n"}, "name": "a"b"}, {"ph": "X", "cat": "cpu_op", "name": "aten::op4"')
    doc, notes = _decode(last)
    assert 'a"b' in _names(doc) and notes == ["escaped 1 unescaped quote(s) in 1 event name(s)"]


def _decode(data: bytes):
    rep = LoadReport()
    doc, _ = decode("f.json", data, rep)
    return doc, rep.repairs


def test_stray_bytes_and_padding_keep_the_events_around_them():
    evs = [e for e in _events(5, tricky=False) if e["cat"] == "cpu_op"]
    raw = json.dumps({"traceEvents": evs}).encode()
    names = [e["name"] for e in evs]
    sep = b'}}, {"ph": "X", "cat": "cpu_op", "name": "aten::op3"'
    cases = {
        "nul_padding": (raw + b"\x00" * 100, ["dropped 100 stray byte(s) after the end of the document"]),
        "nul_padding_unclosed": (raw[:-2] + b"\x00" * 100, [
            "dropped 100 stray byte(s) after complete events",
            "trace ends early: the events array is not closed (no event was cut)"]),
        "junk_between": (raw.replace(sep, b"}}xx" + sep[2:]), ["dropped 2 stray byte(s) after complete events"]),
        "stray_bracket": (raw.replace(sep, b"}}]" + sep[2:]), ["dropped 1 stray byte(s) after complete events"]),
        "trailing_junk": (raw + b"garbage", ["dropped 7 stray byte(s) after the end of the document"]),
        "damaged_header": (raw.replace(b'{"traceEvents"', b'{"x": @, "traceEvents"'),
                           ["dropped the damaged top-level fields before traceEvents (24 bytes)"]),
    }
    for label, (data, notes) in cases.items():
        doc, got = _decode(data)
        assert _names(doc) == names, label
        assert got == notes, label


def test_could_not_be_repaired_is_said_of_the_file_only():
    """Said when the file's own damage leaves nothing; a file our repair handles never says it."""
    with pytest.raises(TraceError, match="invalid JSON that could not be repaired"):
        _decode(b'{"traceEvents": [{"a": @}, {"b": @}]}')
    with pytest.raises(TraceError, match="file ends before its traceEvents array"):
        _decode(b'{"schemaVersion": 1, "traceEv')
    with pytest.raises(TraceError, match="trace ends before its first complete event"):
        _decode(b'{"traceEvents": [{"ph": "X", "na')


class _Counting:
    """Stands in for repair's array decoder and adds up the bytes it is handed."""

    def __init__(self):
        self.bytes = 0
        self.calls = 0

    def decode(self, buf):
        """msgspec stops at the first error: count the bytes up to it (all of them otherwise)."""
        self.calls += 1
        try:
            out = _ELEMENTS.decode(buf)
        except msgspec.DecodeError as e:
            at = re.search(r"\(byte (\d+)\)", str(e))
            self.bytes += int(at.group(1)) if at else len(buf)
            raise
        self.bytes += len(buf)
        return out


_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])


@pytest.mark.parametrize("damage", ["one", "every_event_ctrl", "every_tenth_quote", "cut", "false_boundaries"])
def test_repair_work_is_linear_in_file_size(monkeypatch, damage):
    """The bytes the repair decodes stay within a small multiple of the file, whatever the damage
    and however often it recurs (the old quote regex was quadratic: 52 s for 552 KB)."""
    evs = _events(3000)
    raw = json.dumps({"traceEvents": evs}).encode()
    data = {
        "one": raw.replace(b'"aten::op1500 \\"q\\""', b'"aten::op1500 "q""'),
        "every_event_ctrl": raw.replace(b'", "pid"', b'\x01", "pid"'),
        "every_tenth_quote": re.sub(rb'"aten::op(\d*0) \\"q\\""', rb'"aten::op\1 "q""', raw),
        "cut": raw[: len(raw) * 2 // 3],
        "false_boundaries": raw[:-2],  # every odd event holds "}, {" in a string
    }[damage]
    counter = _Counting()
    monkeypatch.setattr(repair, "_elements", counter)
    t0 = time.perf_counter()
    doc, notes = _decode(data)
    took = time.perf_counter() - t0
    assert counter.bytes <= 8 * len(data), (counter.bytes / len(data), counter.calls)
    assert took < 5.0
    kept = len(doc.traceEvents)
    expect = len(evs)
    if damage == "cut":  # the events that end before the cut
        expect = sum(1 for e in _event_ends(raw) if e <= len(data))
    assert kept == expect, (kept, expect, notes)


def test_552_kb_one_line_file_repairs_in_well_under_a_second(tmp_path):
    """The issue's quadratic case: one line, no ", " after a name (separators "," and ": "), one
    invalid byte. The old quote regex scanned to the end of the line from every name: 36 s for
    542 KB on main at 37ff1fb; here milliseconds, with every event kept."""
    evs = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
            "args": {"External id": i}} for i in range(4400)]
    raw = json.dumps({"traceEvents": evs}, separators=(",", ": ")).encode()
    data = raw.replace(b'"aten::op2000"', b'"aten::op2000\xff"')
    assert len(data) > 540_000
    p = tmp_path / "one_line.json"
    p.write_bytes(data)
    t0 = time.perf_counter()
    t = load_trace(p)
    assert time.perf_counter() - t0 < 2.0
    assert len(t.store) == 4400 and t.report.repairs == ["replaced 1 invalid UTF-8 sequence(s) with U+FFFD"]


def test_a_cut_trace_states_one_event_count(tmp_path, capsys):
    """The repair line spoke of 'kept N complete events' beside the summary's own count of events
    (a different one: metadata and flows are not events there). One count, one meaning."""
    import gzip
    from tests.conftest import TRACES
    from tracetui.cli.main import main
    raw = gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(raw[: int(len(raw) * 0.6)])
    assert main(["summary", str(p)]) == 0
    out = capsys.readouterr().out
    counts = set(re.findall(r"([\d,]+) (?:complete )?events?\b", out))
    assert len(counts) == 1, counts
    assert "trace ends early" in out
