"""The kernel taxonomy against its hand-labelled corpus (tests/data/kernel_corpus.tsv).

Every row's expected class (and library, where given) was written by hand; the corpus holds every
distinct GPU activity of the peer traces, traces/ and tests/data/, plus families those lack.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracetui.model.taxonomy import CLASSES, TABLE, classify

from tests.conftest import PEER, TRACES

DATA = Path(__file__).resolve().parents[1] / "data"


def corpus() -> list[dict]:
    lines = [ln for ln in (DATA / "kernel_corpus.tsv").read_text().splitlines() if ln and not ln.startswith("#")]
    head = lines[0].split("\t")
    return [dict(zip(head, ln.split("\t"))) for ln in lines[1:]]


ROWS = corpus()


def got(r: dict) -> tuple[str, str, str]:
    return classify(r["name"], r["kind"], r["launching_op"] or None, r["user_triton"] == "1")


def test_corpus_rows_all_pass():
    assert len(ROWS) > 800 and {r["expected"] for r in ROWS} == set(CLASSES)
    wrong = []
    for r in ROWS:
        klass, library, _ = got(r)
        if klass != r["expected"] or (r["library"] and library != r["library"]):
            wrong.append(f"{r['expected']}/{r['library'] or '*'} != {klass}/{library}: "
                         f"op={r['launching_op'] or '-'} {r['name'][:120]}")
    assert not wrong, f"{len(wrong)} of {len(ROWS)} rows:\n" + "\n".join(wrong)


def test_no_attention_or_norm_is_conv_and_no_gemm_or_conv_is_other():
    for r in ROWS:
        klass = got(r)[0]
        if r["expected"] in ("attention", "norm"):
            assert klass != "conv", r["name"]
        if r["expected"] in ("gemm", "conv"):
            assert klass != "other", r["name"]


def test_the_issue_cases():
    """Issue 19.5 as a user met it: each family by name alone, with no op to help."""
    by = {r["name"]: r["expected"] for r in ROWS}
    cases = {
        "cudnn_generated_fort_native_sdpa": "attention", "cudnn::bn_fw_tr_": "norm", "sm80_xmma_fprop_implicit_gemm": "conv",
        "sm80_xmma_wgrad_implicit_gemm": "conv", "cutlass_cudnn": "conv", "wgrad_alg0_engine": "conv", "igemm_fwd": "conv",
        "ck::kernel_grouped_conv": "conv", "Cijk_": "gemm", "bmm_E4m3": "gemm", "void fbgemm_gpu::permute": "other",
        "multimem_all_reduce_kernel": "communication", "triton__0d1d2d": "triton", "flash_fwd_kernel": "attention",
        "fmha_cutlassF": "attention", "paged_attention_v2_kernel": "attention", "ncclDevKernel_Generic": "communication",
    }
    for frag, want in cases.items():
        names = [n for n in by if frag in n]
        assert names, frag
        for n in names:
            assert classify(n)[0] == want == by[n], n
    assert classify("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32")[1] == "hipBLASLt / Tensile"  # not cuBLAS on AMD
    assert classify("igemm_fwd_gtcx35_nhwc_fp16_bx0")[1] == "MIOpen"


def test_op_before_name():
    """The launching op decides first; names that say what they are decide before the op."""
    sgemm = "volta_sgemm_64x64_nt"
    assert classify(sgemm)[0] == "gemm"
    assert classify(sgemm, launching_op="aten::convolution_backward")[0] == "conv"
    copy = next(r["name"] for r in ROWS if r["launching_op"] == "aten::addmm" and "direct_copy_kernel" in r["name"])
    assert classify(copy, launching_op="aten::addmm")[0] == "pointwise"  # the bias copy inside addmm
    assert classify("Memset (Device)", "memset", "aten::mm")[0] == "memset"
    norm_ew = next(r["name"] for r in ROWS if r["launching_op"] == "aten::native_group_norm" and "elementwise_kernel" in r["name"])
    assert classify(norm_ew, launching_op="aten::native_group_norm")[0] == "norm"
    assert classify("my_user_kernel")[0] == "other" and classify("my_user_kernel", user_triton=True)[0] == "triton"
    # the project's own Triton kernels are known by name, launched by the user or not
    assert classify("geglu_kernel", user_triton=True)[:2] == ("pointwise", "Triton (tracetui)")
    assert classify("geglu_dual_gemm_tma_kernel", user_triton=True)[:2] == ("gemm", "Triton (tracetui)")


def test_every_kernel_the_project_ships_has_a_rule():
    """Each @triton.jit kernel in kernels/ is named by a rule of its own (not the user-kernel
    fallback): the GEMM ones are gemm, the rest pointwise, as their source says."""
    import ast
    from pathlib import Path
    shipped = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "kernels").glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef) and fn.name.endswith("_kernel") and not fn.name.startswith("_") and any(
                    "jit" in ast.unparse(d) for d in fn.decorator_list):
                shipped[fn.name] = "gemm" if "gemm" in fn.name else "pointwise"
    assert len(shipped) >= 7, shipped
    for name, want in shipped.items():
        klass, library, _ = classify(name, user_triton=True)
        assert (klass, library) == (want, "Triton (tracetui)"), name
        assert name in {r["name"] for r in ROWS}, f"add {name} to tests/data/kernel_corpus.tsv"


def test_table_is_well_formed():
    assert {r.klass for r in TABLE} == set(CLASSES)
    for r in TABLE:
        assert r.on in ("kind", "name", "op", "user") and r.klass in CLASSES and len(r.reason) > 15
        re.compile(r.pattern)
    # the stages are in the documented order: kind, strong names, ops, name families, user, keywords
    order = [r.on for r in TABLE]
    first_op, last_op = order.index("op"), len(order) - 1 - order[::-1].index("op")
    assert order[:2] == ["kind", "kind"] and all(o == "op" for o in order[first_op:last_op + 1])
    assert order.index("user") > last_op


def test_corpus_covers_every_trace_activity():
    """Rerun the listing (raw JSON, not the model) on traces/ and tests/data/: a trace added there
    without labelling its kernels fails here. (The peer traces are fixed; their rows were listed
    by the same script and are checked row by row above.)"""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_kernel_corpus", DATA / "make_kernel_corpus.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    have = {(r["kind"], r["launching_op"], r["user_triton"], r["name"]) for r in ROWS if r["source"] != "hand"}
    missing = []
    for p in mk.sources(peer=False):
        for _, kind, op, user, name in mk.rows(p):
            if (kind, op, str(user), name) not in have:
                missing.append(f"{p.name}: {kind} op={op or '-'} {name[:100]}")
    assert not missing, "label these in tests/data/kernel_corpus.tsv:\n" + "\n".join(missing[:40])


@pytest.mark.parametrize("path", [DATA / "kernel_families_h200.json.gz", TRACES / "transformer_eager.json.gz",
                                  TRACES / "transformer_compile.json.gz",
                                  PEER / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"], ids=lambda p: p.name)
def test_model_path_gives_the_hand_labels(path):
    """Through load_trace (the model's own linking finds the launching op), every GPU node of the
    families recording (SDPA x4, conv, norms, compiled blocks, on an H200), of the transformer
    training steps (backward on its own thread) and of the ROCm trace gets its hand label."""
    if not path.exists():
        pytest.skip(f"{path} not present")
    import numpy as np

    from tracetui.model import load_trace
    from tracetui.read.events import GPU_KINDS
    t = load_trace(path)
    labels = {(r["kind"], r["launching_op"], r["name"]): r["expected"] for r in ROWS}
    gpu = np.nonzero(np.isin(t.tree.kind, list(GPU_KINDS)))[0]
    classes = t.kernel_classes(gpu)
    seen = set()
    for n, klass in zip(gpu.tolist(), classes):
        op = t.launching_op(n)
        key = (t.kind(n), t.name(op) if op is not None else "", t.name(n))
        assert key in labels, key
        assert klass == t.kernel_info(n).klass == labels[key], key
        seen.add(klass)
    if "families" in path.name:
        assert {"attention", "conv", "norm", "gemm", "reduction", "pointwise"} <= seen


def _variants() -> list[tuple[str, str, str | None, bool]]:
    """Every corpus row, each with every launching op and kind of the corpus, and twisted names:
    a suffix, a template argument, upper case, the name cut short, a name no rule knows."""
    base = [(r["name"], r["kind"], r["launching_op"] or None, r["user_triton"] == "1") for r in ROWS]
    ops = sorted({o for _, _, o, _ in base if o}) + [None]
    out = list(base)
    for k, (name, kind, op, user) in enumerate(base):
        out.append((name, kind, ops[k % len(ops)], not user))
        out.append((name.replace("<", f"<{k}, ", 1) if "<" in name else f"{name}_{k}", "kernel", op, user))
        out.append((name.upper(), "kernel", None, False))
        out.append((name[: max(1, len(name) // 2)], "kernel", None, user))
        out.append((f"x{name}", "kernel", None, False))  # anchored rules must not match after a prefix
    out += [("my_kernel_7", "kernel", None, False), ("", "kernel", None, False), ("gemm", "memcpy", None, False),
            ("void " * 50 + "at::native::x", "kernel", None, False)]
    # the gates read the name's UTF-8 bytes cut at bytes no gate holds (taxonomy._Gates)
    out += [("ge\x00mm_kernel", "kernel", None, False), ("gémm", "kernel", None, False),
            ("éé_gemm_é", "kernel", None, False), ("cutlass\ud800_gemm", "kernel", None, False),
            ("void at::native::elementwise_kernel<é, copy_kernel>", "kernel", "aten::addmm", False),
            ("nccl" + "\u00e9" * 3, "kernel", None, False), ("flash\u2603fwd", "kernel", None, False)]
    return out


def test_fast_path_equals_the_rules_read_one_by_one():
    """``classify`` (probes, gates, model/probes.py) answers as the table read rule by rule."""
    from tracetui.model.taxonomy import classify_by_rules
    rows = _variants()
    assert len(rows) > 5000
    wrong = [r for r in rows if classify.__wrapped__(*r) != classify_by_rules(*r)]
    assert not wrong, wrong[:5]


def test_probes_answer_as_the_regex_on_every_rule():
    """Each name rule's probes against ``re.search`` of its (lowercased) pattern, on every corpus
    name and its twists: the probes are an exact rewrite, not a heuristic."""
    from tracetui.model.probes import Probes
    from tracetui.model.taxonomy import _lowered
    names = {n.lower() for n, _, _, _ in _variants()}
    for rule in TABLE:
        if rule.on != "name":
            continue
        pat = _lowered(rule.pattern)
        rx, pr = re.compile(pat), Probes(pat)
        bad = [n for n in names if bool(rx.search(n)) != pr.search(n)]
        assert not bad, (rule.pattern, bad[:3])


def test_probes_split_and_gate():
    from tracetui.model.probes import Probes, branches, literal
    assert branches(r"a|(b|c)|[|]|\||d") == ["a", "(b|c)", "[|]", r"\|", "d"]
    assert literal(r"deep_ep::") == "deep_ep::" and literal(r"\(anon\)") == "(anon)" and literal(r"a\d") is None
    p = Probes(r"^(?:void )?nccl|cutlass_\w*cudnn|flash_fwd")
    assert p.gate is not None and all(len(g) <= 4 for g in p.gate)
    assert p.search("void nccl_x") and p.search("a_cutlass_80_cudnn") and not p.search("x void nccl")
