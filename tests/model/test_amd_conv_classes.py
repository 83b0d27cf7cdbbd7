"""Classes per instance on a synthetic MI300 ResNet: MIOpen / CK kernels under ``aten::conv2d``
and ``aten::convolution_backward``, some launched with no runtime event (no link to an op).

The trace is generated here, and so is the truth: which kernel each conv op launched. The
reference (conv-launched µs, each name's majority class) is computed from that truth, never
through the model.
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

from tracetui.model import load_trace
from tracetui.report.summary import summary_dict

PID, GPU = 100, 0
TRANSPOSE = "batched_transpose_32x32_half"
FWD = "igemm_fwd_gtcx3_nhwc_fp16_bx0_ex1_bt256x128x32_wt32x32x8_ws2x1_wl2x2_gkgs"
BWD_DATA = "igemm_bwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wl2x2_gkgs"
SET = "SubTensorOpWithScalar1d"
WRW = ("void ck::kernel_batched_gemm_xdlops_bwd_weight<ck::GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_bwd_weight"
       "<256, ck::half_t, float, (ck::InMemoryDataOperationEnum)0>, ck::half_t, ck::half_t, true>"
       "(ck::half_t const*, ck::half_t const*, ck::half_t*)")
CK_FWD = ("void ck::kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffle<ck::GridwiseGemmMultipleABD_xdl_cshuffle"
          "<ck::half_t>, ck::half_t, ck::half_t>(ck::half_t const*, ck::half_t*)")
REDUCE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half, at::native::func_wrapper_t"
          "<c10::Half, at::native::sum_functor<c10::Half, float, c10::Half>::operator()>, unsigned int, c10::Half, 4>>"
          "(at::native::ReduceOp<c10::Half, at::native::func_wrapper_t<c10::Half, at::native::sum_functor"
          "<c10::Half, float, c10::Half>::operator()>, unsigned int, c10::Half, 4>)")
BN = "MIOpenBatchNormFwdTrainSpatial"
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
        "<c10::Half>(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
        "::{lambda()#1}::operator()() const::{lambda(c10::Half)#1}, std::array<char*, 2ul> >(int, "
        "std::array<char*, 2ul>)")
GEMM = "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3"


class Gen:
    """Writes Kineto events: host ops on one thread, kernels on one stream, launch links as
    Kineto records them (correlation on the runtime call and the kernel; External id)."""

    def __init__(self):
        self.ev, self.t, self.gt, self.ext, self.corr = [], 1000.0, 1000.0, 0, 0
        self.truth = []   # (kernel name, µs, launched by a conv op)

    def op(self, name: str, body, cat: str = "cpu_op") -> int:
        self.ext += 1
        ext, start = self.ext, self.t
        self.t += 1.0
        body(ext)
        self.t += 1.0
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": PID, "ts": start,
                        "dur": self.t - start, "args": {"External id": ext}})
        return ext

    def kernel(self, name: str, dur: float, ext: int, conv: bool, link: str = "runtime") -> None:
        """``link``: runtime (a hipLaunchKernel event), ext (no runtime event, the kernel keeps
        the op's External id) or none (no runtime event, no External id: no op to find)."""
        self.corr += 1
        if link == "runtime":
            self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "hipExtModuleLaunchKernel", "pid": PID,
                            "tid": PID, "ts": self.t, "dur": 0.5, "args": {"correlation": self.corr,
                                                                          "External id": ext}})
        self.t += 1.0
        self.gt = max(self.gt, self.t) + 0.5
        args = {"device": GPU, "stream": 0, "correlation": self.corr, "External id": ext if link != "none" else 0}
        self.ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": GPU, "tid": 0, "ts": self.gt,
                        "dur": dur, "args": args})
        self.gt += dur
        self.truth.append((name, dur, conv))


def conv_fwd(g: Gen, layer: int) -> None:
    def miopen(ext):
        unlinked = "none" if layer % 3 == 0 else "runtime"
        g.kernel(TRANSPOSE, 4.0 + layer, ext, True, unlinked)
        g.kernel(CK_FWD if layer % 2 else FWD, 60.0 + 5 * layer, ext, True)
        g.kernel(TRANSPOSE, 3.0, ext, True, "ext" if layer % 2 else "runtime")
    g.op("aten::conv2d", lambda e: g.op("aten::convolution", lambda e: g.op(
        "aten::_convolution", lambda e: g.op("aten::miopen_convolution", miopen))))
    g.op("aten::batch_norm", lambda e: g.op("aten::miopen_batch_norm",
                                            lambda ext: g.kernel(BN, 12.0, ext, False)))
    g.op("aten::relu_", lambda ext: g.kernel(RELU, 5.0, ext, False))


def conv_bwd(g: Gen, layer: int) -> None:
    def backward(ext):
        g.kernel(SET, 2.0, ext, True, "none" if layer % 2 else "runtime")
        g.kernel(TRANSPOSE, 4.0, ext, True, "none" if layer % 4 == 1 else "runtime")
        g.kernel(WRW, 80.0 + 3 * layer, ext, True, "none" if layer % 3 == 1 else "runtime")
        g.kernel(BWD_DATA, 70.0, ext, True)
        g.kernel(REDUCE, 9.0, ext, True)  # the bias gradient: a sum, but the conv's work
    g.op("autograd::engine::evaluate_function: ConvolutionBackward0", lambda e: g.op(
        "ConvolutionBackward0", lambda e: g.op("aten::convolution_backward", backward)))


def resnet_trace(path) -> list:
    g = Gen()

    def step(ext):
        for layer in range(8):
            conv_fwd(g, layer)
        g.op("aten::addmm", lambda ext: g.kernel(GEMM, 30.0, ext, False))
        g.op("aten::sum", lambda ext: g.kernel(REDUCE, 6.0, ext, False))  # the loss: a plain reduction
        for layer in reversed(range(8)):
            conv_bwd(g, layer)
    g.op("ProfilerStep#1", step, cat="user_annotation")
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}],
           "traceEvents": g.ev + [{"ph": "M", "name": "process_name", "pid": PID, "args": {"name": "python"}}]}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return g.truth


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("amd") / "resnet_mi300.json.gz"
    truth = resnet_trace(path)
    return load_trace(path), truth


def test_conv_launched_time_is_conv(resnet):
    t, truth = resnet
    conv_us = sum(d for _, d, conv in truth if conv)
    assert any(conv for _, _, conv in truth) and conv_us > 0
    # the model's per-instance classes, matched to the truth in launch order (one stream)
    k = t._gpu_nodes[t.tree.kind[t._gpu_nodes] == t.tree.kind[t._gpu_nodes[0]]]
    k = k[(t.tree.start[k]).argsort(kind="stable")]
    assert [t.name(int(n)) for n in k] == [n for n, _, _ in truth]
    cls = t.classes_of(k)
    as_conv = sum(d for (_, d, conv), c in zip(truth, cls) if conv and c == "conv")
    assert as_conv >= 0.95 * conv_us, (as_conv, conv_us)
    # and the summary's class totals add instances, not a name's first instance
    by_class = summary_dict(t, top=0)["kernel_classes"]
    assert by_class["conv"]["total_us"] == pytest.approx(sum(d for (_, d, _), c in zip(truth, cls) if c == "conv"))
    assert by_class["conv"]["total_us"] >= 0.95 * conv_us


def test_a_names_class_holds_most_of_its_time(resnet):
    """REDUCE: a sum under aten::sum (reduction) first, the bias gradient under the conv's
    backward (conv) after; the row is conv and says its classes are mixed."""
    t, truth = resnet
    us = defaultdict(lambda: defaultdict(float))
    for name, d, conv in truth:
        us[name]["conv" if conv else "not conv"] += d
    rows = {r["name"]: r for r in summary_dict(t, top=0)["kernels"]}
    reduce_row = rows[REDUCE]
    assert reduce_row["class"] == "conv"  # the first instance (aten::sum) is a reduction
    assert us[REDUCE]["conv"] > us[REDUCE]["not conv"]
    assert reduce_row["classes_us"]["conv"] == pytest.approx(us[REDUCE]["conv"])
    assert reduce_row["classes_us"]["reduction"] == pytest.approx(us[REDUCE]["not conv"])
    for name in (TRANSPOSE, SET, WRW, FWD, BWD_DATA, CK_FWD):  # conv only: one class, no split
        assert rows[name]["class"] == "conv" and "classes_us" not in rows[name], name
