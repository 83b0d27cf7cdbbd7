"""Serving traces: engine step annotations become steps, labelled prefill / decode / mixed with
their batch and tokens; per-phase figures; the hint when no step marker exists. Every expected
value is read here from the raw JSON or the names the test wrote, never from the model's code."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from tracetui.model import load_trace

from tests.conftest import PEER
from tests.model.test_steps import MAIN, _write, _x, training_trace
from tests.model.test_windows import raw, reference

SGLANG = PEER.parent / "tracelens" / "inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz"
SG_MODES = {"DECODE": "decode", "EXTEND": "prefill", "MIXED": "mixed", "IDLE": "idle"}


def _vllm_name(c_reqs, c_toks, g_reqs, g_toks) -> str:
    """vLLM's detailed annotation (vllm#37524's format), as the engine writes it."""
    return (f"execute_{c_reqs + g_reqs}_context_{c_reqs}(sq{c_toks}sk{c_toks}sqsq{c_toks ** 2}sqsk{c_toks ** 2})"
            f"_generation_{g_reqs}(sq{g_toks}sk{g_toks * 100}sqsq{g_toks}sqsk{g_toks * 100})")


def test_sglang_peer_trace_step_is_labelled_from_its_annotation():
    if not SGLANG.is_file():
        pytest.skip("../shared/peer-traces is not here (fresh clone elsewhere)")
    doc = raw(SGLANG)
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("step[")]
    assert marks  # the trace's own text: "step[DECODE bs=32]"
    t = load_trace(SGLANG)
    assert t.step_choice.rule == "engine annotation" and "SGLang" in t.step_choice.description
    assert [t.name(s) for s in t.steps] == [e["name"] for e in marks]
    for s, e in zip(t.steps, marks):
        mode, *fields = e["name"][len("step["):-1].split()
        kv = dict(f.split("=") for f in fields)
        label = t.step_labels[s]
        assert (label.engine, label.phase, label.batch) == ("SGLang", SG_MODES[mode], int(kv["bs"]))
        assert label.text.startswith(f"{SG_MODES[mode]} bs={kv['bs']}")
    # the decode phase's figures are the step window's, computed from the raw events
    ref = reference(doc, re.compile(r"^step\["))
    (ph,) = t.phase_figures()
    assert ph["phase"] == "decode" and ph["steps"] == len(ref)
    assert ph["device_ns"] == sum(r["device"] for r in ref) and ph["kernels"] == sum(r["kernels"] for r in ref)


def test_sglang_complete_graph_replay_is_exact():
    """The decode step replays one hipGraphLaunch: every kernel with the launch's correlation is
    linked to it, nothing is marked unknown."""
    if not SGLANG.is_file():
        pytest.skip("../shared/peer-traces is not here (fresh clone elsewhere)")
    doc = raw(SGLANG)
    corr = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == "hipGraphLaunch"}
    replayed = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                and (e.get("args") or {}).get("correlation") in corr]
    t = load_trace(SGLANG)
    g = t.graph_gaps
    assert (g.launches, g.empty, g.linked_items) == (len(corr), 0, len(replayed))
    assert [b["verdict"] for b in t.windows.breakdowns()] != ["unknown"]


def _serving_doc(names: list[str]) -> dict:
    """A serving-shaped trace: one engine annotation per step around the training builder's real
    launches (main and autograd threads, two streams)."""
    doc = training_trace(marker="fwd_{}", steps=len(names))
    k = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation" and e["name"].startswith("fwd_"):
            e["name"] = names[k]
            k += 1
    return doc


def test_vllm_shaped_trace_steps_are_labelled(tmp_path):
    spec = [(4, 2048, 0, 0), (0, 0, 32, 32), (0, 0, 32, 32), (2, 512, 30, 30)]  # prefill, decode x2, mixed
    names = [_vllm_name(*x) for x in spec]
    p = _write(tmp_path, _serving_doc(names))
    t = load_trace(p)
    assert t.step_choice.rule == "engine annotation" and "vLLM" in t.step_choice.description
    assert [t.name(s) for s in t.steps] == names
    want = ["prefill", "decode", "decode", "mixed"]
    for s, (c, ct, g, gt), phase in zip(t.steps, spec, want):
        lab = t.step_labels[s]
        assert (lab.phase, lab.batch, lab.prefill_reqs, lab.decode_reqs, lab.prefill_tokens, lab.decode_tokens) == \
            (phase, c + g, c, g, ct, gt)
    ref = reference(raw(p), re.compile(r"^execute_"))
    assert [r["name"] for r in ref] == names
    figs = {f["phase"]: f for f in t.phase_figures()}
    assert list(figs) == ["prefill", "decode", "mixed"] and figs["decode"]["steps"] == 2
    for phase, f in figs.items():
        mine = [r for r, ph in zip(ref, want) if ph == phase]
        assert (f["kernels"], f["device_ns"]) == (sum(r["kernels"] for r in mine), sum(r["device"] for r in mine))
    # the JSON carries the labels and the phases
    d = json.loads(subprocess.run([sys.executable, "-m", "tracetui", "summary", "--json", str(p)],
                                  capture_output=True, text=True, check=True).stdout)
    assert [s["label"]["phase"] for s in d["per_step"]] == want
    assert [x["phase"] for x in d["phases"]] == ["prefill", "decode", "mixed"]


def test_vllm_new_cached_annotation_and_profiler_step_inside(tmp_path):
    """vLLM's worker calls prof.step() and then opens execute_new_N_cached_M: ProfilerStep wins,
    and each step takes its label from the annotation inside it."""
    doc = training_trace(marker="ProfilerStep#{}", steps=3)
    spec = [(3, 0), (0, 3), (1, 2)]
    for i, (new, cached) in enumerate(spec):
        t0 = 10_000.0 + 1000.0 * i
        doc["traceEvents"].append(_x("user_annotation", f"execute_new_{new}_cached_{cached}", MAIN, t0 + 1, 980.0))
    t = load_trace(_write(tmp_path, doc))
    assert t.step_choice.rule == "ProfilerStep" and t.n_steps == 3
    got = [(t.step_labels[s].phase, t.step_labels[s].prefill_reqs, t.step_labels[s].decode_reqs) for s in t.steps]
    assert got == [("prefill", 3, 0), ("decode", 0, 3), ("mixed", 1, 2)]


def test_no_steps_hint_names_the_annotation(tmp_path):
    """43 item 5: record_function('mlp_train') and no ProfilerStep -> a hint with the count and
    the --steps that would use it, and that --steps does find those steps."""
    doc = training_trace(marker="mlp_train", steps=12)
    n = sum(1 for e in doc["traceEvents"] if e.get("name") == "mlp_train")
    p = _write(tmp_path, doc)
    t = load_trace(p)
    assert t.n_steps == 0 and t.step_choice.rule == "none"
    assert f"try --steps '^mlp_train$' ({n} annotations)" in t.step_choice.hint
    assert "Torch-Compiled Region" not in t.step_choice.hint  # torch's own wrapper is never proposed
    out = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(p)],
                         capture_output=True, text=True, check=True).stdout
    assert f"--steps '^mlp_train$' ({n} annotations)" in out
    assert load_trace(p, steps="^mlp_train$").n_steps == n


def test_both_vllm_forms_in_one_trace_are_all_steps(tmp_path):
    """A trace holding vLLM's detailed form and its execute_new_N_cached_M form (two versions of the
    worker, or a mixed capture): every annotation of the engine is a step, not only the first form's."""
    names = [_vllm_name(4, 2048, 0, 0), "execute_new_0_cached_3", _vllm_name(0, 0, 32, 32), "execute_new_2_cached_0"]
    p = _write(tmp_path, _serving_doc(names))
    raw_names = [e["name"] for e in json.loads(p.read_text())["traceEvents"]
                 if e.get("cat") == "user_annotation" and e["name"].startswith("execute_")]
    t = load_trace(p)
    assert t.step_choice.rule == "engine annotation"
    assert sorted(t.name(s) for s in t.steps) == sorted(raw_names) and len(raw_names) == 4


def test_the_hint_quotes_a_name_for_the_shell(tmp_path):
    """The hint's --steps is a command the user pastes: a quote in the annotation's name stays quoted."""
    import shlex
    doc = training_trace(marker="user's step", steps=4)
    p = _write(tmp_path, doc)
    hint = load_trace(p).step_choice.hint
    arg = hint.split("try --steps ", 1)[1].rsplit(" (", 1)[0]
    assert shlex.split(arg) == ["^" + re.escape("user's step") + "$"], hint
    assert load_trace(p, steps=shlex.split(arg)[0]).n_steps == 4


def test_engine_patterns_are_linear_on_hostile_names():
    """Names come from untrusted files: every engine pattern and the hint finish fast on 100,000
    characters built to make a backtracking regex quadratic."""
    code = textwrap.dedent("""
        import time
        from tracetui.model.serving import label_of
        N = 100_000
        names = ["step[" + "a" * N, "step[DECODE " + "a" * N, "step[" + "A" * N + " bs=1",
                 "execute_" + "1" * N, "execute_1_context_1(sq" + "1" * N, "execute_new_" + "1" * N + "_cached_",
                 "prefill[" + "x=" * N, "decode[" + "bs=1 " * (N // 5), "step[DECODE " + "k=" * N + "]"]
        t0 = time.perf_counter()
        for n in names:
            label_of(n)
        assert time.perf_counter() - t0 < 1.0, time.perf_counter() - t0
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20)


def test_hint_is_linear_on_hostile_names(tmp_path):
    """No steps, and annotations named 100,000 digits + 'x' or 100,000 letters: the hint comes fast."""
    ev = []
    for i, name in enumerate(["1" * 100_000 + "x", "a" * 100_000, "1" * 100_000] * 2):
        ev.append(_x("user_annotation", name, MAIN, 10.0 + 10 * i, 5.0))
    p = _write(tmp_path, {"traceEvents": ev})
    code = textwrap.dedent(f"""
        import time
        from tracetui.model import load_trace
        t0 = time.perf_counter()
        t = load_trace({str(p)!r})
        assert t.n_steps == 0 and t.step_choice.hint.count("(2 annotations)") == 3, t.step_choice.hint[-300:]
        assert time.perf_counter() - t0 < 5.0, time.perf_counter() - t0
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20)
