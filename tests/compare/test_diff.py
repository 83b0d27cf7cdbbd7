"""Diff and fusion attribution on the bundled H200 ladder, a real before/after pair, and a
transformer block recorded eager vs compiled on the CPU."""
from __future__ import annotations

import json

import pytest

from tracetui.cli.main import main
from tracetui.model import load_trace
from tracetui.compare.changes import diff_dict
from tracetui.compare.diff import COMPILE_PREOPS, diff_traces, name_diff
from tracetui.model.names import inductor_ops

from tests.conftest import TRACES


def d(a: str, b: str) -> dict:
    return diff_dict(diff_traces(load_trace(TRACES / f"{a}.json.gz"), load_trace(TRACES / f"{b}.json.gz")))


def test_eager_vs_compile_mlp():
    r = d("mlp_eager", "mlp_compile")
    assert len(r["fused"]) == 1
    f = r["fused"][0]
    assert f["kernel"] == "triton_poi_fused__unsafe_view_gelu_mul_0" and f["matched_by"] == "name"
    assert f["ops"] == ["aten::gelu", "aten::mul"] and len(f["replaces"]) == 2
    assert any("Gelu" in n for n in f["replaces"]) and any("MulFunctor" in n for n in f["replaces"])
    assert f["saved_us"] > 0 and f["launches_saved"] == 1
    assert 49e6 < f["intermediate_bytes"] < 52e6  # the [8192, 3072] bf16 gelu output
    gemms = [k for k in r["kernels"] if k["name"].startswith("nvjet")]
    assert len(gemms) == 3 and all(k["status"] == "same" for k in gemms)
    removed = {o["name"] for o in r["removed_ops"]}
    assert {"aten::linear", "aten::t", "aten::transpose", "aten::matmul"} <= removed
    added = {o["name"] for o in r["added_ops"] if o["compile_preop"]}
    assert {"TorchDynamo Cache Lookup", "Torch-Compiled Region: 1/0", "Pregraph bytecode",
            "AOTDispatcher Runtime Wrapper Prologue"} <= added
    assert {"a": ["aten::linear", "aten::matmul", "aten::mm"], "b": ["aten::mm"]}.items() <= \
        next(c for c in r["chains"] if c["kernel"].startswith("nvjet")).items()


def test_eager_vs_compile_linear_only_cpu_side_changes():
    r = d("linear_eager", "linear_compile")
    assert [k["status"] for k in r["kernels"]] == ["same"] and not r["fused"]
    assert {"aten::linear", "aten::t"} <= {o["name"] for o in r["removed_ops"]}
    assert all(o["compile_preop"] for o in r["added_ops"])


def test_eager_vs_triton_kernel_no_dynamo_preops():
    r = d("mlp_eager", "mlp_triton")
    assert len(r["fused"]) == 1
    f = r["fused"][0]
    assert f["kernel"] == "geglu_kernel" and f["ops"] == ["aten::gelu", "aten::mul"]
    assert not any(o["compile_preop"] for o in r["added_ops"])
    assert sum(k["status"] == "same" for k in r["kernels"]) == 3


def test_eager_vs_fused_dual_gemm():
    r = d("mlp_eager", "mlp_fused")
    f = r["fused"][0]
    assert f["kernel"] == "geglu_dual_gemm_tma_kernel" and len(f["replaces"]) == 4
    assert f["ops"] == ["aten::gelu", "aten::mm", "aten::mul"]
    assert sum(n.startswith("nvjet") for n in f["replaces"]) == 2  # gate and up GEMMs
    assert [k["status"] for k in r["kernels"]].count("same") == 1  # the down projection


def test_name_diff_says_which_parts_differ():
    s = name_diff("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
                  "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn")
    assert "128x128 → 256x128" in s and "tn → nn" in s


def test_cli_diff_json_schema_and_exit_codes(capsys, tmp_path):
    assert main(["diff", str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_compile.json.gz"), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert {"a", "b", "kernels", "fused", "removed_ops", "added_ops"} <= set(j)
    assert {"name", "status", "a_us", "b_us"} <= set(j["kernels"][0])
    assert {"kernel", "replaces", "ops", "saved_us"} <= set(j["fused"][0])
    bad = tmp_path / "bad.json"
    bad.write_text("nope")
    assert main(["diff", str(bad), str(TRACES / "mlp_compile.json.gz"), "--text"]) == 2


def test_real_before_after_pair(peer_dir):
    a = load_trace(peer_dir / "trace_diff_control_control.json.gz")
    b = load_trace(peer_dir / "trace_diff_test_test.json.gz")
    r = diff_dict(diff_traces(a, b))
    statuses = {k["status"] for k in r["kernels"]}
    assert "same" in statuses and ({"added", "removed", "changed"} & statuses)
    assert r["a"]["kernels_per_step"] == sum(k["a_us"] is not None for k in r["kernels"])
    assert r["b"]["kernels_per_step"] == sum(k["b_us"] is not None for k in r["kernels"])


def test_transformer_block_eager_vs_compiled_on_cpu(tmp_path):
    """A real model, not ours: attention + MLP + layer norm. Every fused kernel's decoded ops
    must exist among the eager ops it is matched to."""
    torch = pytest.importorskip("torch")
    import torch._inductor.config as ic
    from torch import nn
    from torch.profiler import profile, record_function
    ic.cpp.enable_kernel_profile = True

    class Block(nn.Module):
        def __init__(self, d=32, h=4):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, h, batch_first=True)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(2, 8, 32)
    paths = {}
    for name, model in (("eager", block), ("compile", torch.compile(block))):
        with torch.no_grad():
            model(x)
            model(x)
            with profile(record_shapes=True) as prof:
                for _ in range(2):
                    with record_function("block_fwd"):
                        model(x)
                    prof.step()
        paths[name] = tmp_path / f"block_{name}.json"
        prof.export_chrome_trace(str(paths[name]))
    a, b = load_trace(paths["eager"]), load_trace(paths["compile"])
    res = diff_traces(a, b)
    assert res.fusions, "compiled block shows no fused kernels"
    vocab = {n.split("::")[-1] for n in a.tree.names if n.startswith("aten::")}
    for f in res.fusions:
        ops, _ = inductor_ops(f.kernel.name, vocab)
        matched = {x.op.split("::")[-1] for x in f.replaces}
        eager_ops = {n.split("::")[-1] for n in a.tree.names if n.startswith("aten::")}
        assert matched <= set(ops), (f.kernel.name, matched, ops)
        assert matched <= eager_ops
    assert any(o["name"].startswith(COMPILE_PREOPS) for o in diff_dict(res)["added_ops"])


def test_changed_kind_rules_have_reasons_and_a_catch_all():
    from tracetui.compare.changes import CHANGED_KINDS
    assert all(kind in ("timing", "implementation") and len(why) > 20 for kind, why, _ in CHANGED_KINDS)
    assert CHANGED_KINDS[-1][2](object()) is True  # every changed row gets a kind
