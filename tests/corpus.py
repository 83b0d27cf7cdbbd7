"""The bad-input corpus: damaged, hostile and odd trace files, generated (never committed).

Each case writes its input and states what a correct run gives: either the events that must load
(names with counts, computed here from the JSON with Python's own decoder, never through
tracetui) or an error (exit 2, one line naming the file). Built from a real H200 recording
(GeGLU MLP, eager: host ops, runtime calls, kernels on a stream, flows) in four layouts.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "tests" / "data" / "h200_mlp_eager.json.gz"

KNOWN = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver", "kernel",
         "gpu_memcpy", "gpu_memset"}
"""Categories a tree node is made of (Kineto's; our own list, not the model's table)."""

TARGET = "@@TARGET@@"


@dataclass
class Case:
    name: str
    make: Callable[[Path], Path]       # writes the input under a folder; the path to pass
    keep: Counter | None = None        # None: an error is the correct result
    universe: set = field(default_factory=set)  # names compared (others: root, thread labels)
    words: str = ""                    # what the error line must say
    repaired: bool | None = None       # must the load report repairs?
    app: bool = False                  # always run in the app too (a case that hung it)


def base_doc() -> dict:
    return json.loads(gzip.decompress(BASE.read_bytes()))


def _counted(evs) -> Counter:
    return Counter(e["name"] for e in evs if isinstance(e, dict) and e.get("ph") == "X"
                   and str(e.get("cat", "")).lower() in KNOWN and isinstance(e.get("name"), str))


def _kineto_event(e: dict) -> str:
    """An event laid out as Kineto's exporter writes it: indented, the args one per line."""
    d = json.dumps
    head = [k for k in ("ph", "cat", "name", "pid", "tid") if k in e]
    times = [k for k in ("ts", "dur") if k in e]
    rest = [k for k in e if k not in head and k not in times and k != "args"]
    lines = [", ".join(f"{d(k)}: {d(e[k])}" for k in ks) for ks in (head, times, rest) if ks]
    text = "  {\n    " + ",\n    ".join(lines)
    if isinstance(e.get("args"), dict):
        text += ',\n    "args": {\n' + ",\n".join(f"      {d(k)}: {d(v)}" for k, v in e["args"].items()) + "\n    }"
    return text + "\n  }"


def layout(doc, kind: str) -> bytes:
    if kind == "line":     # Python's json.dumps: one line, ", " separators
        return json.dumps(doc).encode()
    if kind == "compact":  # what tracetui gen writes
        return json.dumps(doc, separators=(",", ":")).encode()
    if kind == "bare":     # Chrome's bare array
        return json.dumps(doc["traceEvents"] if isinstance(doc, dict) else doc).encode()
    parts = []             # Kineto's exporter
    for k, v in doc.items():
        if k == "traceEvents":
            parts.append('  "traceEvents": [\n' + ",\n".join(_kineto_event(e) for e in v) + "\n  ]")
        else:
            parts.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    return ("{\n" + ",\n".join(parts) + "\n}").encode()


def event_spans(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each element of the events array, by Python's decoder."""
    txt = raw.decode("latin-1")  # one char per byte: offsets are byte offsets
    dec = json.JSONDecoder()
    i = txt.index("[", txt.index('"traceEvents"') if txt.lstrip()[0] == "{" else 0) + 1
    spans = []
    while True:
        while txt[i] in " \r\n\t,":
            i += 1
        if txt[i] == "]":
            return spans
        _, j = dec.raw_decode(txt, i)
        spans.append((i, j))
        i = j


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        p.write_bytes(data)
        return p
    return make


def _ok(name, data: bytes, keep: Counter, universe=None, repaired=None, file=None, **kw) -> Case:
    return Case(name, _write(file or f"{name}.json", data), keep=keep,
                universe=set(universe or keep), repaired=repaired, **kw)


def _err(name, data: bytes, words: str = "", file=None, **kw) -> Case:
    return Case(name, _write(file or f"{name}.json", data), words=words, **kw)


def truncations(doc) -> list[Case]:
    """Cut each layout at points through the header, the events and the envelope's tail."""
    evs = doc["traceEvents"]
    out = []
    universe = set(_counted(evs))
    for kind in ("kineto", "line", "compact", "bare"):
        raw = layout(doc, kind)
        spans = event_spans(raw)
        points = sorted({int(len(raw) * f) for f in (0.01, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.97, 0.995)}
                        | {len(raw) - 1, len(raw) - 2, spans[-1][1], spans[-1][1] - 1})
        for cut in points:
            keep = _counted(e for e, (_, end) in zip(evs, spans) if end <= cut)
            name = f"cut_{kind}_{cut}"
            if keep:
                out.append(_ok(name, raw[:cut], keep, universe, repaired=True))
            else:
                out.append(_err(name, raw[:cut]))
    raw = layout(doc, "compact")
    gz = gzip.compress(raw)
    spans = event_spans(raw)
    for f in (0.3, 0.6, 0.9, 0.99):
        part = gz[: int(len(gz) * f)]
        got = zlib.decompressobj(wbits=31).decompress(part)  # what a reader can recover
        keep = _counted(e for e, (_, end) in zip(evs, spans) if end <= len(got))
        name = f"cut_gzip_{int(f * 100)}"
        out.append(_ok(name, part, keep, universe, repaired=True, file=f"{name}.json.gz") if keep
                   else _err(name, part, file=f"{name}.json.gz"))
    return out


def damage(doc) -> list[Case]:
    """One event damaged the ways real exporters and disks damage files, in each layout."""
    evs = doc["traceEvents"]
    universe = set(_counted(evs))
    full = _counted(evs)
    t = next(i for i, e in enumerate(evs) if e.get("name") == "aten::gelu")
    orig = evs[t]["name"]
    out = []
    for kind in ("kineto", "line", "compact", "bare"):
        marked = json.loads(json.dumps(doc))
        marked["traceEvents"][t]["name"] = TARGET
        raw = layout(marked, kind)
        spans = event_spans(raw)
        t0, t1 = spans[t]

        def renamed(new: str) -> Counter:
            c = Counter(full)
            c[orig] -= 1
            c[new] += 1
            return +c

        def without(*idx) -> Counter:
            return +(full - _counted(evs[i] for i in idx))

        target = json.dumps(TARGET).encode()
        named = {
            "utf8": (b'"aten::gelu\xff"', "aten::gelu\ufffd"),
            "esc": (b'"aten::gelu\x1b[2J"', "aten::gelu\x1b[2J"),
            "nul": (b'"aten::gelu\x00"', "aten::gelu\x00"),
            "newline": (b'"aten::gelu\nx"', "aten::gelu\nx"),
            "quotes": (b'"aten::gelu "tanh" x"', 'aten::gelu "tanh" x'),
            "quote_at_end": (b'"aten::gelu""', 'aten::gelu"'),
            "false_boundary_esc": (b'"aten::gelu}, {\x1b"', "aten::gelu}, {\x1b"),
        }
        for label, (bad, new) in named.items():
            out.append(_ok(f"{label}_{kind}", raw.replace(target, bad), renamed(new),
                           universe | {new}, repaired=True))
        clean = raw.replace(target, json.dumps(orig).encode())
        out.append(_ok(f"clean_{kind}", clean, full, universe, repaired=False))
        # an args value with a stray quote: not a name, so that event is dropped (and counted)
        args_at = raw.index(b'"args"', t0) if b'"args"' in raw[t0:t1] else None
        if args_at is not None:
            brace = raw.index(b"{", args_at)
            bad = clean[:brace + 1] + b'"x": "a"b", ' + clean[brace + 1:]
            out.append(_ok(f"args_quote_{kind}", bad, without(t), universe, repaired=True))
        for label, junk in [("junk_between", b"xx"), ("stray_bracket", b"]"), ("double_comma", b", "),
                            ("stray_brace", b"}")]:
            bad = clean[:t1] + junk + clean[t1:]
            out.append(_ok(f"{label}_{kind}", bad, full, universe, repaired=True))
        out.append(_ok(f"nul_padding_{kind}", clean + b"\x00" * 4096, full, universe, repaired=True))
        out.append(_ok(f"trailing_garbage_{kind}", clean + b"\n<html>oops</html>", full, universe, repaired=True))
        out.append(_ok(f"unclosed_{kind}", clean.rstrip()[:-2 if kind != "bare" else -1], full, universe,
                       repaired=True))
        # bytes lost from the middle of one event to the middle of the next: both are gone,
        # unless what is left of them happens to be an event (Python's decoder says)
        a, b = (t0 + t1) // 2, (spans[t + 1][0] + spans[t + 1][1]) // 2
        holed = clean[:a] + clean[b:]
        keep = without(t, t + 1)
        try:
            merged = json.loads(holed[t0:spans[t + 1][1] - (b - a)])
            keep = keep + _counted([merged])
        except ValueError:
            pass
        out.append(_ok(f"hole_{kind}", holed, keep, universe))
        # a number mangled: that event alone is dropped
        span = re.sub(rb'("ts":\s*)[-0-9.eE+]+', rb"\g<1>1.5e", clean[t0:t1], count=1)
        out.append(_ok(f"bad_number_{kind}", clean[:t0] + span + clean[t1:], without(t), universe, repaired=True))
        if kind == "kineto":
            out.append(_ok("crlf_kineto", clean.replace(b"\n", b"\r\n"), full, universe, repaired=False))
            dev = clean.index(b'"deviceProperties"')
            out.append(_ok("damaged_header_kineto", clean[:dev + 22] + b"@" + clean[dev + 22:], full, universe,
                           repaired=True))
    return out


def structure(doc) -> list[Case]:
    """Valid JSON that is an odd trace: wrong shapes and types, odd events, hostile names."""
    evs = doc["traceEvents"]
    full = _counted(evs)
    universe = set(full)

    def dump(d) -> bytes:
        return json.dumps(d).encode()

    def with_events(extra: list, name: str, **kw) -> Case:
        d = dict(doc, traceEvents=evs + extra)
        return _ok(name, dump(d), full + _counted(extra), universe | set(_counted(extra)), **kw)

    x = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": evs[-1].get("ts", 0), "dur": 1.0}
    out = [
        _err("events_is_object", dump(dict(doc, traceEvents={"a": 1})), "not a PyTorch profiler trace"),
        _err("events_missing", dump({k: v for k, v in doc.items() if k != "traceEvents"}),
             "not a PyTorch profiler trace"),
        _err("events_empty", dump(dict(doc, traceEvents=[])), "no events"),
        _err("only_metadata", dump(dict(doc, traceEvents=[e for e in evs if e.get("ph") == "M"])), "no events"),
        _err("list_of_numbers", b"[1, 2, 3]", "not a PyTorch profiler trace"),
        _err("json_string", b'"traceEvents"', "not a PyTorch profiler trace"),
        _err("json_null", b"null", "not a PyTorch profiler trace"),
        with_events([{**x, "name": "aten::" + "long" * 50_000}], "huge_name"),
        with_events([{**x, "name": "aten::😀 مرحبا \u202e\u2066 名前"}], "unicode_name"),
        with_events([{**x, "name": "aten::[bold red]x[/] [@click=app.quit]y"}], "markup_name"),
        with_events([{**x, "name": f"aten::same{i % 3}", "ts": 5.0} for i in range(2000)], "same_ts"),
        with_events([{**x, "name": "aten::dup", "name2": 1, "ph": "X"}], "extra_keys"),
        with_events([{"ph": "s", "id": 999, "pid": 1, "tid": 1, "ts": 1.0, "cat": "ac2g", "name": "ac2g"}],
                    "flow_one_end"),
        with_events([{"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 1.0}], "begin_without_end"),
        with_events([{**x, "name": "aten::strids", "args": {"External id": "17", "correlation": "3"}}],
                    "string_ids", repaired=True),
        with_events([{**x, "name": "aten::mm", "args": {"Input Dims": [[4, 8]], "External id": 123456}}],
                    "mm_one_input_dim"),
        with_events([{**x, "name": "aten::mm", "args": {"Input Dims": "[[4, 8], [8, 2]]"}}],
                    "input_dims_not_a_list"),
        with_events([{**x, "name": "aten::mm", "args": {"Input Dims": [[4, "8"], None]}}],
                    "input_dims_odd_entries"),
        with_events([{**x, "name": "aten::neg_dur", "dur": -5.0}], "negative_dur"),
        _ok("device_props_odd", dump(dict(doc, deviceProperties=[1, "x", None])), full, universe),
        _ok("provenance_partial", dump(dict(doc, tracetui={"device_type": "cpu", "workload": None})), full,
            universe),
    ]
    return out


def files(doc) -> list[Case]:
    """What is on disk rather than in the JSON: empty, binary, compressed, folders."""
    raw = layout(doc, "compact")
    full = _counted(doc["traceEvents"])

    def folder(name: str, entries: Callable[[Path], None]) -> Callable[[Path], Path]:
        def make(d: Path) -> Path:
            f = d / name
            f.mkdir()
            entries(f)
            return f
        return make

    def put(f: Path, n: str, data: bytes, t: int) -> None:
        (f / n).write_bytes(data)
        os.utime(f / n, (t, t))

    out = [
        _err("empty", b"", "empty file"),
        _err("whitespace_only", b" \n\t \n"),
        _err("binary_junk", bytes(range(256)) * 8, "not JSON"),
        _err("png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "not JSON"),
        _err("utf16", "\ufeff".encode("utf-16-le") + json.dumps(doc).encode("utf-16-le")),
        _ok("gzip", gzip.compress(raw), full, file="gzip.json.gz", repaired=False),
        _ok("gz_name_plain", raw, full, file="plain.json.gz", repaired=False),
        _err("gzip_garbage", b"\x1f\x8b\x08\x00" + bytes(range(200)), "gzip", file="garbage.json.gz"),
        _err("gzip_empty", gzip.compress(b""), file="empty.json.gz"),
        _err("gzip_of_junk", gzip.compress(b"hello"), "not JSON", file="junk.json.gz"),
        Case("folder_one_trace", folder("run1", lambda f: put(f, "a.pt.trace.json", raw, 1000)), keep=full,
             universe=set(full)),
        Case("folder_newest", folder("run2", lambda f: (put(f, "old.pt.trace.json", b"junk", 1000),
                                                        put(f, "new.pt.trace.json", raw, 2000))),
             keep=full, universe=set(full)),
        Case("folder_empty", folder("run3", lambda f: None), words="folder holds no"),
        Case("folder_newest_is_bad", folder("run4", lambda f: (put(f, "old.pt.trace.json", raw, 1000),
                                                               put(f, "new.pt.trace.json", b"", 2000))),
             words="empty file"),
        _err("hostile_name_bad", b"nope", "not JSON", file="t\x1b]0;pwned\x07 [bold]x[@click=app.quit] \u202e.json"),
        _ok("hostile_name_good", raw, full, file="ok\x1b[2J [bold]x[@click=app.quit]y \n.json", repaired=False),
    ]
    return out


def loader_owned(doc) -> list[Case]:
    """Cases issue 21 gave to the `loader` branch: each states the correct result after its fix."""
    raw = layout(doc, "compact")
    evs = doc["traceEvents"]
    full = _counted(evs)
    universe = set(full)
    x = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": evs[-1].get("ts", 0), "dur": 1.0}

    def with_events(extra, name, **kw):
        d = dict(doc, traceEvents=evs + extra)
        return _ok(name, json.dumps(d).encode(), full + _counted(extra), universe | set(_counted(extra)), **kw)

    def left_out(extra, name, repaired=True):
        """An event with a field of the wrong type or out of range: it alone is left out, and said."""
        d = dict(doc, traceEvents=evs + extra)
        return _ok(name, json.dumps(d).encode(), full, universe | {e["name"] for e in extra}, repaired=repaired)

    def folder(name, entries, **kw):
        def make(d: Path) -> Path:
            f = d / name
            f.mkdir()
            entries(f)
            return f
        return Case(name, make, **kw)

    def fifo(f: Path) -> None:
        (f / "a.pt.trace.json").write_bytes(raw)
        os.utime(f / "a.pt.trace.json", (1000, 1000))
        os.mkfifo(f / "z.pt.trace.json")

    def broken_link(f: Path) -> None:
        (f / "a.pt.trace.json").write_bytes(raw)
        os.utime(f / "a.pt.trace.json", (1000, 1000))
        os.symlink(f / "missing", f / "z.pt.trace.json")

    def dev_zero(f: Path) -> None:
        (f / "a.pt.trace.json").write_bytes(raw)
        os.utime(f / "a.pt.trace.json", (1000, 1000))
        os.symlink("/dev/zero", f / "z.pt.trace.json")

    big = 1 << 63
    return [
        with_events([{**x, "name": "aten::big_corr", "args": {"correlation": big}}], "id_2_63_correlation"),
        with_events([{**x, "name": "aten::big_ext", "args": {"External id": big * 2}}], "id_2_64_external"),
        with_events([{**x, "name": "aten::big_seq", "args": {"Sequence number": big}}], "id_2_63_sequence"),
        with_events([{**x, "name": "aten::big_stream", "args": {"stream": big}}], "id_2_63_stream"),
        _err("deep_args", json.dumps(dict(doc, traceEvents=evs + [{**x, "name": "aten::deep", "args": {"deep": 0}}]))
             .encode().replace(b'"deep": 0', b'"deep": ' + b"[" * 1200 + b"1" + b"]" * 1200), "nested deeper"),
        _ok("provenance_big_int", json.dumps(dict(doc, tracetui={"device_type": "cuda", "device": "H200",
                                                                  "seed": 1 << 70})).encode(), full, universe),
        _ok("provenance_device_number", json.dumps(dict(doc, tracetui={"device_type": "cuda",
                                                                        "device": 7})).encode(), full, universe),
        left_out([{**x, "name": "aten::float_pid", "pid": 1.5}], "pid_float"),
        left_out([{**x, "name": "aten::ts_string", "ts": "soon"}], "ts_string"),
        left_out([{**x, "name": "aten::no_dur", "dur": None}], "null_dur"),
        left_out([{**x, "name": "aten::args_list", "args": [1, 2]}], "args_not_object"),
        _ok("device_props_object", json.dumps(dict(doc, deviceProperties={"name": "H200"})).encode(), full,
            universe),
        _ok("provenance_device_list", json.dumps(dict(doc, tracetui={"device_type": "cuda",
                                                                      "device": ["H200"]})).encode(), full, universe),
        with_events([{**x, "name": 7}], "name_number"),
        left_out([{**x, "name": "aten::huge_ts", "ts": 1e308}], "ts_1e308", repaired=None),
        left_out([{**x, "name": "aten::ts_2_64", "ts": 2 ** 65}], "ts_beyond_2_64", repaired=None),
        with_events([dict(x, name=f"aten::nest{i}", ts=100.0 + i, dur=1000.0 - 2 * i) for i in range(300)],
                    "deep_tree"),
        _ok("utf8_bom", b"\xef\xbb\xbf" + raw, full, universe),
        _ok("gzip_two_members", gzip.compress(raw[: len(raw) // 2]) + gzip.compress(raw[len(raw) // 2:]), full,
            universe, file="two.json.gz", repaired=False),
        _ok("gzip_bad_crc", gzip.compress(raw)[:-8] + b"\x00\x00\x00\x00" + gzip.compress(raw)[-4:], full, universe,
            file="crc.json.gz"),
        _err("only_unknown_categories", json.dumps({"traceEvents": [
            {"ph": "X", "cat": "gpu_user_annotation", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}]}).encode(),
            "gpu_user_annotation"),
        _err("gzip_bomb", gzip.compress(b" " * (1 << 20)) * 3000, "limit", file="bomb.json.gz"),
        folder("folder_with_fifo", fifo, keep=full, universe=universe),
        folder("folder_with_broken_link", broken_link, keep=full, universe=universe),
        folder("folder_with_dev_zero", dev_zero, keep=full, universe=universe),
    ]


def round3(doc) -> list[Case]:
    """Issue 35's findings in the read and model stages (hostile input round 3)."""
    def dump(d) -> bytes:
        return json.dumps(d).encode()

    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "ts": 10, "dur": 100}
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10}
    cycle = [dict(step, tid=2 ** 64), dict(step, tid=1), op]
    epoch = [{"ph": "X", "cat": "cpu_op", "name": f"aten::e{i}", "pid": 1, "tid": 1,
              "ts": 1712195496004644.183 + i, "dur": 1.5} for i in range(5)]
    keep = _counted(epoch)

    def odd_ts(text: bytes, exponent: bool) -> bytes:
        raw = dump({"traceEvents": epoch + [dict(op, name="aten::odd", ts="@@")]})
        if exponent:  # the head shows no epoch-sized fraction, so the exact times are read again
            raw = re.sub(rb'"ts": 1712195496004(\d)(\d\d)\.(\d+)', rb'"ts": 1.712195496004\g<1>\g<2>\g<3>e15', raw)
        return raw.replace(b'"@@"', text)

    three = [dict(step, tid=t) for t in (1, 2, 2 ** 64)] + [dict(op, tid=t) for t in (1, 2)]
    return [
        _ok("parent_cycle_two_steps", dump({"traceEvents": cycle}), _counted(cycle), app=True),
        _ok("same_step_three_threads", dump({"traceEvents": three}), _counted(three), app=True),
        _ok("ts_non_ascii_digits", odd_ts('"١٢٣.٤"'.encode(), False), keep, set(keep) | {"aten::odd"}, app=True),
        _ok("ts_non_ascii_digits_reread", odd_ts('"١٢٣.٤"'.encode(), True), keep, set(keep) | {"aten::odd"}),
        _ok("ts_invalid_utf8", odd_ts(b'"\xff\xfe1"', False), keep, set(keep) | {"aten::odd"}, app=True),
        _ok("ts_invalid_utf8_reread", odd_ts(b'"\xff\xfe1"', True), keep, set(keep) | {"aten::odd"}),
        _err("zeros_2mb", b"\x00" * (2 << 20), "not JSON"),
    ]


LOADER_ITEMS: dict = {}
"""Corpus cases still open on main, by name, with why (xfail, not strict). None now: deep trees
(deep_tree, same_ts) broke `tree --json` until tree_dict was built from a stack and trees past
orjson's 254 levels were written node by node."""


def all_cases() -> list[Case]:
    doc = base_doc()
    cases = truncations(doc) + damage(doc) + structure(doc) + files(doc) + loader_owned(doc) + round3(doc)
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases


# ---- output faults (issue 44 items 2 and 5): where stdout goes, not what the input is

TRACES = ROOT / "traces"
OUTPUT_FSIZE = 256
"""``ulimit -f`` for the output-fault runs, in bytes: below every command's output."""


def output_commands() -> list[tuple[str, list[str]]]:
    """(label, argv) for every command that writes a report to stdout, in every format it has:
    the bundled traces are the inputs (small, so one run takes about a second)."""
    t, mem = str(TRACES / "transformer_eager.json.gz"), str(TRACES / "transformer_eager_memory.json.gz")
    a, b, c = (str(TRACES / f"mlp_{n}.json.gz") for n in ("eager", "compile", "fused"))
    rank = str(BASE.parent / "gloo_rank0.pt.trace.json.gz")
    fmts = ("text", "json", "csv", "md")
    out = []
    for label, argv in (("summary", ["summary", t]), ("tree", ["tree", t, "--depth", "3"]),
                        ("memory", ["memory", mem]), ("diff", ["diff", a, b]), ("ladder", ["diff", a, b, c]),
                        ("ranks", ["ranks", rank])):
        out += [(f"{label} {f}", argv + ["--format", f]) for f in fmts]
    out += [("opportunities text", ["opportunities", t]), ("opportunities json", ["opportunities", t, "--json"]),
            ("skill text", ["skill"]), ("open text", [t])]
    return out


OUTPUT_FAULTS = ("full_disk", "ulimit_f", "closed_stdout", "broken_pipe")
"""/dev/full (ENOSPC), a file over ``ulimit -f`` (a short write, then EFBIG), stdout closed
(``>&-``), and a pipe whose reader is gone (EPIPE)."""


def run_output_fault(argv: list[str], fault: str, tmp: Path, timeout: float = 120) -> dict:
    """``tracetui ARGV`` in a fresh process with its stdout broken the way ``fault`` says:
    its exit code, stderr, and the bytes that reached the file (ulimit_f)."""
    import resource
    import subprocess
    import sys
    kw: dict = {}
    target = None
    r = w = None
    if fault == "full_disk":
        kw["stdout"] = open("/dev/full", "wb")
    elif fault == "ulimit_f":
        target = tmp / f"out{len(list(tmp.iterdir()))}.txt"
        kw["stdout"] = open(target, "wb")
        kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_FSIZE, OUTPUT_FSIZE))
    elif fault == "closed_stdout":
        kw["stdout"] = subprocess.DEVNULL
        kw["preexec_fn"] = lambda: os.close(1)
    elif fault == "broken_pipe":
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the first write
        kw["stdout"] = w
    else:
        raise ValueError(fault)
    try:
        p = subprocess.run([sys.executable, "-m", "tracetui", *argv], stderr=subprocess.PIPE, cwd=ROOT,
                           timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    finally:
        if w is not None:
            os.close(w)
        if hasattr(kw.get("stdout"), "close"):
            kw["stdout"].close()
    return {"rc": p.returncode, "err": p.stderr.decode("utf-8", "replace"),
            "written": target.stat().st_size if target is not None else None}


def output_fault_ok(r: dict) -> bool:
    """The promise: exit 2 and one line, `tracetui: error: cannot write the output: …` (a
    `tracetui:` notice such as a cap may precede it), never a traceback, never exit 0."""
    lines = r["err"].splitlines()
    errors = [ln for ln in lines if ln.startswith("tracetui: error: ")]
    return (r["rc"] == 2 and len(errors) == 1 and "cannot write the output" in errors[0]
            and all(ln.startswith("tracetui: ") for ln in lines))
