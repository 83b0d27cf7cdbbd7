"""Issue 35 (hostile input round 3), the read and model stages: parent cycles, walks up the tree,
gzip bombs and sparse files measured in resident memory, 32,767 nested events, and
TRACETUI_MAX_BYTES values that are mistakes. Each failed before its fix."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

from tracetui.model import TraceError, load_trace
from tracetui.model.tree import _acyclic
from tracetui.read.load import MAX_BYTES_ENV, max_bytes
from tracetui.report.summary import summary_dict
from tracetui.report.tree import tree_dict

CLI = [sys.executable, "-m", "tracetui"]


def _write(tmp_path, events, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": events}))
    return p


# ---- the parent cycle

STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "ts": 10, "dur": 100}
OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10}


def test_two_identical_steps_on_two_threads_make_no_cycle(tmp_path):
    """The finding: each step was moved under the other's thread group (3->6->5->7->3)."""
    t = load_trace(_write(tmp_path, [dict(STEP, tid=2 ** 64), dict(STEP, tid=1), OP]))
    tree = t.tree
    for i in range(len(tree)):  # every node reaches the root, in at most depth steps
        path = tree.path(i)
        assert path[0] == 0 and path[-1] == i and len(path) == int(tree.depth[i]) + 1
    names = [tree.name(i) for i in range(len(tree))]
    assert names.count("ProfilerStep#1") == 2 and names.count("aten::mm") == 1
    shown = tree_dict(t, 0, None, None)
    stack, seen = [shown], []
    while stack:
        n = stack.pop()
        seen.append(n["name"])
        stack.extend(n["children"])
    assert seen.count("ProfilerStep#1") == 2 and seen.count("aten::mm") == 1  # `tree` drops nothing
    assert "parent_cycles_broken" not in tree.diagnostics  # the rule makes none; the guard is not needed


def test_mcp_node_answers_on_the_cycle_trace(tmp_path, monkeypatch):
    from tracetui.mcp import tools
    monkeypatch.setattr(tools, "ROOTS", [tmp_path])  # the server's --root
    p = _write(tmp_path, [dict(STEP, tid=2 ** 64), dict(STEP, tid=1), OP])
    t = load_trace(p)
    for i in range(len(t.tree)):
        d = tools.node(str(p), i)
        assert [a["id"] for a in d["path_to_node"]] == t.tree.path(i)


def test_a_cycle_in_display_parents_is_broken_and_counted():
    """The guard under the rule: nodes 3 -> 4 -> 5 -> 3 hang from nothing; they are re-hung
    under their containment parents and counted, never dropped."""
    parent = np.array([-1, 0, 0, 5, 3, 4, 1])
    cparent = np.array([-1, 0, 0, 1, 3, 2, 1])
    start = np.arange(7, dtype=np.int64)
    diag: dict = {}
    off, idx, depth = _acyclic(parent, cparent, start, 7, diag)
    assert diag["parent_cycles_broken"] == 3
    assert parent.tolist() == [-1, 0, 0, 1, 3, 2, 1]
    assert sorted(idx.tolist()) == list(range(1, 7)) and depth.tolist() == [0, 1, 1, 2, 3, 2, 2]


def test_steps_found_on_the_walk_down_follow_the_re_hung_parents():
    """Each node's step, filled in by the walk that finds the depths, on the parents as the
    cycle was broken: node 3 (a step) re-hung under 1, 4 under 3, 5 under 2, and 6 (which hung
    from the cycle) under 1."""
    parent = np.array([-1, 0, 0, 5, 3, 4, 3])
    cparent = np.array([-1, 0, 0, 1, 3, 2, 1])
    is_step = np.array([False, False, True, True, False, False, False])
    step_of = np.full(7, -1, dtype=np.int64)
    _acyclic(parent, cparent, np.arange(7, dtype=np.int64), 7, {}, (is_step, step_of))

    def walked(i):  # up the final parents to the first step
        while i >= 0 and not is_step[i]:
            i = int(parent[i])
        return i

    assert step_of.tolist() == [walked(i) for i in range(7)] == [-1, -1, 2, 3, 3, 2, -1]


def test_walks_up_the_tree_end_even_on_a_cycle(tmp_path):
    t = load_trace(_write(tmp_path, [dict(STEP, tid=1), OP]))
    tree = t.tree
    tree.parent[2], tree.parent[3] = 3, 2  # a cycle made by hand
    assert len(list(tree.ancestors(3))) <= len(tree)
    assert len(tree.path(3)) <= len(tree) + 1
    assert t.scope_module(3) is None


# ---- depth

def test_32767_nested_events(tmp_path):
    """_depths was int16: 32,768 levels overflowed (OverflowError through the CLI)."""
    n = 32_800
    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::n", "pid": 1, "tid": 1, "ts": i, "dur": 2 * n - 2 * i}
           for i in range(n)]
    t = load_trace(_write(tmp_path, evs))
    assert t.tree.depth.dtype.itemsize >= 4
    assert int(t.tree.depth.max()) == n + 1  # root, thread, then each event one level deeper
    assert summary_dict(t, top=3)["events"] == n


# ---- TRACETUI_MAX_BYTES

@pytest.mark.parametrize("value", ["inf", "-inf", "1e400", "abc", "-5", "0", "nan", "0x10", "99999999999999999999T",
                                   "2T", "1.5.2G", "8 G B"])
def test_bad_max_bytes_is_one_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(MAX_BYTES_ENV, value)
    with pytest.raises(TraceError) as e:
        max_bytes()
    msg = str(e.value)
    assert msg.startswith(MAX_BYTES_ENV) and repr(value) in msg and "1T" in msg and "\n" not in msg


@pytest.mark.parametrize("value, n", [("64M", 64 << 20), ("1.5G", 3 << 29), ("8GiB", 8 << 30), ("100", 100),
                                      (" 2k ", 2048), ("1T", 1 << 40)])
def test_good_max_bytes(monkeypatch, value, n):
    monkeypatch.setenv(MAX_BYTES_ENV, value)
    assert max_bytes() == n


def test_bad_max_bytes_through_the_cli(tmp_path):
    p = _write(tmp_path, [dict(STEP, tid=1), OP])
    r = subprocess.run(CLI + ["summary", str(p)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **{MAX_BYTES_ENV: "inf"}))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and MAX_BYTES_ENV in r.stderr, r.stderr


# ---- memory, measured in a child process

_PEAK = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tracetui.model import TraceError, load_trace
    import tracetui.report.summary, tracetui.report.tree  # imported before the baseline, as the CLI has
    def kb(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    open("/proc/self/clear_refs", "w").write("5")
    base = kb("VmRSS")
    try:
        load_trace(Path(sys.argv[1]))
        out = "loaded"
    except TraceError as e:
        out = str(e)
    print(json.dumps({"mb": (kb("VmHWM") - base) / 1024, "out": out}))
""")


def _peak(path, limit: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **{MAX_BYTES_ENV: limit}))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_gzip_bomb_is_refused_within_the_limit_plus_a_few_mib(tmp_path):
    """A bomb reached 4.7x the limit (308 MB under 64M) before it was refused."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = b'{"traceEvents": [' + b" " * (1 << 20)
    data = c.compress(body) + b"".join(c.compress(b" " * (1 << 20)) for _ in range(1023)) + c.flush()
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(data)
    got = _peak(p, "64M")
    assert "gzip expands past the 67,108,864-byte limit" in got["out"]
    assert got["mb"] <= 64 + len(data) / 2 ** 20 + 16, got  # the limit, the file, one step and a few MiB


def test_sparse_file_is_refused_unread(tmp_path):
    """2 GB of NULs (a sparse file) cost 2.1 GB per load before it was found not to be JSON."""
    p = tmp_path / "sparse.json"
    with open(p, "wb") as f:
        f.truncate(2 << 30)
    got = _peak(p, "8G")
    assert "not JSON" in got["out"] and got["mb"] < 16, got


def test_hole_after_a_valid_head_costs_at_most_twice_the_file(tmp_path):
    """A JSON head, then a 256 MB hole: the repair copied the hole once per step (7x)."""
    p = tmp_path / "holed.json"
    with open(p, "wb") as f:
        f.write(b'{"traceEvents": [')
        f.truncate(256 << 20)
    got = _peak(p, "8G")
    assert got["out"] != "loaded" and got["mb"] <= 2.2 * 256, got


def test_default_limit_stays_under_an_address_space_limit(monkeypatch):
    """Under prlimit --as=3G a gzip bomb ran out of memory (a traceback) before the default
    limit (8 GiB) refused it: the default is now at most a third of the address space."""
    monkeypatch.delenv(MAX_BYTES_ENV, raising=False)
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from tracetui.read.source import max_bytes; print(max_bytes())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != MAX_BYTES_ENV})
    assert r.returncode == 0 and int(r.stdout) <= (3 << 30) // 3, (r.stdout, r.stderr)


def test_running_out_of_memory_is_one_line(tmp_path, monkeypatch):
    from tracetui.model import trace as trace_mod

    def no_memory(*a, **k):
        raise MemoryError()
    monkeypatch.setattr(trace_mod, "decode_store", no_memory)
    p = _write(tmp_path, [dict(STEP, tid=1), OP])
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(p) in str(e.value) and "out of memory" in str(e.value) and "\n" not in str(e.value)
