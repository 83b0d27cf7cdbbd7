"""ts and dur are exact to the ns as written, in every decode path (issue 19 item 1).

Epoch timestamps with a ns fraction have 19 significant digits; float64 keeps ~16. The
reference here reads the raw JSON digits with ``decimal.Decimal`` and rebuilds nesting, partial
overlaps and CPU self time by torch.profiler's stack rule, independently of tracetui's code.
"""
from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pytest

from tracetui.read import forked, load, split
from tracetui.model import load_trace
from tracetui.read.events import HOST_KINDS
from tracetui.read.load import LoadReport, decode, read_bytes
from tracetui.read.times import exact_ns_many, ns_column

from tests.conftest import PEER

HOST_CATS = {"user_annotation": 1, "python_function": 3, "cpu_op": 4, "operator": 4,
             "cuda_runtime": 5, "cuda_driver": 5, "runtime": 5, "hip_runtime": 5}
"""Host categories -> tie-break rank (step 0, annotation 1, module 2, frame 3, op 4, runtime 5)."""
OVERHANG_NS = 1000  # the documented clock-skew allowance before a partial overlap counts

EPOCH = ["ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
         "critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
         "critical_path_cuda_event_sync_event_sync_trace.json.gz",
         "nccl_parser_config_nccl_data.json.gz",
         "trace_filter_sampled_rank-1.json.gz",
         "distributed_info_unavailable_distributed_info_not_found.json.gz",
         "call_stack_backward_thread.json"]


def _ns(v) -> int:
    return int((Decimal(v) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def _events(raw: bytes) -> list:
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)  # every digit as written
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def reference(events: list) -> dict:
    """Exact times, parents, partial overlaps and CPU self time of the host X events, by
    position in traceEvents, from the digits and torch.profiler's stack rule."""
    rows = []
    for pos, e in enumerate(events):
        rank = HOST_CATS.get(str(e.get("cat", "")).lower())
        if e.get("ph") != "X" or rank is None or "ts" not in e:
            continue
        name = e.get("name", "")
        if rank == 1 and name.startswith("ProfilerStep#"):
            rank = 0
        if rank == 3 and name.startswith("nn.Module: "):
            rank = 2
        ts, dur = _ns(e["ts"]), max(_ns(e.get("dur", 0)), 0)
        rows.append(((e.get("pid"), e.get("tid")), ts, -dur, rank, pos, dur))
    rows.sort(key=lambda r: (str(r[0]), r[1], r[2], r[3], r[4]))
    parent, partial, stack, track = {}, 0, [], None
    frame = {r[4]: r[3] in (2, 3) for r in rows}
    for tr, ts, _, _, pos, dur in rows:
        if tr != track:
            stack, track = [], tr
        end = ts + dur
        while stack and (ts >= stack[-1][1] or end > stack[-1][1]):
            if ts < stack[-1][1] and end > stack[-1][1] + OVERHANG_NS:
                partial += 1
            stack.pop()
        parent[pos] = stack[-1][0] if stack else None
        stack.append((pos, end))
    durs = {r[4]: r[5] for r in rows}
    child = {p: 0 for p in durs}
    for pos, par in parent.items():  # frames subtract their direct children
        if par is not None and frame[par]:
            child[par] += durs[pos]
    for pos in parent:  # others subtract their nearest non-frame descendants (torch <= 2.11)
        if frame[pos]:
            continue
        up = parent[pos]
        while up is not None and frame[up]:
            up = parent[up]
        if up is not None:
            child[up] += durs[pos]
    return {"ts": {r[4]: r[1] for r in rows}, "dur": durs, "partial": partial,
            "self": {p: durs[p] - child[p] for p in durs}}


def _check(t, events: list, ref: dict) -> None:
    store = t.store
    pos = store.file_index.tolist()
    for i, p in enumerate(pos):  # every event: exact as written
        e = events[p]
        assert store.ts[i] == _ns(e["ts"]), (p, e["ts"])
        assert store.dur[i] == max(_ns(e.get("dur", 0)), 0), (p, e.get("dur"))
    assert t.tree.diagnostics["partial_overlaps"] == ref["partial"]
    host = np.flatnonzero(np.isin(t.tree.kind, list(HOST_KINDS)) & (t.tree.ev >= 0))
    got = {pos[t.tree.ev[n]]: int(t.roll.cpu_self[n]) for n in host.tolist()}
    assert got == ref["self"]
    if ref["partial"] == 0:
        assert min(got.values(), default=0) >= 0


@pytest.mark.parametrize("name", EPOCH)
def test_epoch_peer_traces_exact(peer_dir, name):
    path = peer_dir / name
    events = _events(path.read_bytes())
    ref = reference(events)
    big = [e["ts"] for e in events if isinstance(e.get("ts"), (int, Decimal))]
    assert max(big) > 2 ** 42  # the at-risk magnitude this test is about
    _check(load_trace(path), events, ref)


# ---- a synthetic training step with 19-digit timestamps, through all three decode paths

BASE_NS = 1_700_000_000_123_456_789  # Unix epoch, ns


def _fmt(ns: int, style: int) -> str:
    """µs as a JSON number: plain with 3 decimals, an exponent, or more decimals than a ns."""
    if style == 0:
        return "%d.%03d" % divmod(ns, 1000)
    if style == 1:
        return f"{Decimal(ns).scaleb(-3):E}"
    return "%d.%03d4999" % divmod(ns, 1000)  # the digits below the ns round down


def synthetic(layers: int = 6, steps: int = 3) -> tuple[str, dict]:
    """(JSON text, true ns of each event by position): a forward on the main thread, a backward
    on pt_autograd_0, kernels on two streams; children end exactly where their parents end and
    start 1 ns after them, where a float would blur the order."""
    ev, truth = [], {}
    corr = [0]

    def x(cat, name, tid, ts, dur, args=None, pid=1):
        style = len(ev) % 3
        truth[len(ev)] = (ts, dur)
        a = json.dumps(args or {})
        ev.append('{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, "args": %s}'
                  % (cat, name, pid, tid, _fmt(ts, style), _fmt(dur, (style + 1) % 3), a))

    def op(name, tid, t, d, stream):
        x("cpu_op", name, tid, t, d, {"External id": len(ev)})
        corr[0] += 1
        x("cuda_runtime", "cudaLaunchKernel", tid, t + 1, d - 1, {"correlation": corr[0]})
        x("kernel", f"k_{name}", stream, t + d + 777, 3_001, {"correlation": corr[0], "stream": stream,
                                                               "device": 0}, pid=0)
    t = BASE_NS
    for s in range(steps):
        step0 = t
        x("user_annotation", f"ProfilerStep#{s}", 1, t, 10_000 * layers * 2 + 11)
        for layer in range(layers):
            x("cpu_op", "aten::linear", 1, t + 1, 5_003, {})
            op("aten::addmm", 1, t + 2, 5_002, 7)
            t += 5_005
        bwd = t
        x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 2, bwd, 5_001 * layers + 1)
        for layer in range(layers):
            op("aten::mm", 2, bwd + 1 + 5_001 * layer, 5_000 if layer < layers - 1 else 5_000, 8)
        t = step0 + 10_000 * layers * 2 + 11 + 333
    text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(ev) + "\n]}"
    return text, truth


def _check_truth(store, truth: dict) -> None:
    pos = store.file_index.tolist()
    assert sorted(pos) == sorted(truth)
    assert store.ts.tolist() == [truth[p][0] for p in pos]
    assert store.dur.tolist() == [truth[p][1] for p in pos]


@pytest.fixture(params=["as-text", "re-read"])
def times_by(request, monkeypatch):
    """Both ways to the digits: decoded as text (the file's head shows epoch fractions), or
    decoded as floats and the large ones read again (a head that did not show them)."""
    if request.param == "re-read":
        monkeypatch.setattr(load, "text_times", lambda data: False)
        monkeypatch.setattr(split, "text_times", lambda data: False)
    return request.param


def test_synthetic_fast_path(tmp_path, times_by):
    text, truth = synthetic()
    path = tmp_path / "epoch.json"
    path.write_text(text)
    t = load_trace(path)
    _check_truth(t.store, truth)
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    _check(t, events, reference(events))
    assert t.tree.diagnostics["partial_overlaps"] == 0 and not t.report.repairs


def test_synthetic_split_path(tmp_path, monkeypatch, times_by):
    if not forked.available():
        pytest.skip("no fork here: the two-process path cannot run")
    text, truth = synthetic(layers=40, steps=6)
    data = bytearray(text.encode())
    monkeypatch.setattr(split, "PIECE_BYTES", max(1024, len(data) // 8))
    got = split.decode_index(data, min_bytes=0)
    assert got is not None  # the two processes did it
    _check_truth(got[1], truth)
    path = tmp_path / "epoch.json"
    path.write_bytes(data)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    t = load_trace(path)
    assert "decode+index (2 processes)" in t.timings
    _check_truth(t.store, truth)
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    _check(t, events, reference(events))


def test_synthetic_tolerant_path(tmp_path, times_by):
    text, truth = synthetic()
    raw = text.encode().replace(b'"aten::linear"', b'"aten::lin\xffear"', 1)  # invalid UTF-8
    path = tmp_path / "epoch.json"
    path.write_bytes(raw)
    report = LoadReport()
    decode(path, read_bytes(path, report), report)
    assert any("UTF-8" in r for r in report.repairs)  # it did take the tolerant path
    t = load_trace(path)
    _check_truth(t.store, truth)


def test_digit_parsers_against_decimal():
    """The vectorised digit parse and the float split below 2^43 µs, against Decimal."""
    rng = np.random.default_rng(19)
    texts = [f"{w}.{f:03d}" for w, f in zip(rng.integers(0, 9 * 10 ** 15, 5000).tolist(),
                                             rng.integers(0, 1000, 5000).tolist())]
    texts += [f"{w}.{f:07d}" for w, f in zip(rng.integers(0, 10 ** 16, 2000).tolist(),
                                             rng.integers(0, 10 ** 7, 2000).tolist())]
    texts += ["-12.5", "1.5E+15", "7", "12.", "1e400", "9223372036854775.808", "0.0005", "0.0015", "0.00150001"]
    limit = (2 ** 63 - 1) // 1000 * 1000  # the documented range: int64 ns, whole µs
    want = [_ns(t) if abs(_ns(t)) <= limit else None for t in texts]
    got, ok = exact_ns_many(texts)
    assert [g if o else None for g, o in zip(got.tolist(), ok.tolist())] == want
    # floats between 2^42 and 2^43 µs with 3 decimals (Kineto's ~5e12 µs): exact without digits
    mid = [f"{w}.{f:03d}" for w, f in zip(rng.integers(2 ** 42, 2 ** 43, 20000).tolist(),
                                          rng.integers(0, 1000, 20000).tolist())]
    ns, state = ns_column([float(t) for t in mid])
    assert ns.tolist() == [_ns(t) for t in mid] and not state.any()
