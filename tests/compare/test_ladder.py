"""The story on the bundled H200 recordings: per forward, which kernels each rung launches."""
from __future__ import annotations

import pytest

from tracetui.model import load_trace
from tracetui.report.summary import attribution

from tests.conftest import TRACES


def per_step_kernels(name: str) -> list[list]:
    t = load_trace(TRACES / name)
    assert t.device_name == "NVIDIA H200" and t.n_steps == 3
    out = []
    for s in t.steps:
        ks = [g for g in t.gpu_descendants(s).tolist() if t.kind(g) == "kernel"]
        out.append([(t.name(g), t.kernel_info(g), attribution(t, g)) for g in ks])
    return out


def classes(step) -> list[str]:
    return [info.klass for _, info, _ in step]


def test_linear_eager_is_one_gemm_with_bias_epilogue():
    for step in per_step_kernels("linear_eager.json.gz"):
        assert len(step) == 1
        name, info, attr = step[0]
        assert info.klass == "gemm" and name.startswith("nvjet") and "bias" in name
        assert attr["ops"][:1] == ["aten::linear"] and attr["ops"][-1] == "aten::addmm"


def test_linear_compile_launches_the_same_gemm():
    eager = {n for step in per_step_kernels("linear_eager.json.gz") for n, _, _ in step}
    comp = {n for step in per_step_kernels("linear_compile.json.gz") for n, _, _ in step}
    assert eager == comp and len(comp) == 1


def test_mlp_eager_three_gemms_gelu_mul():
    for step in per_step_kernels("mlp_eager.json.gz"):
        assert sorted(classes(step)) == ["gemm", "gemm", "gemm", "pointwise", "pointwise"]
        hints = [info.hint_op for _, info, _ in step if info.klass == "pointwise"]
        assert hints == ["gelu", "mul"]
        ops = [attr["ops"][0] for _, _, attr in step]
        assert ops == ["aten::linear", "aten::linear", "aten::gelu", "aten::linear", "aten::mul",
                       "aten::linear"][: len(ops)] or ops.count("aten::linear") == 3


def test_mlp_compile_three_gemms_one_fused_triton():
    for step in per_step_kernels("mlp_compile.json.gz"):
        # Inductor's fused kernel is classed by its work (pointwise), its library says who wrote it
        assert sorted(classes(step)) == ["gemm", "gemm", "gemm", "pointwise"]
        fused = [(n, info) for n, info, _ in step if info.library == "Triton (Inductor)"]
        assert len(fused) == 1
        name, info = fused[0]
        assert name.startswith("triton_poi_fused") and {"gelu", "mul"} <= set(info.fused_ops)
        assert info.klass == "pointwise" and info.variant == "pointwise"


def test_mlp_triton_three_gemms_and_our_kernel():
    for step in per_step_kernels("mlp_triton.json.gz"):
        # our kernel is known by name: gelu(gate)*up is pointwise work, its library says who wrote it
        assert sorted(classes(step)) == ["gemm", "gemm", "gemm", "pointwise"]
        ours = [(n, info, a) for n, info, a in step if info.library == "Triton (tracetui)"]
        assert len(ours) == 1 and ours[0][0] == "geglu_kernel" and ours[0][1].klass == "pointwise"


def test_mlp_fused_two_kernels():
    for step in per_step_kernels("mlp_fused.json.gz"):
        names = [n for n, _, _ in step]
        assert len(names) == 2 and names[0] == "geglu_dual_gemm_tma_kernel" and names[1].startswith("nvjet")


@pytest.mark.parametrize("name", ["mlp_eager.json.gz", "mlp_triton.json.gz"])
def test_module_scopes_attribute_every_kernel(name):
    t = load_trace(TRACES / name)
    if not any(t.kind(i) == "module" for i in range(len(t.tree))):
        pytest.fail(f"{name} has no nn.Module scopes: re-record it with stacks (tracetui gen --all)")
    for step in per_step_kernels(name):
        mods = [attr["module"] for _, _, attr in step]
        assert all(mods), mods
        assert sum(m.startswith("Linear") for m in mods) == 3
