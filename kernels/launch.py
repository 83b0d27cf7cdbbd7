"""Launch a Triton kernel without the JIT's per-call work once its call site has compiled it.

``fn[grid](*args, **kw)`` binds every argument, builds the specialization key, looks the kernel
up and only then launches: tens of µs of Python per call. A fused-GeGLU training step pays it
twice (forward, backward), and on the H200 that step was host-bound: CPU issue 658 µs against
eager's 405 (docs/bench_h200_v7.log, ``fused`` at 8192x768x3072), GPU 662 µs where its kernels
add up to ~460.

A ``Launcher`` keeps, per call site, the compiled kernels by a guard on what Triton specializes
on: each tensor's dtype and 16-byte alignment, each other argument's value (exact: stricter
than Triton's ``== 1`` / ``% 16`` rule, so never a wrong kernel), the keyword arguments and the
current device. While the guard matches it calls the compiled kernel's own launcher with the
arguments in signature order, as the JIT does; otherwise the JIT runs (and compiles if needed).
It always takes the JIT under ``TRITON_INTERPRET=1``, while a launch hook is set (a profiler
such as proton wants every launch), and, after one direct launch failed, for good (the reason
kept in ``broken``): a Triton whose compiled kernels look otherwise costs speed, never a crash.
"""
from __future__ import annotations

import inspect
import os

import torch

try:  # Triton >= 3.4 keeps the launch hooks in knobs
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton: always the JIT
    _knobs = None

MAX_KERNELS = 64
"""Compiled kernels kept per call site (distinct shapes / alignments); beyond, the cache restarts."""


def interpreting() -> bool:
    """Triton runs kernels on the CPU (``TRITON_INTERPRET=1``): no compiled kernel to keep."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _hooks() -> tuple:
    """The launch hooks as the JIT passes them (None or a callable; a ``HookChain`` on newer Triton)."""
    rt = _knobs.runtime
    return rt.launch_enter_hook, rt.launch_exit_hook


def _hooks_set() -> bool:
    """A launch hook is registered (a profiler wants every launch to go through the JIT)."""
    if _knobs is None:
        return True
    for h in _hooks():
        calls = getattr(h, "calls", None)  # HookChain: set when it holds calls
        if h is not None and (calls is None or calls):
            return True
    return False


def _arg_key(a):
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.data_ptr() % 16 == 0)
    return a


class Launcher:
    """``Launcher(jit_fn)[grid](*args, **kwargs)``: the same call as ``jit_fn[grid](...)``."""

    def __init__(self, fn, device=None, stream=None) -> None:
        self.fn = fn
        params = inspect.signature(fn.fn).parameters
        self.names = list(params)
        self.defaults = {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}
        self.kernels: dict = {}
        self.broken: str | None = None
        self.direct = 0  # launches that skipped the JIT (tests and the bench read these)
        self.jit = 0
        self._device, self._stream = device, stream

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def _current(self):
        if self._device is None:
            from triton.runtime import driver
            self._device = driver.active.get_current_device
            self._stream = driver.active.get_current_stream
        dev = self._device()
        return dev, self._stream(dev)

    def launch(self, grid: tuple, args: tuple, kwargs: dict) -> None:
        fast = self.broken is None and not interpreting() and not _hooks_set()
        if fast:
            dev, stream = self._current()
            key = (dev, tuple(_arg_key(a) for a in args), tuple(kwargs.items()))
            hit = self.kernels.get(key)
            if hit is not None:
                try:
                    self._run(hit, grid, stream, args, kwargs)
                    self.direct += 1
                    return
                except Exception as e:  # noqa: BLE001 - any failure: the JIT from now on
                    self.broken = f"{type(e).__name__}: {e}"
                    self.kernels.clear()
        kernel = self.fn[grid](*args, **kwargs)
        self.jit += 1
        if fast and kernel is not None and hasattr(kernel, "run"):
            if len(self.kernels) >= MAX_KERNELS:
                self.kernels.clear()
            self.kernels[key] = kernel

    def _run(self, kernel, grid: tuple, stream, args: tuple, kwargs: dict) -> None:
        """The JIT's own last step (``JITFunction.run``): every signature argument, in order."""
        full = list(args)
        for name in self.names[len(args):]:
            full.append(kwargs[name] if name in kwargs else self.defaults[name])
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        enter, leave = _hooks()
        kernel.run(grid[0], g1, g2, stream, kernel.function, kernel.packed_metadata,
                   kernel.launch_metadata(grid, stream, *full), enter, leave, *full)
