"""The in-process servers of these tests run each tool call through ``worker.answer``, which ends
with ``gc.collect()`` (give_back_memory: a long-running server returns a call's garbage). In a
test session that is a full collection of everything the session imported and kept before
(torch, Triton, earlier tests' objects): 0.1-2 s a call, 158 s for one test of 70 calls after the
kernel tests. Freezing what existed before the test out of the collector keeps every collection
to what the test itself made (the server's garbage, which is what the call is about); the objects
are thawed again afterwards."""
import gc

import pytest


@pytest.fixture(autouse=True)
def _collect_only_this_tests_objects():
    gc.freeze()
    yield
    gc.unfreeze()
