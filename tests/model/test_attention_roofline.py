"""Attention's roofline counts FLOPs from the recorded shapes, not elementwise bytes (H200 families trace).

The recording (tests/data/record_kernel_families.py) ran causal SDPA on q, k, v of [2, 8, 256, 64]
through every backend; the reference below is written from those sizes, not from the model.
"""
from __future__ import annotations

import gzip
import json

import pytest

from tracetui.model import load_trace
from tracetui.model.perf import estimate
from tracetui.ui.details import describe

from tests.conftest import DATA

TRACE = DATA / "kernel_families_h200.json.gz"
B, H, L, D = 2, 8, 256, 64
FWD = 4 * B * H * L * L * D / 2  # QK^T and PV, 2 FLOPs per multiply-add, half the scores (causal)
FORWARD_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
               "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward",
               "aten::_scaled_dot_product_efficient_attention", "aten::_efficient_attention_forward",
               "aten::_scaled_dot_product_cudnn_attention", "aten::_cudnn_attention_forward")
BACKWARD_OPS = ("aten::_scaled_dot_product_flash_attention_backward", "aten::_flash_attention_backward",
                "aten::_scaled_dot_product_efficient_attention_backward", "aten::_efficient_attention_backward",
                "aten::_scaled_dot_product_cudnn_attention_backward", "aten::_cudnn_attention_backward")


def _raw_ops() -> dict:
    with gzip.open(TRACE, "rt") as f:
        evs = json.load(f)["traceEvents"]
    out = {}
    for e in evs:
        if e.get("cat") == "cpu_op" and e["name"] in FORWARD_OPS + BACKWARD_OPS:
            out.setdefault(e["name"], e)
    return out


def test_every_sdpa_backend_forward_and_backward():
    ops = _raw_ops()
    assert set(ops) == set(FORWARD_OPS + BACKWARD_OPS)
    for name, e in ops.items():
        r = estimate(name, e["args"], 1e-4)
        want = FWD * (2.5 if name in BACKWARD_OPS else 1)
        assert r is not None and r.flops == want, name
        assert "attention" in r.what and "causal" in r.what and "FLOPs 4·B·H·Lq·Lk·D" in r.what
        elems = 4 * B * H * L * D * (2 if name in BACKWARD_OPS else 1)  # q, k, v, out (and their grads)
        assert r.bytes == elems * 2, name  # bf16


def test_not_causal_and_unknown_shapes():
    e = _raw_ops()["aten::_scaled_dot_product_flash_attention"]
    args = dict(e["args"], **{"Concrete Inputs": ["", "", "", "0.", "False", "False", "0.125"]})
    assert estimate("aten::_scaled_dot_product_flash_attention", args, 1e-4).flops == 2 * FWD
    assert estimate("aten::_flash_attention_forward", {"Input Dims": [[], [], []]}, 1e-4) is None


@pytest.mark.parametrize("prefix", ["void pytorch_flash::flash_fwd_kernel", "fmha_cutlassF",
                                    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"])
def test_detail_pane_shows_compute_bound_attention(prefix):
    t = load_trace(TRACE)
    k = next(i for i in range(len(t.tree)) if t.kind(i) == "kernel" and t.name(i).startswith(prefix))
    text = str(describe(t, k))
    assert "class attention" in text and "roofline (attention, causal" in text
    # these shapes are small (L=256, D=64, causal): FLOP/B under the H200's ridge (989 TFLOP/s / 4.8 TB/s)
    ai, ridge = FWD / (4 * B * H * L * D * 2), 989 / 4.8
    assert ai < ridge and f"{FWD / 1e9:,.2f} GFLOP" in text and f"bound memory ({ai:,.0f} FLOP/B vs ridge {ridge:,.0f})" in text
