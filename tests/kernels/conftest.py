"""Each test starts with no launch plans: the ops share plans per weight shape (kernels/op.py), so a
fallback one test provokes (a failing launcher) must not leak into the next."""
import pytest


@pytest.fixture(autouse=True)
def _fresh_op_plans():
    try:
        from tracetui.kernels import op
    except ImportError:  # no torch/triton: the kernel tests skip themselves
        yield
        return
    op._PLANS.clear()
    yield
    op._PLANS.clear()
