"""Shared fixtures: bundled traces, peer traces (skipped when ../shared is absent), CPU recordings."""
from __future__ import annotations

import fcntl
import os
import pickle
import shutil
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


def built_once(tmp_path_factory, name: str, make):
    """``make(folder)``, once per test session. Alone, a session fixture already runs once; under
    pytest-xdist each worker is a session of its own, so the first worker to ask builds it under a
    lock and the others wait for and reuse what it built (the same files, as one process's session
    fixture would give every test), instead of recording the same job again beside it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # this run's folder, shared by its workers
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{name}.pickle"
        if done.exists():
            return pickle.loads(done.read_bytes())
        folder = root / name
        shutil.rmtree(folder, ignore_errors=True)  # a worker that failed half-way
        folder.mkdir()
        made = make(folder)
        done.write_bytes(pickle.dumps(made))
        return made


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    """A reopen-cache folder of this test's own; the environment turns the cache on."""
    from tracetui.read import cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.OFF_ENV, raising=False)
    return tmp_path / "xdg" / "tracetui"


def loaded_three_ways(src: Path, tmp_path: Path):
    """(path, fresh, first, again): ``src`` copied into ``tmp_path``, loaded without the cache,
    then twice with it (the first decodes and writes the entries, the second reads them back).
    Skips where ``src`` is a peer trace that is not here."""
    from tracetui.model import load_trace
    if not src.exists():
        pytest.skip("../shared/peer-traces is not here")
    path = tmp_path / src.name
    path.write_bytes(src.read_bytes())
    fresh = load_trace(path)
    first = load_trace(path, cache=True)
    return path, fresh, first, load_trace(path, cache=True)


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

    def make(out: Path) -> dict:
        ws = workloads(batch=4, seq=16, dim=64, hidden=128, in_features=32, out_features=64)
        made = {}
        for wl, impl, stack in [("linear", "eager", False), ("mlp", "eager", True), ("mlp", "eager", False),
                                ("mlp", "compile", True)]:
            name = f"{wl}_{impl}{'_stack' if stack else ''}"
            made[name] = record(ws[wl], impl, out / f"{name}.json.gz", device="cpu", with_stack=stack,
                                warmup_iters=2, active=3)
        return made
    return built_once(tmp_path_factory, "cpu_traces", make)


@pytest.fixture(scope="session")
def cpu_memory_trace(tmp_path_factory) -> Path:
    """A CPU training recording with profile_memory=True and a planted leak (tests/memory_workload.py)."""
    pytest.importorskip("torch")
    from tests.memory_workload import record_memory_trace
    return built_once(tmp_path_factory, "memory", lambda out: record_memory_trace(out / "train_memory.json"))


@pytest.fixture(autouse=True)
def _mcp_module_state():
    """The MCP tools keep the server's roots and page size in module state (one server per
    process); a test that builds a server with its own roots must not confine the next test."""
    yield
    tools = sys.modules.get("tracetui.mcp.tools")
    if tools is not None:
        tools.ROOTS[:] = []
        tools.MAX_CHARS = 20_000
