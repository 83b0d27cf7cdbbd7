"""The memory diff (issue 40): each step's peak per device in A and B, and what held it, checked
against the raw JSON's ``[memory]`` events (``Total Allocated``, ``Bytes``, ``Addr``) walked here
in file order, independent of the model's columns."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracetui.compare.diff import diff_traces
from tracetui.compare.memory import BEFORE_STEP, memory_compare
from tracetui.model import load_trace

DATA = Path(__file__).resolve().parent.parent / "data" / "diff"
PAIR = {k: DATA / f"cpu_transformer_{k}_memory_v1021.json.gz" for k in ("eager", "compile")}


def _raw(path: Path) -> list[dict]:
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _steps(ev: list[dict]) -> list[tuple[str, int, int]]:
    st = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    st.sort(key=lambda e: e["ts"])
    return [(e["name"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in st]


def _reference(ev: list[dict]) -> dict:
    """Per (step name, device key): the peak (the highest Total Allocated in the step, or the
    level carried into it), and the bytes and count of allocations made in the step still live
    there, from a walk of the raw events with a dict of live addresses."""
    mem = [(round(e["ts"] * 1000), i, e["args"]) for i, e in enumerate(ev)
           if e.get("ph") == "i" and e.get("name") == "[memory]"]
    mem.sort(key=lambda m: (m[0], m[1]))
    out = {}
    for name, lo, hi in _steps(ev):
        for dev in {(a["Device Type"], a["Device Id"]) for _, _, a in mem}:
            mine = [(ts, a) for ts, _, a in mem if (a["Device Type"], a["Device Id"]) == dev]
            live: dict = {}
            level, best, best_own = None, None, None
            for ts, a in mine:
                if ts >= hi:
                    break
                if a["Bytes"] > 0:
                    live[a["Addr"]] = (a["Bytes"], ts)
                else:
                    live.pop(a["Addr"], None)
                if ts < lo:
                    level = a["Total Allocated"]
                    continue
                if best is None:  # the level carried into the step competes as its start
                    best = level
                    best_own = (0, 0)
                if best is None or a["Total Allocated"] > best:
                    best = a["Total Allocated"]
                    own = [b for b, t in live.values() if t >= lo]
                    best_own = (sum(own), len(own))
            if best is None:
                best, best_own = level, (0, 0)
            if best is not None:
                out[(name, dev)] = (best, best_own)
    return out


@pytest.fixture(scope="module")
def pair():
    a, b = load_trace(PAIR["eager"]), load_trace(PAIR["compile"])
    return a, b, memory_compare(a, b, top=0, fusions=diff_traces(a, b).fusions)


def test_peaks_and_step_holders_equal_the_raw_json(pair):
    a, b, j = pair
    ref = {"a": _reference(_raw(PAIR["eager"])), "b": _reference(_raw(PAIR["compile"]))}
    names = {"a": [s[0] for s in _steps(_raw(PAIR["eager"]))], "b": [s[0] for s in _steps(_raw(PAIR["compile"]))]}
    assert j["steps"] and len(j["steps"]) == min(len(names["a"]), len(names["b"]))
    for k, s in enumerate(j["steps"]):
        for side in ("a", "b"):
            assert s[f"{side}_step"] == names[side][k]  # the k-th step of A against the k-th of B
            (peak, (own_bytes, own_n)), = [v for (n, _), v in ref[side].items() if n == s[f"{side}_step"]]
            assert s[f"{side}_peak_bytes"] == peak
            rows = s["holders"]
            # the rows add up to the peak: the step's own live allocations, and the rest as one row
            assert sum(r[f"{side}_bytes"] for r in rows) == peak
            assert sum(r[f"{side}_bytes"] for r in rows if r["module"] != BEFORE_STEP) == own_bytes
            assert sum(r[f"{side}_count"] for r in rows if r["module"] != BEFORE_STEP) == own_n
        assert s["change_bytes"] == s["b_peak_bytes"] - s["a_peak_bytes"]
        ch = [abs(r["change_bytes"]) for r in s["holders"]]
        assert ch == sorted(ch, reverse=True)  # the largest changes first


@pytest.fixture(scope="module")
def leak_pair(tmp_path_factory):
    """Two CPU training recordings whose Leaky layer keeps a 4,000-byte tensor per call alive
    (tests/memory_workload.py), at widths 64 and 128: what earlier steps leaked is live at the
    start of every later step."""
    pytest.importorskip("torch")
    from tests.memory_workload import record_memory_trace
    out = tmp_path_factory.mktemp("leak_pair")
    return [record_memory_trace(out / f"w{w}.json", steps=3, width=w) for w in (64, 128)]


def test_memory_live_at_step_start_is_kept(leak_pair):
    """Megatron-Bridge#5150: dropping what was live when the step began attributed 20 of 120
    bytes. Here the earlier steps' leaked tensors are live at each later step's peak: they are
    a row of their own, and it holds what the raw walk finds allocated before the step."""
    from tests.memory_workload import LEAK_ELEMS
    pa, pb = leak_pair
    j = memory_compare(load_trace(pa), load_trace(pb), top=0)
    refs = {"a": _reference(_raw(pa)), "b": _reference(_raw(pb))}
    assert len(j["steps"]) == 3
    for k, s in enumerate(j["steps"]):
        (before,) = [r for r in s["holders"] if r["module"] == BEFORE_STEP]
        for side in ("a", "b"):
            (peak, (own, _)), = [v for (n, _), v in refs[side].items() if n == s[f"{side}_step"]]
            assert before[f"{side}_bytes"] == peak - own
            # at least the tensors leaked by the steps recorded before this one (4 bytes each element)
            assert before[f"{side}_bytes"] >= k * LEAK_ELEMS * 4
        assert sum(r["a_bytes"] for r in s["holders"]) == s["a_peak_bytes"]


def _self_alloc_per_step(path: Path) -> dict:
    """Per op name: bytes allocated (Bytes > 0) by instants whose innermost enclosing ATen op on
    their thread (start <= t < end) has that name, over the trace, per step."""
    ev = _raw(path)
    by_tid: dict = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_tid.setdefault((e["pid"], e["tid"]), []).append(e)
    tot: dict = {}
    for m in ev:
        if m.get("ph") != "i" or m.get("name") != "[memory]" or m["args"]["Bytes"] <= 0:
            continue
        t = round(m["ts"] * 1000)
        inner = [e for e in by_tid.get((m["pid"], m["tid"]), [])
                 if round(e["ts"] * 1000) <= t < round(e["ts"] * 1000) + round(e["dur"] * 1000)]
        if inner:
            name = max(inner, key=lambda e: (e["ts"], -e["dur"]))["name"]
            tot[name] = tot.get(name, 0) + m["args"]["Bytes"]
    n = len(_steps(ev))
    return {k: v / n for k, v in tot.items()}


def test_ops_and_no_longer_allocated_against_the_raw_json(pair):
    """Per op, A vs B: self allocation bytes per step, each side from the raw JSON. An op that
    allocates in A and never in B is listed as no longer allocated, with those bytes."""
    _, _, j = pair
    ref_a, ref_b = _self_alloc_per_step(PAIR["eager"]), _self_alloc_per_step(PAIR["compile"])
    assert j["ops"]
    for r in j["ops"]:
        assert r["a_bytes"] == round(ref_a.get(r["op"], 0)), r
        assert r["b_bytes"] == round(ref_b.get(r["op"], 0)), r
    gone = {r["op"] for r in j["no_longer_allocated"]}
    assert gone == {op for op, v in ref_a.items() if v > 0 and not ref_b.get(op)}
    # an intermediate a fusion removed names the kernel of B that took the op over
    assert any(r["fused_into"] for r in j["no_longer_allocated"])


def test_no_memory_events_gives_none():
    t = load_trace(Path(__file__).resolve().parents[2] / "traces" / "mlp_eager.json.gz")
    assert memory_compare(t, t) is None


@pytest.fixture(scope="module")
def batch_pair(tmp_path_factory):
    """Two eager CPU recordings with profile_memory=True at batch 2 and 4 (recorded here)."""
    pytest.importorskip("torch")
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    out = tmp_path_factory.mktemp("memdiff")
    made = []
    for batch in (2, 4):
        ws = workloads(device="cpu", batch=batch, seq=16, dim=32, heads=2, layers=2, vocab=101)
        made.append(record(ws["transformer"], "eager", out / f"b{batch}.json.gz", device="cpu", memory=True,
                           warmup_iters=1, active=2, save_key_averages=False, backward_thread=True))
    return made


def test_batch_pair_peaks_equal_the_raw_json(batch_pair):
    pa, pb = batch_pair
    j = memory_compare(load_trace(pa), load_trace(pb), top=0)
    ra, rb = _reference(_raw(pa)), _reference(_raw(pb))
    for s in j["steps"]:
        (va,) = [v for (n, _), v in ra.items() if n == s["a_step"]]
        (vb,) = [v for (n, _), v in rb.items() if n == s["b_step"]]
        assert (s["a_peak_bytes"], s["b_peak_bytes"]) == (va[0], vb[0])
        assert sum(r["a_bytes"] for r in s["holders"]) == va[0]
        assert sum(r["b_bytes"] for r in s["holders"]) == vb[0]
        assert s["b_peak_bytes"] > s["a_peak_bytes"]  # twice the batch: more activations at the peak


@pytest.fixture(scope="module")
def scoped_pair(tmp_path_factory):
    """The same recording twice: as written (with_stack / with_modules: ``nn.Module: <Class>_<k>``
    python_function frames) and with every python_function event dropped, as a recording without
    them writes it. Its ``[memory]`` instants and ops are the same events."""
    ev = _raw(PAIR["eager"])
    bare = [e for e in ev if e.get("cat") != "python_function"]
    assert any(str(e.get("name", "")).startswith("nn.Module:") for e in ev)
    assert not any(str(e.get("name", "")).startswith("nn.Module:") for e in bare)
    mem = lambda es: [(e["ts"], e["args"]) for e in es if e.get("name") == "[memory]"]  # noqa: E731
    assert mem(ev) and mem(bare) == mem(ev)
    d = tmp_path_factory.mktemp("scoped")
    paths = {"bare": d / "bare.json", "scoped": d / "scoped.json"}
    paths["bare"].write_text(json.dumps({"traceEvents": bare}))
    paths["scoped"].write_text(json.dumps({"traceEvents": ev}))
    return paths


@pytest.mark.parametrize("order", [("bare", "scoped"), ("scoped", "bare")])
def test_module_frames_recorded_by_one_side_change_no_holder(scoped_pair, order):
    """Diffing a recording with module frames against one without showed -64/+32/+32 KiB holder
    rows that were the same allocations under another module label: the memory did not change.
    Where one side records no module scopes, holders are compared by op alone, and the diff says
    why; the peaks and rows still equal the raw JSON's."""
    a, b = (load_trace(scoped_pair[k]) for k in order)
    j = memory_compare(a, b, top=0, fusions=diff_traces(a, b).fusions)
    ref = _reference(_raw(scoped_pair[order[0]]))
    assert j["steps"] and j["modules"] == {"compared": False, "recorded_by": ["AB"[order.index("scoped")]]}
    for s in j["steps"]:
        (peak, (own_bytes, _)), = [v for (n, _), v in ref.items() if n == s["a_step"]]
        assert s["a_peak_bytes"] == s["b_peak_bytes"] == peak
        assert all(r["change_bytes"] == 0 for r in s["holders"]), s["holders"][:3]
        assert {r["module"] for r in s["holders"]} <= {"-", BEFORE_STEP}
        assert sum(r["a_bytes"] for r in s["holders"] if r["module"] != BEFORE_STEP) == own_bytes
    assert j["ops"] == [] and j["no_longer_allocated"] == []  # op_stats: no module frame is an op


def test_holders_keep_their_modules_when_both_sides_record_them(pair):
    _, _, j = pair
    assert j["modules"] == {"compared": True, "recorded_by": ["A", "B"]}
    assert any(r["module"] not in ("-", BEFORE_STEP) for s in j["steps"] for r in s["holders"])
