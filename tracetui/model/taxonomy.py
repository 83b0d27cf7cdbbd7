"""The kernel taxonomy: one table of rules that names each GPU activity's class and library.

``classify(kernel_name, kind, launching_op, user_triton) -> (klass, library, reason)``.

Classes (``CLASSES``, in display order):

  gemm           matrix products (cuBLAS/cuBLASLt/nvjet, CUTLASS, hipBLASLt/Tensile, CK, Triton matmul)
  conv           convolutions and the cuDNN/MIOpen helper kernels they launch
  attention      fused attention (flash, memory-efficient/FMHA, cuDNN SDPA, paged, flex)
  norm           batch/layer/group/RMS/instance normalisation
  communication  collectives and peer copies (NCCL, RCCL, symmetric memory)
  pointwise      elementwise math, copies, casts, fills, cat/index/gather/scatter, optimizer steps
  reduction      sums, means, max, softmax, pooling, scans
  triton         Triton kernels the table cannot place: a user's @triton.jit kernel (its name
                 is its author's free choice) and old Inductor names (``triton__0d1d2d``) that
                 say nothing of their work
  memcpy         copy-engine transfers (``gpu_memcpy``)
  memset         ``gpu_memset``
  other          everything no rule names (sort, embedding lookups, RNG setup, sleep kernels ...)

Inductor's Triton kernels are classed by the work their name states (``triton_poi_`` pointwise,
``triton_red_``/``triton_per_`` reduction, ``triton_tem_`` GEMM template), with library
"Triton (Inductor)": a class says what the GPU does, the library who wrote the kernel, so eager
and compiled runs compare class by class (an eager gelu and its fused Triton twin are both
pointwise).

Precedence: the table is read top to bottom and the first rule that matches decides the class:

  1. the activity kind: memcpy and memset activities are what they are;
  2. names that say what they are whichever op launched them: NCCL/RCCL and other collective
     kernels; ATen copy/fill/cat kernels (a bias copied into the output inside ``aten::addmm``
     is a copy, not a GEMM); Inductor's generated names;
  3. the launching op, the innermost op above the runtime call (conv, attention, norm, GEMM and
     collective ops), so a cuDNN helper kernel or an FFT inside ``aten::cudnn_convolution`` is
     conv, and an elementwise kernel directly under ``aten::native_group_norm`` is norm;
  4. kernel-name families, specific before general (attention before CUTLASS, conv before GEMM,
     fbgemm's GEMMs before the rest of fbgemm);
  5. a kernel launched outside any op through ``cuLaunchKernel`` is a user Triton kernel;
  6. bare keywords (``gemm``, ``conv``, ``softmax`` ...) in names nothing above placed;
  7. ``other``.

The library is the deciding rule's when it names one; otherwise the first rule below it, in
table order, that matches the name and names a library (``aten::mm`` decides gemm, the
``Cijk_`` rule says hipBLASLt); else "other".
"""
from __future__ import annotations

import re
from array import array
from dataclasses import dataclass
from functools import lru_cache

from tracetui.model.probes import Probes, search


@dataclass(frozen=True)
class Rule:
    """One row: where the pattern looks (``kind``, ``name``, ``op`` or ``user``), the regex
    (``re.search``; on names, case-insensitive), the class and library it gives (library None:
    found from the name), and why."""
    on: str
    pattern: str
    klass: str
    library: str | None
    reason: str


CLASSES = ("gemm", "conv", "attention", "norm", "communication", "pointwise", "reduction", "triton",
           "memcpy", "memset", "other")
"""Every class a rule gives, in display order (summary, timeline legend)."""

_V = r"^(?:void )?"            # a C++ kernel name may start with its return type
_A = _V + r"at::native::(?:\(anonymous namespace\)::)?"   # an ATen native kernel's head


def _then(first: str, then: str) -> str:
    """``first``, word characters, then ``then`` (both made of word characters), tried only from the
    first ``first`` of each word: the same names as ``first\\w*then``, in linear time (that one
    rescanned the rest of the word from every ``first``: a 20 kB name of repeats took 0.8 s a rule)."""
    return rf"(?<!\w)(?>\w*?(?:{first}))\w*(?:{then})"


_CONV_OPS = (r"^aten::(?:_?convolution|conv\d+d|conv_transpose\d+d|_convolution_mode|cudnn_convolution|"
             r"miopen_(?:depthwise_)?convolution|mkldnn_convolution|_?slow_conv|thnn_conv|_conv_depthwise|"
             r"conv_depthwise)\w*$|^(?:Cudnn|Miopen|Mkldnn)?Convolution\w*Backward\d*$")
_ATTN_OPS = (r"^aten::(?:scaled_dot_product_attention|_scaled_dot_product_(?:flash|efficient|cudnn|fused)_attention"
             r"|_flash_attention_|_efficient_attention_|_cudnn_attention_|_scaled_dot_product_attention_math)\w*$"
             r"|^(?:aten::|higher_order::|torch::)?flex_attention\w*$"
             r"|^ScaledDotProduct\w*AttentionBackward\d*$")
_NORM_OPS = (r"^aten::(?:native_|cudnn_|miopen_|_native_|_fused_)?(?:layer|batch|group|rms|instance)_norm\w*$"
             r"|^aten::(?:_batch_norm_impl_index|_batch_norm_with_update|batch_norm_(?:stats|elemt|gather_stats"
             r"|update_stats|backward_reduce|backward_elemt))\w*$"
             r"|^(?:NativeLayerNorm|NativeBatchNorm|NativeGroupNorm|CudnnBatchNorm|MiopenBatchNorm|FusedRmsNorm"
             r"|BatchNormWithUpdate)Backward\d*$")
_GEMM_OPS = (r"^aten::(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_scaled_mm|_scaled_grouped_mm|_grouped_mm"
             r"|addmv|mv|dot|_int_mm|_addmm_activation|_weight_int[48]pack_mm\w*|_mixed_dtypes_linear"
             r"|mkldnn_rnn_layer)_?$|^mkldnn::_linear_pointwise\w*$")

TABLE: tuple[Rule, ...] = (
    # -- 1. the activity kind -------------------------------------------------------------------
    Rule("kind", r"^memcpy$", "memcpy", "CUDA runtime", "a copy-engine transfer (gpu_memcpy), whatever op asked for it"),
    Rule("kind", r"^memset$", "memset", "CUDA runtime", "a memset activity (gpu_memset), e.g. cuBLAS zeroing its workspace"),

    # -- 2. names that say what they are, whichever op launched them ----------------------------
    Rule("name", _V + r"(?:nccl|rccl)", "communication", "NCCL/RCCL",
         "an NCCL kernel (ncclKernel_*, ncclDevKernel_*; RCCL keeps the names on ROCm)"),
    Rule("name", r"(?:multimem|one_shot|two_shot)_all_reduce|multimem_(?:all_gather|reduce_scatter)|symm_mem",
         "communication", "symmetric memory (torch)", "a torch symmetric-memory collective (multimem / one-shot / two-shot)"),
    Rule("name", r"nvshmem|cross_device_reduce|custom_all_reduce|deep_ep::|mscclpp", "communication", None,
         "an NVSHMEM, vLLM custom all-reduce, DeepEP or MSCCL++ collective"),
    Rule("name", _A + r"(?:vectorized_|unrolled_)?elementwise_kernel\w*<.*(?:direct_copy_kernel|copy_kernel|FillFunctor)",
         "pointwise", "ATen native", "an ATen copy/cast/fill kernel: inside aten::addmm it copies the bias into the "
         "output, so the GEMM op above must not make it a GEMM"),
    Rule("name", _A + r"CatArrayBatchedCopy", "pointwise", "ATen native", "aten::cat's batched copy"),
    Rule("name", r"^triton_tem_\w*(?:flex_attention|flex_decoding|scaled_dot_product|attention)", "attention",
         "Triton (Inductor)", "an Inductor attention template (flex attention): named by Inductor"),
    Rule("name", r"^triton_tem_\w*convolution", "conv", "Triton (Inductor)", "an Inductor convolution template"),
    Rule("name", r"^(?:graph_\d+_)?triton_(?:tem|mm|bmm)_", "gemm", "Triton (Inductor)",
         "an Inductor matmul template (mm/addmm/bmm autotuned in Triton)"),
    Rule("name", r"^(?:graph_\d+_)?triton_(?:poi|red|per)_fused_\w*(?:layer_norm|batch_norm|group_norm|rms_norm"
         r"|_native_batch_norm_legit|instance_norm)", "norm", "Triton (Inductor)",
         "an Inductor kernel whose fused ops include a normalisation: the norm is the kernel's work"),
    Rule("name", r"^(?:graph_\d+_)?triton_(?:poi|for)_", "pointwise", "Triton (Inductor)",
         "an Inductor pointwise (poi) or foreach (for) kernel"),
    Rule("name", r"^(?:graph_\d+_)?triton_(?:red|per|spl)_", "reduction", "Triton (Inductor)",
         "an Inductor reduction (red), persistent reduction (per) or split scan (spl) kernel"),
    Rule("name", r"^triton__\d", "triton", "Triton (Inductor)",
         "an old (torch 2.0/2.1) Inductor name: triton__0d1d2d... lists argument alignment, not the work"),
    Rule("name", r"^(?:graph_\d+_)?cpp_fused_", "other", "Inductor (C++)", "an Inductor C++ kernel (CPU)"),
    # what this project ships (kernels/, tracetui.kernels): its Triton kernels by their exact names
    Rule("name", r"^geglu_dual_gemm(?:_tma)?_kernel$", "gemm", "Triton (tracetui)",
         "tracetui's fused GeGLU (kernels/geglu_gemm.py): gate and up GEMMs in one pass with gelu(gate)*up "
         "in the epilogue, so its work is GEMM work"),
    Rule("name", r"^geglu_(?:strided_|bwd_|interleaved_|interleaved_bwd_)?kernel$", "pointwise", "Triton (tracetui)",
         "tracetui's GeGLU activation kernels (kernels/geglu.py): gelu(gate)*up and its gradient, elementwise"),

    # -- 3. the launching op (innermost op above the runtime call) ------------------------------
    Rule("op", r"^aten::cudnn_convolution", "conv", "cuDNN", "launched by a cuDNN convolution op: all its kernels are cuDNN's"),
    Rule("op", r"^aten::miopen_(?:depthwise_)?convolution", "conv", "MIOpen", "launched by a MIOpen convolution op"),
    Rule("op", _CONV_OPS, "conv", None, "launched by a convolution op (forward or backward): its helper kernels "
         "(layout transforms, FFTs, split-K reductions) are the convolution's cost"),
    Rule("op", _ATTN_OPS, "attention", None, "launched by an SDPA / flash / efficient / cuDNN attention op"),
    Rule("op", _NORM_OPS, "norm", None, "launched by a batch/layer/group/RMS/instance norm op"),
    Rule("op", _GEMM_OPS, "gemm", None, "launched by a matmul op (mm/addmm/bmm/linear/_scaled_mm/_grouped_mm ...)"),
    Rule("op", r"^(?:record_param_comms|c10d::|c10d_functional::|_c10d_functional::|nccl:|symm_mem::)",
         "communication", None, "launched by a collective (record_param_comms, c10d, nccl:*)"),

    # -- 4. kernel-name families ----------------------------------------------------------------
    # attention first: FlashAttention-3 and xformers/PyTorch FMHA names also contain "cutlass"
    Rule("name", r"cudnn_generated_fort_native_sdpa|_sdpa_|^sdpa", "attention", "cuDNN",
         "cuDNN's fused SDPA (cudnn_generated_fort_native_sdpa_*_fprop/_bprop), not a convolution"),
    Rule("name", r"cudnn::fusion::(?:compute_dot_do_o|convert_dq)", "attention", "cuDNN",
         "cuDNN SDPA backward's helpers (dO·O row sums, dQ conversion)"),
    Rule("name", r"flash_fwd|flash_bwd|flash::|FlashAttn|flash_attn", "attention",
         "FlashAttention", "FlashAttention (flash_fwd/flash_bwd kernels, FA3 flash::FlashAttn*)"),
    Rule("name", r"_attn_fwd|_attn_bwd|attn_fwd_kernel", "attention", "Triton",
         "a Triton fused attention (the Triton tutorial's _attn_fwd / _attn_bwd)"),
    Rule("name", r"(?i)fmha|AttentionKernel|mha_fwd|mha_bwd|fused_attn", "attention", "FMHA (mem-efficient)",
         "a fused multi-head attention kernel (PyTorch mem-efficient fmha_cutlassF/B, xformers, CK ck_tile Fmha)"),
    Rule("name", r"(?i)paged_?attention|BatchPrefill|BatchDecode|SinglePrefill|SingleDecode|flashinfer", "attention",
         "paged attention (vLLM / FlashInfer)", "paged / batched decode attention (vLLM paged_attention_v1/v2, FlashInfer)"),
    Rule("name", r"rotary_?emb|apply_rotary", "pointwise", None,
         "rotary position embedding (vllm::rotary_embedding_kernel, ...): each element rotated by its angle"),
    Rule("name", r"moe::dev::finalize|finalizeKernel", "reduction", "TensorRT-LLM (MoE)",
         "the MoE finalize (moe::dev::finalize::finalizeKernel*): each token's weighted sum over its experts' "
         "outputs; cutlass only appears in its template arguments"),
    # norms before generic cuDNN/MIOpen: cudnn::bn_* is batch norm, not conv
    Rule("name", r"MIOpen(?:BatchNorm|LayerNorm|GroupNorm)", "norm", "MIOpen", "MIOpen batch/layer/group norm"),
    Rule("name", r"cudnn::bn_|bn_fw_|bn_bw_|(?i:batchnorm)", "norm", "cuDNN", "cuDNN batch norm (cudnn::bn_fw_tr_*, bn_bw_*, batchnorm_*)"),
    Rule("name", r"LayerNorm|layer_norm|RowwiseMoments|GammaBetaBackward|batch_norm|GroupNorm|group_norm|"
         + _then("Compute", "FusedParams") + r"|ComputeInternalGradients|rms_norm|RMSNorm|RmsNorm|"
         r"instance_norm|cuApplyLayerNorm|cuApplyRMSNorm|cuComputeGradInput|cuComputePartGradGammaBeta|"
         r"cuComputeGradGammaBeta|ln_fwd|ln_bwd|rmsnorm", "norm", None,
         "a normalisation kernel (ATen layer/group/batch/RMS norm, Apex, Transformer Engine, Liger)"),
    # convolutions before GEMMs: implicit-GEMM convolutions have "gemm" in their names
    Rule("name", _then("cutlass_", "cudnn") + r"|cask_cudnn|scudnn|cudnn_infer|cudnn_train|cudnn::(?:cnn|ops|engines_precompiled|winograd\w*|detail|gemm)::|"
         r"_cudnn(?:_infer|_train)?$|wgrad_alg\d|dgrad_alg\d|dgrad2d|dgrad_engine|wgrad_engine|"
         r"implicit_convolve|explicit_convolve|" + _V + r"fft2d_(?:r2c|c2r)|flip_filter",
         "conv", "cuDNN", "a cuDNN convolution engine or its helper (cask offsets, layout transform, winograd, FFT)"),
    Rule("name", r"xmma_(?:fprop|dgrad|wgrad)|implicit_gemm|ImplicitGemmConvolution|(?i:fprop_)", "conv", "cuDNN",
         "an implicit-GEMM convolution (sm80_xmma_fprop/dgrad/wgrad_implicit_gemm): a conv, though it says gemm"),
    Rule("name", r"^(?:void )?igemm_|naive_conv|MIOpenConv|miopenSp3AsmConv|gridwise_convolution|MIOpenCvD|"
         r"transpose_NCHW2CNHW|transpose_CNHW2NCHW", "conv", "MIOpen", "a MIOpen convolution (igemm_fwd/bwd/wrw, asm conv)"),
    Rule("name", r"^batched_transpose_\d+x\d+_|^SubTensorOp", "conv", "MIOpen",
         "MIOpen's layout transpose (NCHW<->NHWC around an NHWC solver) and set/scale-tensor kernels: "
         "PyTorch reaches MIOpen for convolutions (its norms are MIOpenBatchNorm*), so an instance "
         "with no runtime link to its op is still the convolution's"),
    Rule("name", r"xdlops_bwd_weight|bwd_weight_xdl|conv_bwd_weight", "conv", "CK (Composable Kernel)",
         "CK's backward-weight convolution (MIOpen's CK wrw solvers run kernel_batched_gemm_xdlops_bwd_weight): "
         "a conv, though its name says batched GEMM"),
    Rule("name", r"grouped_conv|GroupedConv|conv_fwd|conv_bwd", "conv", "CK (Composable Kernel)",
         "a Composable Kernel convolution (ck::kernel_grouped_conv_fwd/bwd)"),
    Rule("name", r"conv_depthwise|depthwise_conv|im2col|col2im|vol2col|col2vol|slow_conv", "conv", "ATen native",
         "ATen's own convolution (depthwise, im2col+GEMM)"),
    # GEMMs
    Rule("name", r"^nvjet", "gemm", "cuBLAS (nvjet, cuBLASLt)", "cuBLASLt's nvjet GEMMs (Hopper and later)"),
    Rule("name", _V + r"fbgemm_gpu::\w*(?:gemm|f8f8bf16|bf16bf16bf16|f8i4bf16|bf16i4bf16|i8i8bf16|f4f4bf16)",
         "gemm", "FBGEMM", "an FBGEMM GEMM (f8f8bf16 rowwise, grouped gemm)"),
    # FBGEMM's other kernels: its name contains "gemm", its work is not
    Rule("name", _V + r"fbgemm_gpu::[\w:() ]*qparam", "reduction", "FBGEMM", "FBGEMM's row-wise max for FP8 scales"),
    Rule("name", _V + r"fbgemm_gpu::[\w:() ]*(?:quantize|FP8|fp8|hfp8)", "pointwise", "FBGEMM",
         "FBGEMM (de)quantization: elementwise with a per-row scale"),
    Rule("name", _V + r"fbgemm_gpu::|split_embedding_|bounds_check_indices|permute_pooled_embs|recat_copy_async|"
         r"linearize_index|batch_index_select", "other", "FBGEMM",
         "FBGEMM sparse / table-batched embedding kernels: gathers, permutes, bucketing; no GEMM despite the name"),
    Rule("name", r"^[^<(]*cutlass", "gemm", "CUTLASS",
         "a CUTLASS kernel (cutlass_80_tensorop_*gemm, cutlass3x_sm90_*): cutlass in the kernel's own name, "
         "not only in a template argument (another kernel may take a CUTLASS type)"),
    Rule("name", _V + r"Cijk_|^(?:void )?Custom_Cijk_|hipblaslt|" + _then("rocblas_", "gem[mv]"), "gemm", "hipBLASLt / Tensile",
         "an AMD hipBLASLt/Tensile GEMM (Cijk_Ailk_Bljk_...: C[i,j] += A[i,l] B[l,j])"),
    Rule("name", r"ck::kernel_gemm|ck_tile::\w*Gemm|DeviceGemm|gemm_xdl|GemmXdl", "gemm", "CK (Composable Kernel)",
         "a Composable Kernel GEMM"),
    Rule("name", r"^bmm_", "gemm", "TensorRT-LLM (batched GEMM)",
         "a trtllm-gen batched GEMM (bmm_E4m3_..., MoE experts in FlashInfer / TensorRT-LLM)"),
    Rule("name", r"deep_gemm", "gemm", "DeepGEMM", "a DeepGEMM FP8 GEMM"),
    Rule("name", _then("magma_", "gemm"), "gemm", "MAGMA", "a MAGMA GEMM (torch.linalg)"),
    Rule("name", r"xmma_gemm|[sdhczi]\d*gemm|gcgemm|gemv|gemmk1|gemmSN|splitKreduce|cublas|scal_kernel|"
         r"epilogue::impl::globalKernel", "gemm", "cuBLAS",
         "a cuBLAS GEMM/GEMV or its split-K reduction, scaling or epilogue kernel (ampere_sgemm_*, gemv2T, ...)"),
    Rule("name", r"(?i)matmul|grouped_mm|fused_moe_kernel|_mm_kernel", "gemm", "Triton",
         "a Triton matmul (matmul_kernel, fused_moe_kernel, block-scaled FP8 matmul)"),
    # PyTorch native kernels
    Rule("name", r"softmax_warp_|cunn_SoftMax|" + _then("SoftMax", "Forward|Backward"), "reduction",
         "ATen native", "softmax: a row-wise max and sum"),
    Rule("name", _A + r"reduce_kernel|ReduceOp<", "reduction", "ATen native", "ATen's TensorIterator reduction (sum, mean, max, var, norm)"),
    Rule("name", r"max_pool|avg_pool|adaptive_average_pool|adaptive_max_pool|AvgPool|MaxPool", "reduction", "ATen native",
         "pooling: a reduction over each window"),
    Rule("name", r"nll_loss_forward", "reduction", "ATen native", "NLL loss forward: a sum over the batch"),
    # at most 16 namespaces between cub:: and the kernel: unbounded, each cub:: rescanned the rest (quadratic)
    Rule("name", r"cub::(?:\w+::){0,16}Device(?:Scan|Reduce|SegmentedReduce)|tensor_kernel_scan|cumsum|cumprod", "reduction",
         "CUB", "a CUB scan or reduction (cumsum, ...)"),
    Rule("name", r"cub::(?:\w+::){0,16}Device(?:RadixSort|Compact|Select|SegmentedSort|MergeSort)|radix_sort", "other",
         "CUB", "a CUB sort or compaction: neither elementwise nor a reduction"),
    Rule("name", _A + r"multi_tensor_apply_kernel", "pointwise", "ATen native",
         "a foreach / fused optimizer step: elementwise over many tensors"),
    Rule("name", _V + r"multi_tensor_apply_kernel", "pointwise", "Apex (multi_tensor_apply)",
         "Apex/DeepSpeed's multi-tensor optimizer step (AdamFunctor ...): elementwise over many tensors"),
    Rule("name", _A + r"(?:vectorized_|unrolled_)?elementwise_kernel|elementwise_kernel_with_index|"
         r"distribution_elementwise|fused_dropout|index_elementwise_kernel|indexSelect|indexFunc|indexAdd|"
         r"scatter_gather_elementwise|_scatter_gather|gatherKernel|masked_scatter|kernelPointwise|"
         r"where_kernel|index_put|gather_kernel|triu_tril|nll_loss_backward", "pointwise", "ATen native",
         "an ATen elementwise / index / gather / scatter kernel (one output element from a few inputs)"),
    Rule("name", _V + r"(?:at::|at_cuda_detail::|\(anonymous namespace\)::)", "other", "ATen native",
         "an ATen kernel no rule above places (searchsorted, spin_kernel, ...)"),

    # -- 5. launched outside any op through cuLaunchKernel -----------------------------------------
    Rule("user", r"", "triton", "Triton (user kernel)",
         "launched through cuLaunchKernel outside any op: a user @triton.jit kernel, classed by no guess at its name"),

    # -- 6. bare keywords -----------------------------------------------------------------------
    Rule("name", r"(?i)gemm|gemv", "gemm", None, "the name says GEMM"),
    Rule("name", r"(?i)convolution|conv[123]d|dgrad|wgrad", "conv", None, "the name says convolution"),
    Rule("name", r"(?i)attention|_attn", "attention", None, "the name says attention"),
    Rule("name", r"(?i)all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv", "communication", None,
         "the name says collective"),
    Rule("name", r"(?i)reduce|reduction|argmax|argmin|cumsum|softmax", "reduction", None, "the name says reduction"),
    Rule("name", r"(?i)elementwise|pointwise|copy|fill|cast|relu|gelu|silu|sigmoid|dropout", "pointwise", None,
         "the name says elementwise"),
)
"""The taxonomy, in precedence order (module docstring): the first matching rule decides the class."""

OTHER_REASON = "no rule matched: a kernel family the table does not know yet"

def _compile(rule: Rule) -> "re.Pattern | _OnFirstSearch":
    """Name rules match case-insensitively, done by lowercasing both sides: re.IGNORECASE on
    kilobyte-long C++ names made each search ~60x slower. A name rule's regex is compiled when
    first searched (``_OnFirstSearch``): ``classify`` answers name rules by their probes."""
    return _OnFirstSearch(_lowered(rule.pattern)) if rule.on == "name" else re.compile(rule.pattern)


class _OnFirstSearch:
    """A regex compiled at its first ``search``: the name rules' ~70 took ~5 ms of every
    summary's start, and only ``classify_by_rules`` (the tests' reference) searches them."""

    __slots__ = ("pattern", "_rx")

    def __init__(self, pattern: str) -> None:
        self.pattern, self._rx = pattern, None

    @property
    def compiled(self) -> re.Pattern:
        if self._rx is None:
            self._rx = re.compile(self.pattern)
        return self._rx

    def search(self, text: str):
        return self.compiled.search(text)


def _lowered(pattern: str) -> str:
    return pattern.lower().replace("(?i)", "").replace("(?i:", "(?:")


_COMPILED = tuple((r, _compile(r)) for r in TABLE)

_STEPS: tuple = ((), (), None)


def _steps() -> tuple:
    """(rule, regex, gate, probes) per row of ``_COMPILED`` and the gates' index (``_Gates``):
    each name rule split into cheap probes (model/probes.py; rule by rule, 10^6 distinct names
    took 170 µs each: issue 44.15, benchmarks/bench_classify.py). Built again if the table was
    replaced (tests add rows)."""
    global _STEPS
    if _STEPS[0] is not _COMPILED:
        _first_other.cache_clear()
        probes = [Probes(_lowered(r.pattern)) if r.on == "name" else None for r, _ in _COMPILED]
        steps = tuple((r, rx, p.gate if p else None, p.probes if p else None)
                      for (r, rx), p in zip(_COMPILED, probes))
        _STEPS = (_COMPILED, steps, _Gates(steps))
    return _STEPS[1:]


_QUAD = array("I")
"""4-byte unsigned integers (``itemsize`` 4 on every platform CPython targets; else gates are tested with ``in``)."""


class _Gates:
    """Which name rules can match a name: those whose gate (model/probes.py) is in it.

    Testing each rule's gate with ``in`` scanned a 250-character name ~100 times (20 µs a name).
    Every gate string is ASCII, and a gate can only lie inside a run of bytes that some gate
    holds (letters, ``_``, ``:``, space ...): the name's UTF-8 bytes are cut at every other byte
    (one ``bytes.translate`` and ``split``), and each distinct run's rules are looked up in a
    table, filled the first time a run is seen (kernel names repeat their words: ``void``,
    ``cutlass``, ``float``, ``at::native::``). An ASCII string is in a str exactly when its
    bytes are in the str's UTF-8 bytes (``surrogatepass``: a lone surrogate stays non-ASCII)."""

    RUNS = 1 << 17
    """Runs remembered; past this the table starts again (names made of hashes never repeat)."""

    def __init__(self, steps: tuple) -> None:
        self.always: set[int] = set()                  # name rules with no usable gate: always read
        self.by_code: dict[int, list[int]] = {}   # a 4-byte gate, as array("I") reads it: its rules
        self.short: dict[bytes, list[int]] = {}   # other gates: tested with ``in``
        for i, (_rule, _rx, gate, probes) in enumerate(steps):
            if probes is None:
                continue
            if gate is None or not all(g and g.isascii() for g in gate):
                self.always.add(i)
                continue
            for g in gate:
                b = g.encode("ascii")
                if len(b) == 4 and _QUAD.itemsize == 4:
                    self.by_code.setdefault(array("I", b)[0], []).append(i)
                else:
                    self.short.setdefault(b, []).append(i)
        self.codes = frozenset(self.by_code)
        held = set(b"".join(g.encode("ascii") for _r, _x, gate, _p in steps if gate for g in gate))
        sep = next(c for c in range(256) if c not in held)
        self.sep = bytes([sep])
        self.cut = bytes(c if c in held else sep for c in range(256))  # bytes.translate table
        self.runs: dict[bytes, frozenset[int]] = {}
        self.visits: dict = {}

    def visit(self, low: str, other: int) -> tuple[int, ...]:
        """The indices of ``steps`` a name must be read at, in table order: the name rules whose
        gate is in ``low`` (lowercased), those with no gate, and ``other`` (-1: none)."""
        runs = self.runs
        found: set[int] = set()
        for run in set(low.encode("utf-8", "surrogatepass").translate(self.cut).split(self.sep)):
            rules = runs.get(run)
            if rules is None:
                rules = self._rules(run)
            if rules:
                found |= rules
        key = (frozenset(found), other)
        out = self.visits.get(key)
        if out is None:
            if len(self.visits) >= self.RUNS:
                self.visits.clear()
            found |= self.always
            if other >= 0:
                found.add(other)
            out = self.visits[key] = tuple(sorted(found))
        return out

    def _rules(self, run: bytes) -> frozenset[int]:
        """The rules whose gate is in a run not seen before: its 4-byte substrings read as
        integers (four aligned reads cover every offset) and intersected in C with the gates'
        (testing 100 gates with ``in`` took 25 µs a run: names of random letters, 370 µs a name)."""
        if len(self.runs) >= self.RUNS:
            self.runs.clear()
        found: set[int] = set()
        n = len(run)
        for k in range(4):  # the 4-byte substrings at offsets k, k + 4, k + 8 ...
            quads = array("I")
            quads.frombytes(run[k:k + (n - k) // 4 * 4])
            for c in self.codes.intersection(quads):
                found.update(self.by_code[c])
        for g, idx in self.short.items():
            if g in run:
                found.update(idx)
        rules = self.runs[run] = frozenset(found)
        return rules


@lru_cache(maxsize=1 << 18)
def classify(kernel_name: str, kind: str = "kernel", launching_op: str | None = None,
             user_triton: bool = False) -> tuple[str, str, str]:
    """(class, library, reason) of one GPU activity: ``kind`` is kernel/memcpy/memset,
    ``launching_op`` the innermost op above its runtime call, ``user_triton`` True for a kernel
    launched by cuLaunchKernel outside any op.

    The table is read as ``classify_by_rules`` reads it, skipping the name rules whose gate is
    not in the name (``_Gates``) and answering each other name rule's regex by its probes (the
    same answer, tests/model/test_taxonomy.py)."""
    low = kernel_name.lower()
    decided = None
    steps, gates = _steps()
    other = _first_other(kind, launching_op, user_triton)
    kernel = kind == "kernel"
    for i in gates.visit(low, other):
        rule, rx, gate, probes = steps[i]
        if probes is None:  # a kind, op or user rule: the first that matches (``other``)
            if decided is None:
                decided = rule
                if rule.library is not None:
                    return rule.klass, _lib(rule.library, user_triton), rule.reason
            continue
        if decided is None and not kernel or decided is not None and rule.library is None:
            continue
        if not search(probes, low):
            continue
        if decided is None:
            decided = rule
            if rule.library is None:
                continue
        return decided.klass, _lib(rule.library, user_triton), decided.reason
    if decided is None:
        return "other", "other", OTHER_REASON
    return decided.klass, "other", decided.reason


@lru_cache(maxsize=4096)
def _first_other(kind: str, op: str | None, user_triton: bool) -> int:
    """The index of the first kind, op or user rule that matches (-1: none); its answer depends
    on these three alone, a few hundred distinct values in a trace."""
    for i, (rule, rx) in enumerate(_COMPILED):
        if rule.on != "name" and _matches(i, rule, rx, "", kind, op, user_triton):
            return i
    return -1


def classify_by_rules(kernel_name: str, kind: str = "kernel", launching_op: str | None = None,
                      user_triton: bool = False) -> tuple[str, str, str]:
    """``classify`` read literally, one rule at a time in table order (the module docstring's
    precedence): the reference the fast path is tested against."""
    decided = None
    low = kernel_name.lower()
    for i, (rule, rx) in enumerate(_COMPILED):
        if decided is None:
            if _matches(i, rule, rx, low, kind, launching_op, user_triton):
                decided = rule
                if rule.library is not None:
                    return rule.klass, _lib(rule.library, user_triton), rule.reason
        elif rule.on == "name" and rule.library is not None and _hit(i, low):
            return decided.klass, _lib(rule.library, user_triton), decided.reason
    if decided is None:
        return "other", "other", OTHER_REASON
    return decided.klass, "other", decided.reason


@lru_cache(maxsize=4096)
def op_class(op_name: str) -> str | None:
    """The class the op rules (section 3) give the kernels ``op_name`` launches (gemm, conv,
    attention, norm, communication), or None when no op rule names it. The diff asks this of
    CPU-only units and of the ops an Inductor name lists, so a family added to the table reaches
    the diff too."""
    for rule, rx in _COMPILED:
        if rule.on == "op" and rx.search(op_name):
            return rule.klass
    return None


def name_class(kernel_name: str) -> str:
    """The class a kernel's name alone gives (no launching op): what the name says it does."""
    return classify(kernel_name)[0]


def _lib(library: str, user_triton: bool) -> str:
    """A Triton family's kernel launched by the user (outside any op) is the user's own."""
    return "Triton (user kernel)" if user_triton and library == "Triton" else library


@lru_cache(maxsize=1 << 16)
def _hit(i: int, low: str) -> bool:
    """Whether name rule ``i`` matches the lowercased name ``low`` (``classify_by_rules``: searched
    once per name, however many ops launch it)."""
    return bool(_COMPILED[i][1].search(low))


def _matches(i: int, rule: Rule, rx: re.Pattern, name: str, kind: str, op: str | None, user_triton: bool) -> bool:
    if rule.on == "kind":
        return bool(rx.search(kind))
    if kind != "kernel":
        return False
    if rule.on == "name":
        return _hit(i, name)
    if rule.on == "op":
        return op is not None and bool(rx.search(op))
    return user_triton  # "user"
