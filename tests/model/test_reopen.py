"""The model's reopen entry (tracetui/model/reopen.py): a reopened trace's tree, rollups, step
windows and figures are, array for array, what a fresh load builds; a changed file, another
option or other code is never served from it; a broken or old-format entry is replaced; two
processes at once and ``--no-cache`` behave as for the store's entry (tests/read/test_cache.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.model import reopen
from tracetui.read import cache
from tracetui.read.events import K

from tests.conftest import PEER, ROOT, TRACES, loaded_three_ways


TREE = ("name_id", "kind", "ev", "start", "dur", "parent", "cparent", "child_off", "child_idx", "depth")
ROLL = ("cpu_total", "cpu_self", "device", "kernels", "step_of", "dup", "op_self")
WINDOWS = ("launcher", "launch_ts", "launch_end", "gpu_flat", "gpu_at", "runtime_flat", "runtime_at",
           "thread_flat", "thread_at")


def _same(a, b, where: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where


def _same_model(fresh, again) -> None:
    """Every array and field the model entry holds, against a load that built them."""
    for f in TREE:
        _same(getattr(fresh.tree, f), getattr(again.tree, f), f)
    for f in ROLL:
        _same(getattr(fresh.roll, f), getattr(again.roll, f), f)
    assert fresh.tree.names == again.tree.names
    assert fresh.tree.diagnostics == again.tree.diagnostics and fresh.tree.fwd_of == again.tree.fwd_of
    for off_idx in zip(fresh.tree.children_without(K["python"]), again.tree.children_without(K["python"])):
        _same(*off_idx, "children_without")
    _same(fresh.store.kind, again.store.kind, "store.kind (the step markers)")
    assert fresh.step_choice == again.step_choice and fresh.self_time == again.self_time
    for f in WINDOWS:
        _same(getattr(fresh.windows, f), getattr(again.windows, f), "windows." + f)
    assert [(w.node, w.name, w.pid, w.pids, w.start, w.end) for w in fresh.windows.windows] == \
           [(w.node, w.name, w.pid, w.pids, w.start, w.end) for w in again.windows.windows]
    a, b = vars(fresh.windows.figures), vars(again.windows.figures)
    assert a.keys() == b.keys()
    for f, v in a.items():
        if isinstance(v, np.ndarray):
            _same(v, b[f], "figures." + f)
        else:
            assert v == b[f], f
    assert fresh.windows.breakdowns() == again.windows.breakdowns()
    fields = ("name", "kind", "count", "cpu_total_us", "cpu_self_us", "device_total_us", "device_scope_us")
    for table in ("op_table", "kernel_table"):
        a, b = getattr(fresh, table), getattr(again, table)
        assert [[getattr(r, f) for f in fields] for r in a] == [[getattr(r, f) for f in fields] for r in b], table
        for r, s in zip(a, b):
            _same(r.nodes, s.nodes, table + " nodes")
    assert fresh.op_table
    assert fresh.gpu_classes.tolist() == again.gpu_classes.tolist()
    assert fresh.gpu_libraries.tolist() == again.gpu_libraries.tolist()


INPUTS = [TRACES / "transformer_eager_memory.json.gz", TRACES / "mlp_compile.json.gz", TRACES / "transformer_eager.json.gz",
          PEER / "call_stack_backward_thread.json", PEER / "trace_filter_sampled_rank-0.json.gz",
          PEER / "triton_example_triton_example.json.gz"]  # a step marker alone on its pid: its window's pids


@pytest.mark.parametrize("src", INPUTS, ids=lambda p: p.name)
def test_a_reopened_model_is_the_fresh_build_array_for_array(src, xdg, tmp_path):
    path, fresh, first, again = loaded_three_ways(src, tmp_path)  # fresh: no cache, built from the file
    assert "model_cache" not in first.timings and cache.entry_path(path, cache.MODEL).exists()
    assert "model_cache" in again.timings  # the tree, rollups and windows came from the entry
    assert "figures" in again.windows.__dict__ and K["python"] in again.tree._without
    assert {"op_table", "kernel_table", "_gpu_class_libs"} <= again.__dict__.keys()  # kept, not computed
    _same_model(fresh, again)


def _trace(kernel: str, n: int = 3000, step: str = "ProfilerStep#1") -> bytes:
    """A step, ops on the main thread, their backward on another thread, kernels on two streams:
    several hundred KB, so a change in the middle lies outside the hashed head and tail."""
    evs = [{"ph": "X", "cat": "user_annotation", "name": step, "pid": 1, "tid": 1, "ts": 0, "dur": 20 * n}]
    for i in range(n):
        tid, stream = (1, 7) if i % 2 else (2, 9)
        evs.append({"ph": "X", "cat": "python_function", "name": "model.py(10): forward", "pid": 1, "tid": tid,
                    "ts": 20 * i, "dur": 10})
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": tid, "ts": 20 * i + 1, "dur": 5,
                    "args": {"External id": i + 1}})
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                    "ts": 20 * i + 2, "dur": 2, "args": {"External id": i + 1, "correlation": i + 1}})
        evs.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": stream, "ts": 20 * i + 5, "dur": 3,
                    "args": {"External id": i + 1, "correlation": i + 1, "stream": stream}})
    return json.dumps({"traceEvents": evs}).encode()


def _kernel_nodes(t) -> set:
    return {t.tree.names[j] for j in np.unique(t.tree.name_id[t.tree.kind == K["kernel"]]).tolist()}


def test_a_same_size_rewrite_builds_its_own_tree(xdg, tmp_path):
    """Other content of the same size, same inode, mtime set back: the tree is the new file's."""
    path = tmp_path / "t.json"
    a, b = _trace("kernel_aaaa"), _trace("kernel_bbbb")
    assert len(a) == len(b)
    path.write_bytes(a)
    st = os.stat(path)
    load_trace(path, cache=True)
    assert "model_cache" in load_trace(path, cache=True).timings
    with open(path, "r+b") as f:
        f.write(b)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    t = load_trace(path, cache=True)
    assert "model_cache" not in t.timings and _kernel_nodes(t) == {"kernel_bbbb"}
    again = load_trace(path, cache=True)
    assert "model_cache" in again.timings and _kernel_nodes(again) == {"kernel_bbbb"}
    _same_model(load_trace(path), again)


def test_another_option_is_not_served_the_entry(xdg, tmp_path):
    """--steps and the self-time rule change the tree and rollups: each is built for itself."""
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 300, step="train_step_1"))
    load_trace(path, cache=True)
    by_regex = load_trace(path, cache=True, steps="^nothing$")
    assert "model_cache" not in by_regex.timings and by_regex.n_steps == 0
    _same_model(load_trace(path, steps="^nothing$"), load_trace(path, cache=True, steps="^nothing$"))
    older = load_trace(path, cache=True, torch_version="2.11")
    newer = load_trace(path, cache=True, torch_version="2.13")
    assert newer.self_time.frames_own_time and "model_cache" not in newer.timings
    assert not np.array_equal(older.roll.cpu_self, newer.roll.cpu_self)  # the rule changes the rollups
    again = load_trace(path, cache=True, torch_version="2.13")
    assert "model_cache" in again.timings
    _same_model(load_trace(path, torch_version="2.13"), again)


def test_an_entry_made_by_other_code_is_not_served(xdg, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 300))
    load_trace(path, cache=True)
    monkeypatch.setattr(cache, "code_key", lambda: "other code")
    t = load_trace(path, cache=True)
    assert "cache" not in t.timings and "model_cache" not in t.timings  # neither entry


@pytest.mark.parametrize("damage", ["truncate", "cut the last array", "garbage", "empty", "flip header"])
def test_a_broken_model_entry_is_ignored_and_replaced(damage, xdg, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 300))
    fresh = load_trace(path)
    load_trace(path, cache=True)
    entry = cache.entry_path(path, cache.MODEL)
    whole = entry.read_bytes()
    bad = {"truncate": whole[: len(whole) // 2], "cut the last array": whole[:-100] + whole[-20:],
           "garbage": os.urandom(len(whole)), "empty": b"",
           "flip header": whole[:20] + bytes([whole[20] ^ 0xFF]) + whole[21:]}[damage]
    entry.write_bytes(bad)
    t = load_trace(path, cache=True)
    assert "cache" in t.timings and "model_cache" not in t.timings  # the store's entry, a model built again
    _same_model(fresh, t)
    assert entry.read_bytes() == whole  # written whole again
    _same_model(fresh, load_trace(path, cache=True))


def test_an_old_format_entry_is_ignored_and_replaced(xdg, tmp_path, monkeypatch):
    """Entries of format 1 (the store only, no code key) are left for the format-2 ones."""
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 300))
    monkeypatch.setattr(cache, "FORMAT", 1)
    monkeypatch.setattr(cache, "MAGIC", b"TTCACHE\x01")
    load_trace(path, cache=True)
    old = cache.entry_path(path).read_bytes()
    assert old.startswith(b"TTCACHE\x01")
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.load(path) is None and not cache.fresh(path)
    t = load_trace(path, cache=True)
    assert "cache" not in t.timings and "model_cache" not in t.timings
    assert cache.entry_path(path).read_bytes().startswith(b"TTCACHE\x02")
    assert "model_cache" in load_trace(path, cache=True).timings


def _cli(*args, env=None):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "tracetui", *args], cwd=ROOT, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_processes_write_and_read_the_model_entry_at_once(xdg, tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(_trace("kernel_aaaa", 20000))
    want = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(path), "--json", "--no-cache"],
                          cwd=ROOT, capture_output=True, check=True).stdout
    for _ in range(2):  # both build and write at once, then both read at once
        procs = [_cli("summary", str(path), "--json") for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-300:] for o in outs]
        assert all(o[0] == want for o in outs)
        assert cache.entry_path(path, cache.MODEL).exists() and not list(xdg.glob(".tmp-*"))
    assert "model_cache" in load_trace(path, cache=True).timings


def test_no_cache_writes_no_model_entry(tmp_path):
    xdg = tmp_path / "xdg"
    path = tmp_path / "t.json"
    path.write_bytes(_trace("kernel_aaaa", 50))
    for args in (["summary", str(path), "--no-cache"], ["tree", str(path), "--no-cache"]):
        p = _cli(*args, env={"XDG_CACHE_HOME": str(xdg)})
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert not xdg.exists()


def test_the_key_names_every_option():
    assert reopen.key("a.json", None, False) != reopen.key("b.json", None, False)
    assert reopen.key("a.json", None, False) != reopen.key("a.json", "x", False)
    assert reopen.key("a.json", None, False) != reopen.key("a.json", None, True)
