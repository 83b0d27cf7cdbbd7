"""A large plain trace is memory-mapped read-only, not read into the process (issue 39.1): the
load holds no copy of the file, never writes it, and a file cut short after loading costs its
args, not the process (reading a map past the file's end is SIGBUS)."""
from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read import source, split
from tracetui.read.load import LoadReport, decode, read_bytes
from tracetui.read.events import build_store

from tests.conftest import ROOT


def _write_trace(path, n: int) -> int:
    """A trace shaped like a training step's: ops on a forward and a backward thread, each
    launching a kernel on one of two streams, linked by correlation and External id, with the
    args Kineto writes. Returns the file's size."""
    evs = []
    for i in range(n):
        tid = 1 if i % 3 else 2  # every third op on the backward thread
        evs.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 40}", "pid": 7, "tid": tid, "ts": 100 * i,
                    "dur": 50, "args": {"External id": i, "Sequence number": i, "Fwd thread id": 1,
                                        "Input Dims": [[64, 1024], [1024, 1024]], "Input type": ["float", "float"]}})
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": tid,
                    "ts": 100 * i + 10, "dur": 5, "args": {"correlation": i, "External id": i}})
        evs.append({"ph": "X", "cat": "kernel", "name": f"void gemm_kernel<{i % 25}>(float*)", "pid": 0,
                    "tid": 7 + i % 2, "ts": 100 * i + 20, "dur": 30,
                    "args": {"correlation": i, "External id": i, "stream": 7 + i % 2, "device": 0}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU X"}], "traceEvents": evs}
    path.write_text(json.dumps(doc, indent=1))
    return path.stat().st_size


def test_a_large_plain_file_is_mapped_read_only_and_loads_the_same(tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    _write_trace(p, 3000)
    before = p.read_bytes()
    report = LoadReport()
    want = build_store(decode(p, bytearray(before), report)[0].traceEvents, source=before)
    monkeypatch.setattr(source, "MMAP_MIN_BYTES", 1)
    monkeypatch.setattr(split, "MIN_BYTES", 0)
    monkeypatch.setattr(split, "PIECE_BYTES", 64 << 10)
    data = read_bytes(p, LoadReport())
    assert isinstance(data, mmap.mmap)
    with pytest.raises(TypeError):
        data[0] = 0x20  # the map cannot be written: the input stays untouched whatever the decode does
    for workers in (1, 2):
        t = load_trace(p, workers=workers, cache=False)
        assert isinstance(t.store.source, mmap.mmap) and split.TIMES["processes"] == workers
        for f in ("name_id", "kind", "track", "ts", "dur", "corr", "ext", "file_index"):
            assert np.array_equal(getattr(t.store, f), getattr(want, f)), f
        assert t.store.names == want.names and t.store.flows == want.flows
        assert t.store.args(len(want) - 1) == want.args(len(want) - 1)
    assert p.read_bytes() == before


_PEAK = textwrap.dedent("""
    import json, sys
    from tracetui.model import load_trace
    import tracetui.report.summary  # imported before the baseline, as the CLI has
    def kb(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    open("/proc/self/clear_refs", "w").write("5")
    base = kb("VmRSS")
    t = load_trace(sys.argv[1], workers=int(sys.argv[2]), cache=False)
    print(json.dumps({"mb": (kb("VmHWM") - base) / 1024, "events": len(t.store)}))
""")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    p = tmp_path_factory.mktemp("mapped") / "t.json"
    return p, _write_trace(p, 60_000) / 2 ** 20


@pytest.mark.parametrize("workers", [1, 2])
def test_the_load_holds_no_copy_of_the_file(big, workers):
    """Peak memory of the loading process above its imports (decode, store, tree and rollups),
    against the file's size (47 MB here): 1.13x for 1 and 2 workers; before the map, 3.4x
    with one worker (the file, and every event decoded at once) and 2.1x with two (the file)."""
    p, mb = big
    assert mb > split.MIN_BYTES / 2 ** 20 and mb > source.MMAP_MIN_BYTES / 2 ** 20  # the large-file path
    r = subprocess.run([sys.executable, "-c", _PEAK, str(p), str(workers)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), TRACETUI_NO_CACHE="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["events"] == 180_000
    assert got["mb"] < 1.5 * mb, (got, mb)


_CUT = textwrap.dedent("""
    import os, sys
    from tracetui.read import source, split
    source.MMAP_MIN_BYTES = 1
    from tracetui.model import load_trace
    from tracetui.model.lanes import gpu_annotations
    t = load_trace(sys.argv[1], workers=1, cache=False)
    os.truncate(sys.argv[1], 100)  # cut short while the app still shows it
    print(t.store.args(len(t.store) - 1), gpu_annotations(t.store), t.store.source is None)
""")


def test_a_mapped_file_cut_short_after_loading_costs_its_args_not_the_process(tmp_path):
    p = tmp_path / "t.json"
    _write_trace(p, 2000)
    r = subprocess.run([sys.executable, "-c", _CUT, str(p)], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), TRACETUI_NO_CACHE="1"))
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # -7 would be SIGBUS
    assert r.stdout.split() == ["{}", "[]", "True"]


def test_a_mapped_file_written_over_in_place_gives_no_args_rather_than_other_bytes(tmp_path, monkeypatch):
    """Rewritten at the same size (another export over the same file): the map would show the
    new bytes at the loaded positions, so the args are refused, as a shrunk file's are."""
    p = tmp_path / "t.json"
    _write_trace(p, 2000)
    monkeypatch.setattr(source, "MMAP_MIN_BYTES", 1)
    t = load_trace(p, workers=1, cache=False)
    last = len(t.store) - 1
    other = p.read_bytes().replace(b'"correlation": ', b'"correlatiox": ')
    with open(p, "r+b") as f:
        f.write(other)
    os.utime(p, ns=(1, 1))  # a write within the same clock tick could leave mtime as it was
    assert t.store.args(last) == {} and t.store.source is None
    replaced = load_trace(p, workers=1, cache=False)  # then replaced by a new file: the old map still reads
    p.unlink()
    p.write_bytes(b"{}")
    want = json.loads(other)["traceEvents"][int(replaced.store.file_index[last])]["args"]
    assert "correlatiox" in want and replaced.store.args(last) == want
