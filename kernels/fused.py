"""The fused GeGLU MLP's cheap launch path, its per-shape dispatch, and its fallbacks.

``PackedGeGLU`` holds the gate/up weights as one interleaved [2N, K] matrix (rows alternating
gate/up, nn.Linear's layout): either its own copy of two separate weights, packed once and again
only when a weight changes (its pointer, shape, strides, dtype or version), or, for training,
the trainable packed parameter itself (``PackedGeGLU.over``: nothing is ever copied; see
``gate_up.py``). It keeps one launch plan per input layout, so a call does:
a version check, a dict lookup, the output allocation (or none with ``out=``) and one kernel
launch. The persistent TMA kernel builds its descriptors on the device
(``tl.make_tensor_descriptor``), so nothing is built or encoded on the host per call.

Which kernel runs is a rule table (``DISPATCH_RULES``): knowledge as data, each rule with the
measurement behind it. Its M thresholds (``DISPATCH_THRESHOLDS``) are what the bench's dispatch
check measured (``bench.thresholds_from``), with the run that set them.

Every tile config is fitted to the device's shared memory for the dtype before it is compiled
(``geglu_gemm.fit_config``); if a launch still fails (OutOfResources, a compile error) the plan
falls back to the next path (tma -> pointer -> cublas), says so once, and keeps the reason.

Training with separate gate/up weights: ``fused_geglu`` runs ``_UnpackedGeGLUFn`` (re-packs
when the optimizer changed them). The trainable packed parameter (``gate_up.GateUpProj``)
avoids that copy and the gradients' AccumulateGrad copies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import triton

from tracetui.kernels.geglu import (
    SUPPORTED_DTYPES,
    geglu,
    geglu_backward,
    geglu_interleaved_backward,
    geglu_interleaved_kernel,
)
from tracetui.kernels.geglu_gemm import (
    INTERPRETER_CONFIG,
    POINTER_CONFIG,
    TMA_CONFIG,
    fit_config,
    geglu_dual_gemm_kernel,
    geglu_dual_gemm_tma_kernel,
    smem_bytes,
    smem_limit,
)
from tracetui.kernels.launch import Launcher, interpreting

PATHS = ("tma", "pointer", "cublas")
"""``tma``: persistent dual GEMM, device-built TMA descriptors, GeGLU epilogue (one launch).
``pointer``: the pointer-based dual GEMM (one launch; any layout, any GPU, fp32).
``cublas``: one cuBLAS GEMM into the interleaved [M, 2N] pre-activations + the pointwise kernel."""

FALLBACK = {"tma": "pointer", "pointer": "cublas"}
"""Where a plan goes when its path fails to build or launch on this device (cuBLAS has no tiles)."""

DISPATCH_THRESHOLDS = {
    "cublas_max_m": 64,
    "cublas_source": "not measured: no run has timed M <= 64 yet (the bench's m=64 row sets it)",
    "pointer_max_m": 512,
    "pointer_source": "H200 run v7, 2026-12-05 (docs/bench_h200_v7.json; bench.thresholds_from of it): dual "
                      "GEMM at 512x768x2048 pointer 23.0 us, TMA 36.2, cuBLAS 37.1; at 2048x768x3072 TMA 36.1 "
                      "beat pointer 43.2. The H100 run agreed (512: pointer 15.7 vs TMA 17.8; 2048: TMA 36.8 vs "
                      "pointer 39.4); H200 run v6 had pointer ahead at 2048 too (42.6 vs 47.0), host-bound "
                      "there (GPU us ~ CPU issue us)",
}
"""The M thresholds of the rule table and the run that set each (``bench.thresholds_from`` of
that run's JSON gives these numbers; tests/kernels check they agree)."""
CUBLAS_MAX_M = DISPATCH_THRESHOLDS["cublas_max_m"]
POINTER_MAX_M = DISPATCH_THRESHOLDS["pointer_max_m"]


@dataclass(frozen=True)
class Case:
    """What the dispatch looks at: problem size, dtype, and whether TMA can run here."""
    m: int
    n: int
    k: int
    dtype: torch.dtype
    tma: bool  # Hopper-class GPU and TMA-compatible layouts (unit inner stride, 16-byte rows/bases)


@dataclass(frozen=True)
class Rule:
    path: str
    when: str
    reason: str
    test: Callable[[Case], bool]


DISPATCH_RULES: tuple[Rule, ...] = (
    Rule("cublas", f"M <= {CUBLAS_MAX_M}",
         "A 128-row tile would be mostly padding and the work is bound by reading the weights, "
         "which cuBLAS's small-M kernels do better than a tile sized for M in the thousands. "
         f"Threshold: {DISPATCH_THRESHOLDS['cublas_source']}.",
         lambda c: c.m <= CUBLAS_MAX_M),
    Rule("pointer", "dtype is float32",
         "TMA_CONFIG's tiles are sized for 16-bit operands; the pointer kernel runs fp32 through "
         "tf32 tl.dot (rel. err 1.6e-3, bench v1-v5) with its config fitted to the shared memory "
         "(the H100 run's OutOfResources: 294,912 B needed, 232,448 B there).",
         lambda c: c.dtype == torch.float32),
    Rule("pointer", "no TMA here: not a Hopper-class GPU (or the CPU interpreter), or a layout TMA "
         "cannot take (inner stride != 1, rows or base not 16-byte aligned)",
         "TMA descriptors need sm_90+ and aligned rows; the pointer kernel takes any strides.",
         lambda c: not c.tma),
    Rule("pointer", f"M <= {POINTER_MAX_M} (16-bit, Hopper)",
         "Few tiles (M/128 x N/128 under the SM count): the persistent TMA kernel's per-program "
         "descriptor setup is not paid back, and the plain grid of the pointer kernel wins. "
         f"Threshold: {DISPATCH_THRESHOLDS['pointer_source']}.",
         lambda c: c.m <= POINTER_MAX_M),
    Rule("tma", "otherwise (16-bit, Hopper, aligned, M > %d)" % POINTER_MAX_M,
         "H200 v5 tune: 118.7 us at 8192x768x2x3072 = 651 TFLOP/s vs 146.0 pointer kernel and 119.6 "
         "cuBLAS gate+up; issue 26 check: fused beats eager and every compile mode at M=8192 and "
         "16384. At M=512 and 2048 it lost on host launch cost, not GPU work: under CUDA graphs "
         "(bench v5) fused 22.3 us vs 25.0 cuBLAS+pointwise vs 27.5 eager at 512x768x2048, 49.2 vs "
         "60.8 vs 68.3 at 2048x768x3072, and the dual GEMM alone was 14.4 us in tune but 40.1 with "
         "host descriptors built per call. Device-built descriptors remove that host work; the "
         "bench's m=512/2048 rows re-check this rule.",
         lambda c: True),
)


def choose(case: Case) -> tuple[str, Rule]:
    """The first rule of ``DISPATCH_RULES`` that holds for ``case``: (path, rule)."""
    for rule in DISPATCH_RULES:
        if rule.test(case):
            return rule.path, rule
    raise AssertionError("the last rule always holds")


# --- Triton's scratch allocator for device-side descriptors ---------------------------------

class ScratchAllocator:
    """Triton calls this at each launch of a kernel that builds descriptors on the device, for
    global scratch to hold them. One grow-only buffer per (device, stream): kernels on one
    stream run in order, so reusing it is safe, and a call costs a dict lookup, not an
    allocation. Outgrown buffers are kept, since a captured CUDA graph may still point at them."""

    def __init__(self, alloc=None, current_device=None) -> None:
        self.buffers: dict = {}
        self.retired: list = []
        self.allocations = 0
        self._alloc = alloc or (lambda n: torch.empty(n, dtype=torch.int8, device="cuda"))
        self._device = current_device or torch.cuda.current_device

    def __call__(self, size: int, alignment: int, stream) -> torch.Tensor:
        key = (self._device(), stream)
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < size:
            if buf is not None:
                self.retired.append(buf)
            buf = self._alloc(max(size, 2 * (buf.numel() if buf is not None else 0), 1 << 16))
            self.buffers[key] = buf
            self.allocations += 1
        return buf


SCRATCH = ScratchAllocator()
"""The process's scratch allocator for device-built descriptors (registered by ensure_allocator)."""


try:
    from triton.runtime._allocation import NullAllocator as _NullAllocator
    from triton.runtime._allocation import _allocator as _ALLOCATOR_VAR
except ImportError:  # another Triton layout: set ours at every TMA launch
    _NullAllocator, _ALLOCATOR_VAR = None, None


def ensure_allocator() -> None:
    """Register ``SCRATCH`` with Triton unless an allocator is already set in this context
    (Triton keeps it in a ContextVar, so a new thread starts without one). Called per TMA launch:
    one ContextVar read."""
    if _ALLOCATOR_VAR is not None and not isinstance(_ALLOCATOR_VAR.get(), _NullAllocator):
        return
    triton.set_allocator(SCRATCH)


# --- Prepared weights and launch plans ------------------------------------------------------

def _tensor_key(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device, t._version)


def _tma_capable(device: torch.device) -> bool:
    return device.type == "cuda" and not interpreting() and torch.cuda.get_device_capability(device)[0] >= 9


def _aligned(t: torch.Tensor) -> bool:
    return t.stride(-1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


class Plan:
    """Everything one input layout needs to launch, computed once: the path, the rule that
    chose it, the grid and the kernel's keyword arguments."""

    def __init__(self, owner: "PackedGeGLU", m: int, dtype: torch.dtype, aligned: bool, save_pre: bool,
                 path: str | None):
        self.m = m
        n, k = owner.n, owner.k
        tma_ok = owner.tma_capable and aligned and dtype != torch.float32
        if path is None:
            path, rule = choose(Case(m, n, k, dtype, tma_ok))
        else:
            rule = None
        if path not in PATHS:
            raise ValueError(f"geglu: unknown path {path!r} (choose from {', '.join(PATHS)})")
        if path == "tma" and owner.device.type == "cuda" and not tma_ok:
            raise ValueError("geglu: the tma path needs a Hopper-class GPU, 16-bit operands and 16-byte "
                             "aligned rows and bases")
        self.path, self.rule = path, rule
        self.launched = False
        self.fallback: str | None = None
        interp = interpreting()
        upcast = interp and dtype != torch.float32
        self.workspace = None
        self.config: dict | None = None  # the tile config as launched (fitted to shared memory)
        es = torch.empty((), dtype=dtype).element_size()
        self.smem: int | None = None  # shared-memory bytes of the launched config (smem_bytes)
        if path == "tma":
            cfg = fit_config({**TMA_CONFIG, **(owner.config or {})}, es, owner.smem_limit, epilogue=True)
            self.config, self.smem = dict(cfg), smem_bytes(cfg, es, epilogue=True)
            if interp:
                cfg.pop("num_stages", None), cfg.pop("num_warps", None)
            self.needs_allocator = not interp
            tiles = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
            grid = max(1, min(owner.sms, tiles))
            self.grid = (grid,)
            self.kwargs = dict(cfg, NUM_SMS=grid, FAST_TANH=not interp, UPCAST=upcast, DEVICE_DESC=True,
                               SAVE_PRE=save_pre, W_NK=True)
        elif path == "pointer":
            cfg = fit_config(owner.config or POINTER_CONFIG, es, owner.smem_limit)
            self.config, self.smem = dict(cfg), smem_bytes(cfg, es)
            if interp:
                cfg.pop("num_stages", None), cfg.pop("num_warps", None)
            self.kernel = _POINTER
            self.grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]),)
            self.kwargs = dict(cfg, UPCAST=upcast, FAST_TANH=not interp, SAVE_PRE=save_pre)
        else:
            self.block = 1024
            total = m * n
            self.grid = (max(1, triton.cdiv(total, self.block)),)
            self.n_full = total // self.block
            if not save_pre:  # inference: the intermediate lives in the plan, reused call to call
                self.workspace = torch.empty((m, 2 * n), dtype=dtype, device=owner.device)

    def launch(self, owner: "PackedGeGLU", x2: torch.Tensor, out: torch.Tensor, pre: torch.Tensor | None) -> None:
        LAUNCHERS[self.path](self, owner, x2, out, pre)


def _launch_tma(plan: Plan, owner, x2, out, pre) -> None:
    if plan.needs_allocator:
        ensure_allocator()
    wp, m, n, k = owner.w_packed, plan.m, owner.n, owner.k
    p, sp = (out, 0) if pre is None else (pre, pre.stride(0))
    _TMA[plan.grid](x2, wp, out, m, n, k, x2.stride(0), wp.stride(0), out.stride(0), p, sp,
                                          **plan.kwargs)


def _launch_pointer(plan: Plan, owner, x2, out, pre) -> None:
    wp, m, n, k = owner.w_packed, plan.m, owner.n, owner.k
    p, sp = (out, 0) if pre is None else (pre, pre.stride(0))
    # wp is [2N, K]: the kernel walks it as K-major through the strides (k: stride(1), n: stride(0))
    plan.kernel[plan.grid](x2, wp, out, m, n, k, x2.stride(0), x2.stride(1), wp.stride(1), wp.stride(0),
                           out.stride(0), p, sp, **plan.kwargs)


def _launch_cublas(plan: Plan, owner, x2, out, pre) -> None:
    m, n = plan.m, owner.n
    p = plan.workspace if pre is None else pre
    with torch.no_grad():  # like the Triton paths: no autograd here (the autograd Functions have it)
        torch.mm(x2, owner.w_packed.t(), out=p)
    if m * n:
        _INTERLEAVE[plan.grid](p, out, m * n, plan.n_full, BLOCK=plan.block, num_warps=4)


_TMA = Launcher(geglu_dual_gemm_tma_kernel)
_POINTER = Launcher(geglu_dual_gemm_kernel)
_INTERLEAVE = Launcher(geglu_interleaved_kernel)
"""Each path's kernel behind a ``Launcher``: a plan's later launches skip the JIT's binding."""

LAUNCHERS: dict[str, Callable] = {"tma": _launch_tma, "pointer": _launch_pointer, "cublas": _launch_cublas}
"""One launcher per path (tests inject a failing one to check the fallback on the CPU)."""


class PackedGeGLU:
    """Gate/up weights prepared for the fused kernels as one [2N, K] matrix whose rows alternate
    gate/up, with one ``Plan`` per input layout.

    ``PackedGeGLU(w_gate, w_up)`` keeps its own packed copy, re-packed in place only when
    ``sync`` sees a weight change; ``PackedGeGLU.over(w)`` reads an existing [2N, K] tensor
    (the trainable parameter of ``gate_up.GateUpProj``) and never copies it.

    ``config`` pins tile sizes (the CPU interpreter gets ``INTERPRETER_CONFIG``); ``path``
    forces one of ``PATHS`` instead of the rule table (tests, bench), and a forced path that
    fails raises instead of falling back. Calling it records no autograd graph. The cuBLAS
    path's intermediate is one buffer per M, so calls of one M must not run concurrently on
    different streams.
    """

    def __init__(self, w_gate: torch.Tensor | None, w_up: torch.Tensor | None, config: dict | None = None,
                 path: str | None = None, packed: torch.Tensor | None = None):
        if path is not None and path not in PATHS:
            raise ValueError(f"geglu: unknown path {path!r} (choose from {', '.join(PATHS)})")
        self.config = dict(INTERPRETER_CONFIG) if config is None and interpreting() else config
        self.force_path = path
        self.w_packed: torch.Tensor | None = None
        self.packs = 0  # how many times the weights were packed (tests: reuse and invalidation)
        self.plans: dict = {}
        self._key = None
        self.owns_weights = packed is None
        if packed is None:
            self.sync(w_gate, w_up)
        else:
            if packed.dim() != 2 or packed.shape[0] % 2:
                raise ValueError(f"geglu: packed weights {tuple(packed.shape)} must be [2N, K]")
            self._check_dtype(packed.dtype, packed.dtype)
            self.w_packed = packed
            self._describe(packed.shape[0] // 2, packed.shape[1], packed.dtype, packed.device)

    @classmethod
    def over(cls, packed: torch.Tensor, config: dict | None = None, path: str | None = None) -> "PackedGeGLU":
        """Launch plans over an existing interleaved [2N, K] tensor, read in place at every call."""
        return cls(None, None, config=config, path=path, packed=packed)

    @staticmethod
    def _check_dtype(a: torch.dtype, b: torch.dtype) -> None:
        if a != b or a not in SUPPORTED_DTYPES:
            raise ValueError(f"geglu: weights are {a} and {b}: both must be one of float32, float16, bfloat16")

    def _describe(self, n: int, k: int, dtype: torch.dtype, device: torch.device) -> None:
        self.n, self.k, self.dtype, self.device = n, k, dtype, device
        self.tma_capable = _tma_capable(device)
        cuda = device.type == "cuda"
        self.sms = torch.cuda.get_device_properties(device).multi_processor_count if cuda else 4
        self.smem_limit = smem_limit(device) if cuda else None
        self.plans = {}

    def sync(self, w_gate: torch.Tensor, w_up: torch.Tensor) -> "PackedGeGLU":
        """Re-pack if either weight changed (pointer, shape, strides, dtype, device or version)."""
        if not self.owns_weights:
            raise ValueError("geglu: these plans read a packed parameter in place: there is nothing to sync")
        key = (_tensor_key(w_gate), _tensor_key(w_up))
        if key != self._key:
            self._pack(w_gate, w_up)
            self._key = key
        return self

    def _pack(self, w_gate: torch.Tensor, w_up: torch.Tensor) -> None:
        if w_gate.shape != w_up.shape or w_gate.dim() != 2:
            raise ValueError(f"geglu: weights {tuple(w_gate.shape)} and {tuple(w_up.shape)} must be equal 2-D")
        self._check_dtype(w_gate.dtype, w_up.dtype)
        if w_gate.device != w_up.device:
            raise ValueError(f"geglu: weights on {w_gate.device} and {w_up.device}")
        n, k = w_gate.shape
        wp = self.w_packed
        if wp is None or wp.shape != (2 * n, k) or wp.dtype != w_gate.dtype or wp.device != w_gate.device:
            self.w_packed = wp = torch.empty((2 * n, k), dtype=w_gate.dtype, device=w_gate.device)
            self._describe(n, k, w_gate.dtype, w_gate.device)
        with torch.no_grad():  # in place: the plans and any captured graph keep pointing at it
            v = wp.view(n, 2, k)
            v[:, 0].copy_(w_gate)
            v[:, 1].copy_(w_up)
        self.packs += 1

    def plan(self, m: int, dtype: torch.dtype, aligned: bool, save_pre: bool) -> Plan:
        key = (m, dtype, aligned, save_pre)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = Plan(self, m, dtype, aligned, save_pre, self.force_path)
        return plan

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None,
                 pre: torch.Tensor | None = None) -> torch.Tensor:
        """``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` for x [..., K] -> [..., N], into ``out`` when given
        (contiguous [M, N] or [..., N]). ``pre`` (contiguous [M, 2N]) also receives the interleaved
        gate/up pre-activations, for the backward."""
        k, n = self.k, self.n
        if x.dtype != self.dtype or x.shape[-1] != k or x.device != self.device:
            raise ValueError(f"geglu: x {tuple(x.shape)} {x.dtype} on {x.device} does not match weights "
                             f"[{n}, {k}] {self.dtype} on {self.device}")
        flat = x.dim() == 2  # the common case: no reshape, no view back (each ~1 µs)
        x2 = x if flat else x.reshape(-1, k)
        m = x2.shape[0]
        if out is None:
            out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        elif out.numel() != m * n or out.shape[-1] != n or out.dtype != x.dtype or not out.is_contiguous():
            raise ValueError(f"geglu: out must be contiguous [{m}, {n}] {x.dtype}")
        elif out.dim() != 2:
            out = out.view(m, n)
        if pre is not None and (pre.shape != (m, 2 * n) or pre.dtype != x.dtype or not pre.is_contiguous()):
            raise ValueError(f"geglu: pre must be contiguous [{m}, {2 * n}] {x.dtype}")
        aligned = self.tma_capable and _aligned(x2) and _aligned(out) and _aligned(self.w_packed)
        plan = self.plans.get((m, x.dtype, aligned, pre is not None))
        if plan is None:
            plan = self.plan(m, x.dtype, aligned, pre is not None)
        if m:
            if plan.launched:
                plan.launch(self, x2, out, pre)
            else:
                plan = self._first_launch(plan, x2, out, pre)
        return out if flat else out.view(*x.shape[:-1], n)

    def _first_launch(self, plan: Plan, x2, out, pre) -> Plan:
        """A plan's first launch compiles its kernel. If it fails on this GPU and Triton (shared
        memory over the limit, a TMA build error), fall back along ``FALLBACK`` for this layout,
        warn once per reason instead of failing the model, and keep the reason in
        ``plan.fallback``. A forced path (``path=``) raises instead."""
        key = next(k for k, v in self.plans.items() if v is plan)
        reasons = []
        while True:
            try:
                plan.launch(self, x2, out, pre)
                break
            except Exception as e:  # noqa: BLE001 - compile and launch errors come as many types
                nxt = FALLBACK.get(plan.path)
                if self.force_path is not None or nxt is None:
                    raise
                reason = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                reasons.append(f"{plan.path}: {reason}")
                warn_once(f"geglu: the {plan.path} kernel failed ({reason}); using the {nxt} path for M={plan.m}")
                plan = self.plans[key] = Plan(self, plan.m, x2.dtype, False, pre is not None, nxt)
                plan.fallback = "; ".join(reasons)
        plan.launched = True
        return plan


_WARNED: set = set()


def warn_once(message: str) -> None:
    """One UserWarning per distinct message in this process (a fallback is said once, not per call)."""
    if message not in _WARNED:
        _WARNED.add(message)
        import warnings
        warnings.warn(message, stacklevel=3)


# --- Training -------------------------------------------------------------------------------

class _UnpackedGeGLUFn(torch.autograd.Function):
    """h = gelu_tanh(x @ Wg.T) * (x @ Wu.T) from separate weights, with the fused forward and a
    one-pass backward. Its weight gradients are strided views of one [2N, K] GEMM result, so
    AccumulateGrad copies them: the trainable packed parameter (``gate_up.py``) avoids that."""

    @staticmethod
    def forward(ctx, x, w_gate, w_up, packed: PackedGeGLU):
        x2 = x.reshape(-1, packed.k)
        pre = torch.empty((x2.shape[0], 2 * packed.n), dtype=x.dtype, device=x.device)
        h = packed(x2, pre=pre)
        # the packed weight is saved, so a re-pack (in place) before backward trips autograd's
        # version check instead of silently using new weights
        ctx.save_for_backward(x2, pre, packed.w_packed)
        ctx.x_shape = x.shape
        return h.view(*x.shape[:-1], packed.n)

    @staticmethod
    def backward(ctx, dh):
        x2, pre, wp = ctx.saved_tensors
        n = wp.shape[0] // 2
        dpre = geglu_interleaved_backward(dh.reshape(-1, n), pre)  # [M, 2N]: dgate, dup interleaved
        dx = dwg = dwu = None
        if ctx.needs_input_grad[0]:
            dx = torch.mm(dpre, wp).view(ctx.x_shape)  # one GEMM over K=2N: dgate @ Wg + dup @ Wu
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            dw = torch.mm(dpre.t(), x2)  # [2N, K], rows alternate dWg, dWu
            dwg, dwu = dw[0::2], dw[1::2]
        return dx, dwg, dwu, None


def fused_geglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, packed: PackedGeGLU,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu_tanh(x @ w_gate.T) * (x @ w_up.T)`` through ``packed`` (synced to the weights first);
    differentiable in x, w_gate and w_up when autograd wants it (``out`` is then not allowed)."""
    packed.sync(w_gate, w_up)
    if torch.is_grad_enabled() and (x.requires_grad or w_gate.requires_grad or w_up.requires_grad):
        if out is not None:
            raise ValueError("geglu: out= is for inference (no autograd)")
        return _UnpackedGeGLUFn.apply(x, w_gate, w_up, packed)
    return packed(x, out=out)


class _GeGLUFn(torch.autograd.Function):
    """The unfused rung's pointwise ``gelu_tanh(gate) * up`` with the one-pass backward kernel."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return geglu(gate, up)

    @staticmethod
    def backward(ctx, dout):
        gate, up = ctx.saved_tensors
        return geglu_backward(dout, gate, up)


def geglu_autograd(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``geglu(gate, up)``, differentiable when autograd wants it (the ``triton`` rung's training)."""
    if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
        return _GeGLUFn.apply(gate, up)
    return geglu(gate, up)
