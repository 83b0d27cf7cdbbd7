"""Shared fixtures: bundled traces, peer traces (skipped when ../shared is absent), CPU recordings."""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Triton kernels run on the CPU through the interpreter in CI; must be set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

import tempfile

# The reopen cache (tracetui/read/cache.py) of every CLI run and load in this test session goes
# to a folder of its own, never the user's ~/.cache; set before any subprocess inherits it.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tracetui-test-cache-")

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
DATA = ROOT / "tests" / "data"
PEER = ROOT.parent / "shared" / "peer-traces" / "hta"


def reaped(pid: int) -> bool:
    """The forked child ``pid`` has exited and been waited for (no zombie, nothing running)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture(scope="session")
def peer_dir() -> Path:
    if not PEER.is_dir():
        pytest.skip("../shared/peer-traces is not here (fresh clone elsewhere)")
    return PEER


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory) -> dict:
    """Small CPU recordings of the ladder made by our own recorder, with key_averages beside them."""
    pytest.importorskip("torch")
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import record
    out = tmp_path_factory.mktemp("cpu_traces")
    ws = workloads(batch=4, seq=16, dim=64, hidden=128, in_features=32, out_features=64)
    made = {}
    for wl, impl, stack in [("linear", "eager", False), ("mlp", "eager", True), ("mlp", "eager", False),
                            ("mlp", "compile", True)]:
        name = f"{wl}_{impl}{'_stack' if stack else ''}"
        made[name] = record(ws[wl], impl, out / f"{name}.json.gz", device="cpu", with_stack=stack,
                            warmup_iters=2, active=3)
    return made


@pytest.fixture(scope="session")
def cpu_memory_trace(tmp_path_factory) -> Path:
    """A CPU training recording with profile_memory=True and a planted leak (tests/memory_workload.py)."""
    pytest.importorskip("torch")
    from tests.memory_workload import record_memory_trace
    return record_memory_trace(tmp_path_factory.mktemp("memory") / "train_memory.json")


@pytest.fixture(autouse=True)
def _mcp_module_state():
    """The MCP tools keep the server's roots and page size in module state (one server per
    process); a test that builds a server with its own roots must not confine the next test."""
    yield
    tools = sys.modules.get("tracetui.mcp.tools")
    if tools is not None:
        tools.ROOTS[:] = []
        tools.MAX_CHARS = 20_000
