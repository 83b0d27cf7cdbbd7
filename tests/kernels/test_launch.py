"""kernels/launch.py: the direct launch of a compiled kernel, on the CPU with a stand-in JIT.

What the GPU run checks for real (the bench's train table, counts in its log) is checked here for
its logic: the first call of a call site goes through the JIT, later calls with the same guard call
the compiled kernel's launcher with every signature argument in order (defaults filled), anything
Triton specializes on that changes goes back to the JIT, a failing direct launch falls back for
good, and the interpreter or a launch hook always takes the JIT.
"""
from __future__ import annotations

import pytest
import torch

from tracetui.kernels import launch as L


def kern(x_ptr, out_ptr, n, scale=2, BLOCK=None):  # the stand-in kernel's signature
    raise AssertionError("never called")


class Compiled:
    function, packed_metadata = "fn-handle", "meta"

    def launch_metadata(self, grid, stream, *args):
        return ("md", grid, stream, len(args))

    def __init__(self, log, fail=False):
        self.log, self.fail = log, fail

    def run(self, *a):
        if self.fail:
            raise RuntimeError("launcher layout changed")
        self.log.append(("direct",) + a)


class FakeJIT:
    """``fn[grid](*args, **kw)`` records the call and returns a compiled kernel, like JITFunction."""
    fn = staticmethod(kern)

    def __init__(self, fail=False):
        self.log, self.fail = [], fail

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return Compiled(self.log, self.fail)
        return call


@pytest.fixture(autouse=True)
def compiled_mode(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def launcher(jit):
    return L.Launcher(jit, device=lambda: 0, stream=lambda dev: 77)


def test_second_call_skips_the_jit_with_every_argument_in_order():
    jit = FakeJIT()
    lx = launcher(jit)
    x, out = torch.zeros(64), torch.zeros(64)
    lx[(4,)](x, out, 64, BLOCK=128, num_warps=4)
    lx[(4,)](x, out, 64, BLOCK=128, num_warps=4)
    assert [e[0] for e in jit.log] == ["jit", "direct"]
    # grid padded to 3-D, the stream, handles, the launch metadata and hooks as the JIT passes
    # them, then x, out, n, scale's default and the constexpr (num_warps is an option)
    enter, leave = L._hooks()
    assert jit.log[1][1:] == (4, 1, 1, 77, "fn-handle", "meta", ("md", (4,), 77, 5), enter, leave,
                              x, out, 64, 2, 128)
    assert (lx.jit, lx.direct) == (1, 1)


@pytest.mark.parametrize("change", ["alignment", "dtype", "int", "constexpr", "device"])
def test_what_triton_specializes_on_goes_back_to_the_jit(change):
    jit = FakeJIT()
    dev = [0]
    lx = L.Launcher(jit, device=lambda: dev[0], stream=lambda d: 1)
    buf = torch.zeros(64)
    x, out, n, kw = buf[:32], torch.zeros(64), 32, {"BLOCK": 128}
    lx[(1,)](x, out, n, **kw)
    if change == "alignment":
        x = buf[1:33]  # 4 bytes past a 16-byte boundary
    elif change == "dtype":
        x = torch.zeros(32, dtype=torch.float64)
    elif change == "int":
        n = 33
    elif change == "constexpr":
        kw = {"BLOCK": 256}
    else:
        dev[0] = 1
    lx[(1,)](x, out, n, **kw)
    assert [e[0] for e in jit.log] == ["jit", "jit"]
    lx[(1,)](x, out, n, **kw)  # and that new kernel is kept too
    assert [e[0] for e in jit.log] == ["jit", "jit", "direct"]


def test_a_failing_direct_launch_falls_back_to_the_jit_for_good():
    jit = FakeJIT(fail=True)
    lx = launcher(jit)
    x = torch.zeros(16)
    for _ in range(3):
        lx[(1,)](x, x, 16)
    assert [e[0] for e in jit.log] == ["jit", "jit", "jit"]
    assert lx.broken and "launcher layout changed" in lx.broken


def test_interpreter_and_launch_hooks_always_take_the_jit(monkeypatch):
    jit = FakeJIT()
    lx = launcher(jit)
    x = torch.zeros(16)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    lx[(1,)](x, x, 16)
    lx[(1,)](x, x, 16)
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(L, "_hooks_set", lambda: True)  # a profiler wants every launch
    lx[(1,)](x, x, 16)
    lx[(1,)](x, x, 16)
    assert [e[0] for e in jit.log] == ["jit"] * 4 and lx.kernels == {}


def test_hooks_set_means_a_registered_hook(monkeypatch):
    """Triton 3.9 keeps an empty HookChain when no profiler is on; older Triton keeps None."""
    if L._knobs is None:
        pytest.skip("this Triton has no knobs: the JIT is always used")
    rt = L._knobs.runtime
    enter = rt.launch_enter_hook
    assert not L._hooks_set()
    if hasattr(enter, "add"):
        enter.add(print)
        try:
            assert L._hooks_set()
        finally:
            enter.remove(print)
    else:
        monkeypatch.setattr(rt, "launch_enter_hook", print)
        assert L._hooks_set()
    assert not L._hooks_set()


def test_the_cache_is_bounded():
    jit = FakeJIT()
    lx = launcher(jit)
    x = torch.zeros(16)
    for n in range(L.MAX_KERNELS + 5):
        lx[(1,)](x, x, n)
    assert len(lx.kernels) <= L.MAX_KERNELS


def test_the_fused_paths_and_the_backward_launch_through_launchers():
    """The hot call sites (dual GEMM paths, the interleaved epilogue, the backward) go through a
    Launcher, and under the interpreter those still run the real kernels (the training test in
    test_smem_and_training checks their numbers)."""
    from tracetui.kernels import fused, op
    assert isinstance(fused._TMA, L.Launcher) and fused._TMA.fn is fused.geglu_dual_gemm_tma_kernel
    assert isinstance(fused._POINTER, L.Launcher) and fused._POINTER.fn is fused.geglu_dual_gemm_kernel
    assert isinstance(fused._INTERLEAVE, L.Launcher) and fused._INTERLEAVE.fn is fused.geglu_interleaved_kernel
    assert isinstance(op._BWD, L.Launcher) and op._BWD.fn is op.geglu_interleaved_bwd_kernel
