"""Triton kernels on the CPU through TRITON_INTERPRET=1 (set in conftest), against float64 references.

Fresh random inputs of awkward sizes each run, outputs poisoned with NaN beforehand.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tracetui.kernels.geglu import geglu, geglu_reference  # noqa: E402
from tracetui.kernels.geglu_gemm import (INTERPRETER_CONFIG, geglu_gemm, geglu_gemm_packed,  # noqa: E402
                                         geglu_gemm_reference, pack_gate_up)

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}


def rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(37, 301), (3, 5, 777), (1, 2049), (4099,)])
def test_geglu_matches_float64(dtype, shape):
    g = torch.randn(shape, dtype=dtype) * 3
    u = torch.randn(shape, dtype=dtype)
    out = torch.full(shape, float("nan"), dtype=dtype)
    geglu(g, u, out=out)
    assert not out.isnan().any()
    assert rel(out, geglu_reference(g, u)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_geglu_strided_halves(dtype):
    big = torch.randn(33, 2 * 130, dtype=dtype)
    g, u = big[:, :130], big[:, 130:]
    assert not g.is_contiguous()
    assert rel(geglu(g, u), geglu_reference(g, u)) <= TOL[dtype]
    gt = torch.randn(40, 24, dtype=dtype).t()  # column-major
    ut = torch.randn(40, 24, dtype=dtype).t()
    assert rel(geglu(gt, ut), geglu_reference(gt, ut)) <= TOL[dtype]


def test_geglu_rejects_bad_input():
    with pytest.raises(ValueError, match="dtype"):
        geglu(torch.zeros(3, dtype=torch.int32), torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="shape"):
        geglu(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="float32"):
        geglu(torch.zeros(3), torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mkn", [(37, 40, 50), (3 * 11, 24, 17), (19, 33, 70)])
def test_dual_gemm_matches_float64(dtype, mkn):
    m, k, n = mkn
    x = torch.randn(m, k, dtype=dtype)
    wg = torch.randn(n, k, dtype=dtype) / k ** 0.5
    wu = torch.randn(n, k, dtype=dtype) / k ** 0.5
    out = torch.full((m, n), float("nan"), dtype=dtype)
    geglu_gemm_packed(x, pack_gate_up(wg, wu), config=INTERPRETER_CONFIG, out=out)
    assert not out.isnan().any()
    assert rel(out, geglu_gemm_reference(x, wg, wu)) <= (1e-2 if dtype != torch.float32 else 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mkn", [(37, 40, 24), (50, 56, 40), (17, 16, 8)])
def test_persistent_tma_dual_gemm_matches_float64(dtype, mkn):
    """The Hopper kernel (TMA descriptors, persistent tile loop): ragged M and N tiles, K not a
    multiple of BLOCK_K, fewer programs than tiles so each program walks several."""
    m, k, n = mkn
    x = torch.randn(m, k, dtype=dtype)
    wg = torch.randn(n, k, dtype=dtype) / k ** 0.5
    wu = torch.randn(n, k, dtype=dtype) / k ** 0.5
    out = torch.full((m, n), float("nan"), dtype=dtype)
    geglu_gemm_packed(x, pack_gate_up(wg, wu), config=INTERPRETER_CONFIG, out=out, tma=True)
    assert not out.isnan().any()
    assert rel(out, geglu_gemm_reference(x, wg, wu)) <= (1e-2 if dtype != torch.float32 else 1e-5)


def test_dual_gemm_batched_and_strided_input():
    x = torch.randn(2, 9, 2 * 24)[..., ::2]  # non-contiguous last dim
    wg, wu = torch.randn(30, 24) / 5, torch.randn(30, 24) / 5
    out = geglu_gemm(x, wg, wu, config=INTERPRETER_CONFIG)
    assert out.shape == (2, 9, 30)
    assert rel(out, geglu_gemm_reference(x, wg, wu)) <= 1e-5


def test_dual_gemm_rejects_mismatch():
    with pytest.raises(ValueError, match="does not match"):
        geglu_gemm_packed(torch.randn(4, 8), torch.randn(9, 6), config=INTERPRETER_CONFIG)
    with pytest.raises(ValueError, match="equal 2-D"):
        pack_gate_up(torch.randn(4, 8), torch.randn(4, 9))


def test_fused_module_matches_eager():
    from tracetui.workloads.models import GeGLU
    torch.manual_seed(0)
    eager = GeGLU(24, 40)
    fused = GeGLU(24, 40, act="fused")
    fused.load_state_dict(eager.state_dict())
    x = torch.randn(2, 5, 24)
    with torch.no_grad():  # the interpreter's tile config is the default there (PackedGeGLU)
        assert rel(fused(x), eager(x).double()) <= 1e-5
