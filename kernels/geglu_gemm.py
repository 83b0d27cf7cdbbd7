"""Dual GEMM with a GeGLU epilogue: ``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` in one kernel.

Gate and up weights are packed once into one K-major matrix whose columns alternate gate/up, so
each tile is a single wide MMA (``[BM, 2*BN]``, what Hopper's wgmma runs best) whose accumulator
splits into the gate and up halves in registers. The epilogue applies gelu*mul there and writes
one bf16 tile: neither projection reaches HBM, and the pointwise kernel disappears.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from tracetui.kernels.geglu import SUPPORTED_DTYPES, gelu_tanh_f32, gelu_tanh_fast_f32

# Autotuner configs on a GPU: (BLOCK_M, BLOCK_N of the output, BLOCK_K, GROUP_M, stages, warps).
# The MMA is BLOCK_M x 2*BLOCK_N; stages x (BM*BK + BK*2BN) x 2 bytes must fit in shared memory.
_CONFIGS = [
    (128, 128, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 8),
    (128, 128, 32, 8, 4, 8),
    (128, 64, 64, 8, 4, 4),
    (128, 64, 64, 8, 4, 8),
    (64, 128, 64, 8, 4, 4),
    (256, 64, 64, 8, 3, 8),
    (128, 128, 128, 8, 2, 8),   # K=768 gives only 12 k-steps at BK=64: fewer, larger ones
    (128, 64, 128, 8, 3, 4),
    (128, 128, 64, 4, 4, 8),
    (128, 128, 64, 16, 4, 8),
    (128, 64, 32, 8, 4, 4),     # float32: 128 KiB, fits sm_80's 163 KiB
    (64, 64, 32, 8, 3, 4),      # float32: 72 KiB, fits sm_86's 99 KiB
]

SMEM_LIMITS = {(7, 0): 98304, (7, 5): 65536, (8, 0): 166912, (8, 6): 101376, (8, 7): 166912, (8, 9): 101376,
               (9, 0): 232448, (10, 0): 232448, (12, 0): 101376}
"""Shared memory one block may opt into, bytes, by compute capability (CUDA programming guide's
table; the sm_90 figure is the limit the H100 run's OutOfResources quoted). Used only when
neither Triton's driver nor torch reports the device's own figure."""

DEFAULT_STAGES = 3
"""Triton's num_stages when a config names none (its default on sm_80+)."""


def smem_bytes(cfg: dict, elem_size: int, epilogue: bool = False) -> int:
    """Shared memory a dual-GEMM config needs: stages x (A tile BMxBK + B tile BKx2BN) x element
    size (the software pipeline keeps one A and one B tile per stage), plus the BMxBN output
    tile the TMA kernel stages for its store when ``epilogue``. Pure: no device needed."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    stages = cfg.get("num_stages") or DEFAULT_STAGES
    return stages * (bm * bk + bk * 2 * bn) * elem_size + (bm * bn * elem_size if epilogue else 0)


def fit_config(cfg: dict, elem_size: int, limit: int | None, epilogue: bool = False) -> dict:
    """``cfg``, shrunk until ``smem_bytes`` fits ``limit``: fewer stages (down to 2) first, then
    BLOCK_K, BLOCK_N and BLOCK_M halved (down to 16). ``limit`` None (CPU interpreter): as is."""
    cfg = dict(cfg)
    if limit is None:
        return cfg
    cfg.setdefault("num_stages", DEFAULT_STAGES)
    while smem_bytes(cfg, elem_size, epilogue) > limit:
        if cfg["num_stages"] > 2:
            cfg["num_stages"] -= 1
            continue
        for name in ("BLOCK_K", "BLOCK_N", "BLOCK_M"):
            if cfg[name] > 16:
                cfg[name] //= 2
                break
        else:
            break  # the smallest tiles: nothing left to shrink
    return cfg


def smem_limit(device: torch.device | None = None) -> int | None:
    """The device's shared-memory limit per block (what Triton checks at launch), or None on the
    CPU interpreter, which has none."""
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return None
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    try:
        return int(triton.runtime.driver.active.utils.get_device_properties(idx)["max_shared_mem"])
    except Exception:  # noqa: BLE001 - another Triton layout: torch's figure, then the table
        props = torch.cuda.get_device_properties(idx)
        return getattr(props, "shared_memory_per_block_optin", 0) or SMEM_LIMITS.get((props.major, props.minor))


def configs_that_fit(configs: list, elem_size: int, limit: int | None) -> list:
    """The autotuner's configs whose shared memory fits ``limit`` for this element size; if none
    does, the first one shrunk to fit (``fit_config``), so the tuner always has one to run."""
    def as_dict(c):
        return {**c.kwargs, "num_stages": c.num_stages}
    ok = [c for c in configs if limit is None or smem_bytes(as_dict(c), elem_size) <= limit]
    if ok:
        return ok
    f = fit_config(as_dict(configs[0]), elem_size, limit)
    stages = f.pop("num_stages")
    return [triton.Config(f, num_stages=stages, num_warps=configs[0].num_warps)]


def _prune(configs, nargs, **kwargs):
    """Triton autotuner hook: only configs that fit this device for this dtype (fp32 doubles the
    bytes of a tile; a bf16-sized config crashed fp32 on the H100 with OutOfResources)."""
    x = nargs["x_ptr"]
    return configs_that_fit(configs, x.element_size(), smem_limit(x.device))


INTERPRETER_CONFIG = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2)
"""Small tiles for TRITON_INTERPRET=1 on the CPU, where tile size only costs time."""


@triton.jit
def geglu_dual_gemm_kernel(x_ptr, w_ptr, out_ptr, M, N, K,
                           sxm, sxk, swk, swn, som, pre_ptr=None, spm=0,
                           BLOCK_M: tl.constexpr = 16, BLOCK_N: tl.constexpr = 16, BLOCK_K: tl.constexpr = 16,
                           GROUP_M: tl.constexpr = 2, UPCAST: tl.constexpr = False,
                           FAST_TANH: tl.constexpr = False, SAVE_PRE: tl.constexpr = False):
    """Pointer-based dual GEMM. ``SAVE_PRE`` (training) also writes the raw accumulator, gate/up
    pre-activations interleaved, to ``pre_ptr`` [M, 2N] for the backward."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: neighbouring programs share weight tiles in L2.
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_w = pid_n * (2 * BLOCK_N) + tl.arange(0, 2 * BLOCK_N)   # packed gate/up columns
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * sxm + offs_k[None, :] * sxk
    w_ptrs = w_ptr + offs_k[:, None].to(tl.int64) * swk + offs_w[None, :] * swn
    acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & (offs_w[None, :] < 2 * N), other=0.0)
        if UPCAST:  # the CPU interpreter's dot mis-multiplies 16-bit floats; compute in fp32 there
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * sxk
        w_ptrs += BLOCK_K * swk
    if SAVE_PRE:
        p_ptrs = pre_ptr + offs_m[:, None].to(tl.int64) * spm + offs_w[None, :]
        tl.store(p_ptrs, acc.to(pre_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_w[None, :] < 2 * N))
    gate, up = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
    if FAST_TANH:
        h = gelu_tanh_fast_f32(gate) * up
    else:
        h = gelu_tanh_f32(gate) * up
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * som + offs_n[None, :]
    tl.store(out_ptrs, h.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def geglu_dual_gemm_tma_kernel(x_desc, w_desc, o_desc, M, N, K, sxm=0, swk=0, som=0, pre_ptr=None, spm=0,
                               BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 128,
                               BLOCK_K: tl.constexpr = 64, GROUP_M: tl.constexpr = 8,
                               NUM_SMS: tl.constexpr = 132, FAST_TANH: tl.constexpr = True,
                               FLATTEN: tl.constexpr = True, WARP_SPEC: tl.constexpr = False,
                               UPCAST: tl.constexpr = False, DEVICE_DESC: tl.constexpr = False,
                               SAVE_PRE: tl.constexpr = False, W_NK: tl.constexpr = False):
    """Hopper variant: persistent (one program per SM walks the tiles), operands and result moved
    by TMA descriptors (out-of-bounds rows/columns zero-filled on load, clipped on store), and the
    tile loop flattened with the k loop so the next tile's loads are in flight during the epilogue.
    At K=768 a tile has only 12 k-steps, so the per-tile prologue/epilogue is a large share.

    ``DEVICE_DESC``: ``x_desc``/``w_desc``/``o_desc`` are plain tensors (row strides ``sxm``,
    ``swk``, ``som``) and each program builds its descriptors on the device, so the host builds
    and encodes nothing per call (Triton then needs a scratch allocator: see ``fused.py``).
    ``SAVE_PRE`` (training): also store the raw [BM, 2BN] accumulator, the interleaved gate/up
    pre-activations, to ``pre_ptr`` [M, 2N] with plain stores (no extra shared-memory staging).
    ``W_NK``: the weights are [2N, K] (nn.Linear layout, rows alternating gate/up; ``swk`` is then
    its row stride), the layout of the trainable packed parameter; else K-major [K, 2N]."""
    if DEVICE_DESC:
        x_desc = tl.make_tensor_descriptor(x_desc, shape=[M, K], strides=[sxm, 1], block_shape=[BLOCK_M, BLOCK_K])
        if W_NK:
            w_desc = tl.make_tensor_descriptor(w_desc, shape=[2 * N, K], strides=[swk, 1],
                                               block_shape=[2 * BLOCK_N, BLOCK_K])
        else:
            w_desc = tl.make_tensor_descriptor(w_desc, shape=[K, 2 * N], strides=[swk, 1],
                                               block_shape=[BLOCK_K, 2 * BLOCK_N])
        o_desc = tl.make_tensor_descriptor(o_desc, shape=[M, N], strides=[som, 1], block_shape=[BLOCK_M, BLOCK_N])
    start = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_m * num_n
    group = GROUP_M * num_n
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPEC):
        first_m = (tile // group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group) % size_m
        pid_n = (tile % group) // size_m
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = x_desc.load([off_m, ki * BLOCK_K])
            if W_NK:
                b = w_desc.load([2 * off_n, ki * BLOCK_K])
            else:
                b = w_desc.load([ki * BLOCK_K, 2 * off_n])
            if UPCAST:
                a, b = a.to(tl.float32), b.to(tl.float32)
            if W_NK:
                acc = tl.dot(a, b.T, acc)
            else:
                acc = tl.dot(a, b, acc)
        if SAVE_PRE:
            offs_m = off_m + tl.arange(0, BLOCK_M)
            offs_p = 2 * off_n + tl.arange(0, 2 * BLOCK_N)
            tl.store(pre_ptr + offs_m[:, None].to(tl.int64) * spm + offs_p[None, :], acc.to(pre_ptr.dtype.element_ty),
                     mask=(offs_m[:, None] < M) & (offs_p[None, :] < 2 * N))
        gate, up = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        if FAST_TANH:
            h = gelu_tanh_fast_f32(gate) * up
        else:
            h = gelu_tanh_f32(gate) * up
        o_desc.store([off_m, off_n], h.to(o_desc.dtype))


POINTER_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8)
"""The pointer kernel's config in ``PackedGeGLU`` on a GPU (fitted to the shared memory per
dtype: fp32 drops to 2 stages on sm_90): the v5 tune's best pointer config, and the one the
H100 dispatch check timed (15.7 us at 512x768x2048). Pinned, so a new M compiles one kernel
instead of autotuning a dozen."""

TMA_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, FLATTEN=True, WARP_SPEC=False,
                  num_stages=3, num_warps=8)
"""The shipped Hopper config, chosen by kernels/tune.py on the H200 (docs/perf.md): 118.7 us at
[8192,768]x[768,2x3072] vs 146.0 for the pointer kernel and 119.6 for cuBLAS's two GEMMs.
Warp specialisation measured no gain (and fails to compile for some tiles), so it stays off."""


def _tma_ok(x2: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> bool:
    """TMA needs a Hopper-class GPU, unit inner strides and 16-byte aligned rows and bases; the
    tiles are sized for 16-bit operands (fp32 would need twice the shared memory)."""
    if x2.element_size() != 2 or not x2.is_cuda or torch.cuda.get_device_capability(x2.device)[0] < 9:
        return False
    es = x2.element_size()
    return all(t.stride(-1) == 1 and (t.stride(0) * es) % 16 == 0 and t.data_ptr() % 16 == 0
               for t in (x2, w, out))


def _launch_tma(x2, w_packed, out, M, N, K, cfg: dict, fast: bool, upcast: bool) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    xd = TensorDescriptor.from_tensor(x2, [bm, bk])
    wd = TensorDescriptor.from_tensor(w_packed, [bk, 2 * bn])
    od = TensorDescriptor.from_tensor(out, [bm, bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    sms = torch.cuda.get_device_properties(x2.device).multi_processor_count if x2.is_cuda else 4
    grid = min(sms, tiles)
    geglu_dual_gemm_tma_kernel[(grid,)](xd, wd, od, M, N, K, NUM_SMS=grid, FAST_TANH=fast, UPCAST=upcast, **cfg)


_autotuned = triton.autotune(
    configs=[triton.Config(dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g), num_stages=s, num_warps=w)
             for bm, bn, bk, g, s, w in _CONFIGS],
    key=["M", "N", "K"],  # Triton adds the tensors' dtypes to the key: fp32 tunes on its own
    prune_configs_by={"early_config_prune": _prune},
)(geglu_dual_gemm_kernel)


def pack_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """[N, K] gate and up weights (nn.Linear layout) -> one contiguous [K, 2N], columns alternating."""
    if w_gate.shape != w_up.shape or w_gate.dim() != 2:
        raise ValueError(f"geglu_gemm: weights {tuple(w_gate.shape)} and {tuple(w_up.shape)} must be equal 2-D")
    if w_gate.dtype != w_up.dtype:
        raise ValueError(f"geglu_gemm: weights are {w_gate.dtype} and {w_up.dtype}")
    n, k = w_gate.shape
    return torch.stack([w_gate, w_up], dim=1).reshape(2 * n, k).t().contiguous()


def geglu_gemm_packed(x: torch.Tensor, w_packed: torch.Tensor, config: dict | None = None,
                      out: torch.Tensor | None = None, tma: bool | None = None) -> torch.Tensor:
    """``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` for x [..., K] and ``w_packed = pack_gate_up(Wg, Wu)``.

    On Hopper with TMA-compatible layouts this runs the persistent TMA kernel (``TMA_CONFIG``);
    otherwise the pointer kernel, autotuned. ``config`` pins the tile sizes (used under the CPU
    interpreter); ``tma`` forces the kernel choice (tests run both under the interpreter).
    """
    if x.dtype not in SUPPORTED_DTYPES or w_packed.dtype != x.dtype:
        raise ValueError(f"geglu_gemm: x is {x.dtype}, weights {w_packed.dtype}: both must be one of "
                         "float32, float16, bfloat16")
    K = x.shape[-1]
    if w_packed.dim() != 2 or w_packed.shape[0] != K or w_packed.shape[1] % 2:
        raise ValueError(f"geglu_gemm: x {tuple(x.shape)} does not match packed weights {tuple(w_packed.shape)}")
    if x.device != w_packed.device:
        raise ValueError(f"geglu_gemm: x on {x.device} but weights on {w_packed.device}")
    x2 = x.reshape(-1, K)
    M, N = x2.shape[0], w_packed.shape[1] // 2
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    elif out.shape != (M, N) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"geglu_gemm: out must be contiguous [{M}, {N}] {x.dtype}")
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    upcast = interp and x.dtype != torch.float32
    if M and N and (tma if tma is not None else (not interp and _tma_ok(x2, w_packed, out))):
        cfg = dict(TMA_CONFIG) if config is None else {**TMA_CONFIG, **config}
        if interp:
            cfg.pop("num_stages", None), cfg.pop("num_warps", None)
        _launch_tma(x2, w_packed, out, M, N, K, cfg, fast=not interp, upcast=upcast)
    elif M and N:
        args = (x2, w_packed, out, M, N, K, x2.stride(0), x2.stride(1),
                w_packed.stride(0), w_packed.stride(1), out.stride(0))
        if config is None:
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
            _autotuned[grid](*args, FAST_TANH=True)
        else:
            grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
            geglu_dual_gemm_kernel[grid](*args, **config, UPCAST=upcast, FAST_TANH=not interp)
    return out.reshape(*x.shape[:-1], N)


def geglu_gemm(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, config: dict | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
    """Same, from unpacked [N, K] weights (packs them on every call: cache ``pack_gate_up`` instead)."""
    return geglu_gemm_packed(x, pack_gate_up(w_gate, w_up), config=config, out=out)


def geglu_gemm_reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """float64 reference of the same function."""
    xd = x.double()
    return torch.nn.functional.gelu(xd @ w_gate.double().T, approximate="tanh") * (xd @ w_up.double().T)
