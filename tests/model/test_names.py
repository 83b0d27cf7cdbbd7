"""Kernel-name decoding on names seen in real traces (Hopper, Ampere, CUTLASS, Inductor, ATen)."""
from tracetui.model.names import decode_kernel, inductor_ops, shorten_cpp


def test_nvjet_hopper():
    k = decode_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")
    assert (k.library, k.klass, k.tile, k.layout, k.arch) == ("cuBLAS (nvjet, cuBLASLt)", "gemm", "256x128", "TNT", "sm90")


def test_ampere_and_cutlass():
    k = decode_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn")
    assert (k.klass, k.tile, k.layout, k.dtype, k.arch) == ("gemm", "128x128", "tn", "bf16", "ampere")
    c = decode_kernel("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x5_tn_align8")
    assert (c.library, c.tile, c.layout) == ("CUTLASS", "64x64", "tn")


def test_inductor_ops():
    assert inductor_ops("triton_poi_fused__unsafe_view_gelu_mul_0") == (["_unsafe_view", "gelu", "mul"], False)
    ops, trunc = inductor_ops("triton_per_fused__to_copy_add_native_dropout_native_layer_norm_native_")
    assert ops[:4] == ["_to_copy", "add", "native_dropout", "native_layer_norm"] and trunc
    k = decode_kernel("triton_red_fused_sum_1")
    # classed by the work its name states; Inductor's own kind stays in variant
    assert (k.klass, k.library, k.variant, k.fused_ops) == ("reduction", "Triton (Inductor)", "reduction", ["sum"])


def test_aten_native_and_shortening():
    name = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::"
            "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl, std::array<char*, 2ul>)")
    k = decode_kernel(name)
    assert (k.library, k.klass, k.hint_op) == ("ATen native", "pointwise", "gelu")
    assert k.short.startswith("at::native::vectorized_elementwise_kernel<") and "(int" not in k.short
    assert shorten_cpp("void f<a<b>>(int)") == "f<a<…>>"


def test_user_triton_and_memcpy():
    assert decode_kernel("my_user_kernel", user_triton=True).library == "Triton (user kernel)"
    assert decode_kernel("geglu_kernel", user_triton=True).library == "Triton (tracetui)"  # the project's own
    assert decode_kernel("Memcpy HtoD (Pageable -> Device)", "memcpy").klass == "memcpy"


def _shorten_by_char(name: str, max_depth: int = 1) -> str:
    """The original character-at-a-time shortening, kept here as the reference."""
    s = name[5:] if name.startswith("void ") else name
    out, depth, paren = [], 0, 0
    for ch in s:
        if ch == "(" and depth == 0:
            paren += 1
            if paren == 1:
                continue
        if paren:
            if ch == ")":
                paren -= 1
            continue
        if ch == "<":
            depth += 1
            if depth <= max_depth + 1:
                out.append("<")
            if depth == max_depth + 1:
                out.append("…")
            continue
        if ch == ">":
            if depth <= max_depth + 1:
                out.append(">")
            depth -= 1
            continue
        if depth > max_depth:
            continue
        out.append(ch)
    return "".join(out).strip() or name


def test_shorten_by_runs_equals_by_characters():
    """The run-at-a-time shortening against the character loop on every corpus name and odd
    brackets (unbalanced ``>``, ``operator()``, parentheses inside templates)."""
    from pathlib import Path
    tsv = Path(__file__).resolve().parents[1] / "data" / "kernel_corpus.tsv"
    names = [ln.split("\t")[-1] for ln in tsv.read_text().splitlines() if ln and not ln.startswith("#")]
    names += ["a->b<c>(d)", "k<void (int)>(x)", "f<a<b<c>>>(g(h), i)", ">>(", "void ()", "x<(>)", "operator()<1>(2)"]
    for n in names:
        for depth in (0, 1, 2):
            assert shorten_cpp(n, depth) == _shorten_by_char(n, depth), n


def test_decode_cached_copies_are_independent():
    a = decode_kernel("triton_poi_fused__unsafe_view_gelu_mul_0")
    a.fused_ops.append("x")
    a.tile = "1x1"
    b = decode_kernel("triton_poi_fused__unsafe_view_gelu_mul_0")
    assert b.fused_ops == ["_unsafe_view", "gelu", "mul"] and b.tile is None


def test_tile_search_from_the_first_digit_x_digit():
    """decode_kernel reads a GEMM's tile from 3 characters before the first digit-x-digit: the
    same tile, at the same place, as ``_TILE_RE`` read from the start (random strings of digits,
    x and letters, where tiles, too-long numbers and x-runs crowd together)."""
    import random

    from tracetui.model.names import _DXD_RE, _TILE_RE
    rng = random.Random(7)
    names = ["".join(rng.choice("0123x9_a") for _ in range(rng.randrange(1, 30))) for _ in range(20000)]
    names += ["12345x6_64x64", "x1x2_128x256x64", "sm90_gemm_1x2x1_128x128"]
    for n in names:
        dxd = _DXD_RE.search(n)
        fast = _TILE_RE.search(n, max(dxd.start() - 3, 0)) if dxd else None
        slow = _TILE_RE.search(n)
        assert (fast and (fast.start(), fast.group(1))) == (slow and (slow.start(), slow.group(1))), n
    assert decode_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cluster1x2x1").tile == "128x128x64"
