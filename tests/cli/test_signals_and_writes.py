"""SIGTERM ends the forked decode helper with the CLI; `gen -o` writes its files whole or not at all."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tracetui import atomic
from tracetui.read import split

# The CLI, with every forked helper made to sleep before its work: a stand-in for the 5-8 s a
# helper spends on the half of a 1 GB trace, long enough to see whether SIGTERM ends it.
SLOW_HELPER = """
import sys, time
import tracetui.read.forked as forked
spawn = forked.spawn
forked.spawn = lambda child: spawn(lambda: (time.sleep(60), child())[1])
from tracetui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def big_trace(tmp_path):
    """A trace just large enough for the two-process decode (``split.MIN_BYTES``)."""
    evs = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 50}", "pid": 1, "tid": 1, "ts": float(i),
            "dur": 0.5, "args": {"External id": i}} for i in range(170_000)]
    p = tmp_path / "big.json"
    p.write_bytes(json.dumps({"traceEvents": evs}).encode())
    assert p.stat().st_size >= split.MIN_BYTES
    return p


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="the forked helper runs on Linux with two cores")
def test_sigterm_kills_the_forked_decode_helper(tmp_path):
    helper_dies_with_the_cli(tmp_path, signal.SIGTERM)  # it dies of the signal, as before


def helper_dies_with_the_cli(tmp_path, sig: int) -> None:
    """``tracetui summary`` of a large trace, ``sig`` sent once its decode helper is forked: the
    CLI dies of the signal and the helper is gone within 2 s (killed here if not, after the check)."""
    p = big_trace(tmp_path)
    env = dict(os.environ, TRACETUI_PARALLEL="1")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_HELPER, "summary", str(p)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    helper = None
    try:
        deadline = time.monotonic() + 30
        while not _children(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, "no helper was forked"
            time.sleep(0.02)
        helper = _children(proc.pid)[0]
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == -sig
        deadline = time.monotonic() + 2
        while _running(helper):
            assert time.monotonic() < deadline, "the forked helper outlived the CLI"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if helper is not None and _running(helper):
            os.kill(helper, signal.SIGKILL)


def _full_disk_after(n_files: int, monkeypatch):
    """fsync fails with ENOSPC from the ``n_files + 1``-th file on, as a full disk does."""
    calls = []
    real = os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) > n_files:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)
    monkeypatch.setattr(atomic.os, "fsync", fsync)


@pytest.mark.parametrize("fails_at", [0, 1])
def test_write_all_leaves_old_files_or_none_on_a_full_disk(tmp_path, monkeypatch, fails_at):
    trace, sidecar, fresh = tmp_path / "t.json.gz", tmp_path / "t.key_averages.json", tmp_path / "new.json"
    trace.write_bytes(b"old trace")
    sidecar.write_bytes(b"old sidecar")
    _full_disk_after(fails_at, monkeypatch)
    with pytest.raises(OSError) as e:
        atomic.write_all({trace: b"new trace" * 1000, sidecar: b"new sidecar", fresh: b"x"})
    assert e.value.errno == errno.ENOSPC
    assert trace.read_bytes() == b"old trace" and sidecar.read_bytes() == b"old sidecar"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.json.gz", "t.key_averages.json"]  # no temp left
    monkeypatch.undo()
    atomic.write_all({trace: b"new trace", sidecar: b"new sidecar"})
    assert trace.read_bytes() == b"new trace" and sidecar.read_bytes() == b"new sidecar"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.json.gz", "t.key_averages.json"]


def test_gen_on_a_full_disk_writes_no_truncated_trace_and_no_empty_sidecar(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from tracetui.cli.main import main
    out = tmp_path / "linear.json.gz"
    _full_disk_after(0, monkeypatch)
    argv = ["gen", "linear", "--device", "cpu", "--no-stack", "--active", "1", "--batch", "2",
            "--in-features", "8", "--out-features", "8", "-o", str(out)]
    with pytest.raises(OSError):
        main(argv)
    assert list(tmp_path.iterdir()) == []  # (the success path: every other gen test)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_write_all_gives_files_the_mode_open_gives_them(tmp_path, umask):
    """`gen -o` wrote 0600 files (mkstemp's mode) while `record` writes 0644: the mode is now the
    one a plain open() gets under the same umask (the reference: a file made by open here)."""
    import os
    import stat

    from tracetui import atomic
    old = os.umask(umask)
    try:
        (tmp_path / "ref").write_bytes(b"x")
        atomic.write_all({tmp_path / "t.json.gz": b"trace", tmp_path / "t.key_averages.json": b"{}"})
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "ref").stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("t.json.gz", "t.key_averages.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want


def test_gen_writes_its_trace_with_the_mode_record_gets(tmp_path, capsys):
    pytest.importorskip("torch")
    import os
    import stat

    from tracetui.cli.main import main
    out = tmp_path / "linear.json.gz"
    old = os.umask(0o022)
    try:
        assert main(["gen", "linear", "--device", "cpu", "--no-stack", "--active", "1", "--batch", "2",
                     "--in-features", "8", "--out-features", "8", "-o", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
