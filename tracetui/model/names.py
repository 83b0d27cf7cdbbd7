"""Kernel-name decoding: library, class, tile, layout, dtype; Inductor op lists; C++ shortening.

Pure string work on names as they appear in traces (Hopper nvjet, Ampere/CUTLASS, Inductor,
ATen native, cuDNN, NCCL, user Triton), so the UI and the diff read the same facts. Class and
library come from the rule table in taxonomy.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache


INDUCTOR_RE = re.compile(r"^(?:graph_\d+_)?(?:triton_(poi|red|per|tem|for|mm|bmm|spl)|(cpp))_(.*)$")
"""Inductor kernel names: Triton (GPU) ``triton_poi_fused_…_0`` and C++ (CPU, with
``cpp.enable_kernel_profile``) ``graph_0_cpp_fused_…_3``."""
_TILE_RE = re.compile(r"(?<![\dx])(\d{1,4}x\d{1,4}(?:x\d{1,4})?)(?![\dx])")
_DXD_RE = re.compile(r"\dx\d")
"""Every tile holds a digit, ``x``, a digit: where the first of these is, the leftmost tile starts
at most 3 characters before (``_TILE_RE`` read from the name's start took ~10 µs a long name)."""
_LAYOUT_RE = re.compile(r"(?:^|_)([TN]{2,3}|tn|nn|nt|tt)(?:_|$)")
_ARCH_RE = re.compile(r"(sm\d{2,3}|ampere|hopper|volta|turing|ada|blackwell)")
_ARCH_WORDS = ("sm", "ampere", "hopper", "volta", "turing", "ada", "blackwell")
"""A name holds none of these: no arch, and ``_ARCH_RE`` (slow on long names) is not run."""
_DTYPES = ("bf16", "fp16", "f16", "tf32", "fp32", "f32", "fp8", "e4m3", "e5m2", "s8", "i8", "f64", "fp64")

KNOWN_OPS = (
    "_unsafe_view", "_to_copy", "_softmax", "_log_softmax", "native_layer_norm", "native_dropout",
    "native_batch_norm", "var_mean", "convert_element_type", "scaled_dot_product", "embedding",
    "gelu", "mul", "add", "sub", "div", "silu", "relu", "tanh", "sigmoid", "exp", "log", "pow", "sqrt",
    "rsqrt", "sum", "mean", "amax", "max", "min", "softmax", "clone", "cat", "permute", "transpose",
    "expand", "view", "where", "neg", "addmm", "mm", "bmm", "copy", "fill", "zeros", "ones", "erf",
    "layer_norm", "rms_norm", "dropout", "split", "slice", "select", "index", "gather", "scatter",
    "squeeze", "unsqueeze", "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
)
"""ATen op names (without ``aten::``) that Inductor writes into fused kernel names."""

INDUCTOR_KIND = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction",
                 "tem": "template (GEMM)", "for": "foreach", "mm": "GEMM", "bmm": "GEMM", "spl": "split scan"}


@dataclass
class KernelName:
    """What a kernel's name says about it."""
    library: str
    klass: str                     # one of taxonomy.CLASSES
    short: str
    tile: str | None = None
    layout: str | None = None
    dtype: str | None = None
    arch: str | None = None
    fused_ops: list[str] = field(default_factory=list)
    truncated: bool = False        # Inductor cut the name: the last op may be partial
    hint_op: str | None = None     # the op an ATen native kernel's functor names (gelu, mul, ...)
    reason: str = ""               # why the taxonomy gave this class (its rule's reason)
    variant: str | None = None     # Inductor's kernel kind (pointwise, persistent reduction, template ...)


@lru_cache(maxsize=64)
def _words(vocab: frozenset[str]) -> tuple[str, ...]:
    """KNOWN_OPS and a trace's own op names, longest first (sorted once per vocabulary)."""
    return tuple(sorted(set(KNOWN_OPS) | vocab, key=len, reverse=True))


def inductor_ops(name: str, vocab: set[str] | None = None) -> tuple[list[str], bool]:
    """Op names in an Inductor kernel name (``triton_poi_fused__unsafe_view_gelu_mul_0``)."""
    m = INDUCTOR_RE.match(name)
    if not m:
        return [], False
    rest = m.group(3)
    if not rest.startswith("fused_"):
        return [], False
    body = rest[len("fused_"):]
    numbered = re.search(r"_\d+$", body)
    truncated = numbered is None
    if numbered:
        body = body[: numbered.start()]
    words = _words(frozenset(vocab or ()))
    ops, i = [], 0
    while i < len(body):
        for w in words:
            j = i + len(w)
            if body.startswith(w, i) and (j == len(body) or body[j] == "_"):
                ops.append(w)
                i = j + 1
                break
        else:
            j = body.find("_", i + 1)
            j = len(body) if j < 0 else j
            ops.append(body[i:j])
            i = j + 1
    return [o for o in ops if o], truncated


_CPP_SPLIT = re.compile(r"([<>()])")


def shorten_cpp(name: str, max_depth: int = 1) -> str:
    """``void ns::k<4, ns::F<...>>(int, ...)`` -> ``ns::k<4, ns::F<…>>``: drop return type, params, deep templates.

    Read a run of text at a time between the brackets (a kilobyte template name was read a
    character at a time in Python)."""
    s = name[5:] if name.startswith("void ") else name
    out, depth, paren = [], 0, 0
    for tok in _CPP_SPLIT.split(s):
        if not tok:
            continue
        if tok == "(" and (depth == 0 or paren):  # a parameter list opens at depth 0, nests in itself
            paren += 1
        elif paren:
            paren -= tok == ")"
        elif tok == "<":
            depth += 1
            if depth <= max_depth + 1:
                out.append("<")
            if depth == max_depth + 1:
                out.append("…")
        elif tok == ">":
            if depth <= max_depth + 1:
                out.append(">")
            depth -= 1
        elif depth <= max_depth:
            out.append(tok)
    return "".join(out).strip() or name


_FUNCTOR_HINTS = (("Gelu", "gelu"), ("gelu", "gelu"), ("MulFunctor", "mul"), ("mul_kernel", "mul"),
                  ("AddFunctor", "add"), ("CUDAFunctor_add", "add"), ("silu", "silu"), ("Silu", "silu"),
                  ("tanh", "tanh"), ("sigmoid", "sigmoid"), ("softmax", "softmax"), ("layer_norm", "layer_norm"),
                  ("FillFunctor", "fill"), ("copy", "copy"), ("DivFunctor", "div"), ("exp_kernel", "exp"))


def kernel_label(name: str) -> str:
    """A kernel's name for a table cell: C++ templates folded (``shorten_cpp``), led by the op an
    ATen native kernel's functor names (``mul: at::native::vectorized_elementwise_kernel<4, …>``),
    so two elementwise kernels differ in what shows."""
    short = shorten_cpp(name)
    hint = next((op for key, op in _FUNCTOR_HINTS if key in name), None) if "at::native" in name else None
    return f"{hint}: {short}" if hint else short


def decode_kernel(name: str, kind: str = "kernel", user_triton: bool = False,
                  launching_op: str | None = None) -> KernelName:
    """Decode one GPU activity name; ``kind`` is the node kind (kernel, memcpy, memset).

    Class and library come from the taxonomy (tracetui/model/taxonomy.py), which reads the
    launching op (the innermost op above the launch) before the name; this adds what the name
    itself spells out: tile, layout, dtype, arch, Inductor's fused ops, an ATen functor's op.
    Each distinct (name, kind, user kernel, op) is decoded once; the caller gets its own copy.
    """
    base = _decode(name, kind, user_triton, launching_op)
    kn = object.__new__(KernelName)  # copy.copy, without its generic dispatch (3 µs a call)
    kn.__dict__.update(base.__dict__)
    kn.fused_ops = list(base.fused_ops)
    return kn


@lru_cache(maxsize=65536)
def _decode(name: str, kind: str, user_triton: bool, launching_op: str | None) -> KernelName:
    from tracetui.model.taxonomy import classify  # noqa: PLC0415 - its rule table compiles at import (~8 ms): not every load classifies
    klass, library, reason = classify(name, kind, launching_op, user_triton)
    if kind in ("memcpy", "memset"):
        return KernelName(library=library, klass=klass, short=name, reason=reason)
    m = INDUCTOR_RE.match(name)
    if m:
        ops, trunc = inductor_ops(name)
        sub = "C++" if m.group(2) else INDUCTOR_KIND.get(m.group(1), m.group(1))
        return KernelName(library=library, klass=klass, short=name, fused_ops=ops, truncated=trunc,
                          reason=reason, variant=sub)
    low = name.lower()
    kn = KernelName(library=library, klass=klass, short=shorten_cpp(name), reason=reason)
    if "gemm" in low or "nvjet" in low or "cutlass" in low or "xmma" in low:  # tile and layout: GEMM names only
        dxd = _DXD_RE.search(name) if "x" in name else None
        tile = _TILE_RE.search(name, max(dxd.start() - 3, 0)) if dxd else None  # look-behind sees before pos
        kn.tile = tile.group(1) if tile else None
        lay = _LAYOUT_RE.findall(name) if tile else None
        kn.layout = lay[-1] if lay else None
    words = set(low.split("_"))  # a dtype is a whole '_'-separated word of the name
    kn.dtype = next((d for d in _DTYPES if d in words), None)
    arch = _ARCH_RE.search(low) if any(w in low for w in _ARCH_WORDS) else None
    kn.arch = arch.group(1) if arch else None
    if library == "ATen native":
        kn.hint_op = next((op for key, op in _FUNCTOR_HINTS if key in name), None)
    return kn
