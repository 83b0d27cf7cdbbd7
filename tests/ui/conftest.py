"""The app freezes what it loaded out of the cyclic GC (tracetui.ui.idle_gc.keep_out_of_gc).

In one pytest process that would also freeze other tests' leftovers (Triton's IR objects from
the kernel tests, which nanobind then reports as leaked at exit), so each UI test thaws it again.
"""
import gc

import pytest


@pytest.fixture(autouse=True)
def _thaw_gc():
    yield
    gc.unfreeze()
