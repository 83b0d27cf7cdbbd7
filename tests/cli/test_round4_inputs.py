"""Issue 44's small ones, each through the CLI as a user runs it: a path component over NAME_MAX
(item 11), ``summary - < /dev/zero`` (12), SIGHUP or SIGKILL during a load (13), an empty path (14).
Each answer is one line and a non-zero exit, never a traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.test_signals_and_writes import helper_dies_with_the_cli

TRACE = {"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                          "ts": 0, "dur": 10}]}
NAME_MAX = os.pathconf("/", "PC_NAME_MAX") if hasattr(os, "pathconf") else 255


def _cli(*args, cwd, stdin=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "tracetui", *map(str, args)], cwd=cwd, stdin=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _one_line_error(r, *words):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tracetui: error: "), r.stderr[-3000:]
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("argv", [["summary", "{long}.json"], ["tree", "{long}.json"], ["memory", "{long}.json"],
                                  ["opportunities", "{long}.json"], ["open", "{long}.json"],
                                  ["diff", "{long}.json", "t.json"], ["summary", "{long}/t.json"],
                                  ["ranks", "{long}"], ["index", "-o", "out", "{long}"]])
def test_a_name_over_name_max_is_one_line(tmp_path, argv):
    (tmp_path / "t.json").write_text(json.dumps(TRACE))
    long = "a" * (NAME_MAX + 1)
    r = _cli(*[a.format(long=long) for a in argv], cwd=tmp_path)
    _one_line_error(r)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["summary", ""], ["tree", ""], ["memory", ""], ["opportunities", ""], [""],
                                  ["diff", "", "t.json"], ["ranks", ""], ["index", "-o", "", "t.json"]])
def test_an_empty_path_is_an_error_not_the_current_folder(tmp_path, argv):
    (tmp_path / "t.json").write_text(json.dumps(TRACE))  # what "" used to open: the folder's newest trace
    (tmp_path / "w.pt.trace.json").write_text(json.dumps(TRACE))
    r = _cli(*argv, cwd=tmp_path)
    _one_line_error(r, "empty path")
    assert r.stdout == ""


def test_stdin_of_nuls_is_refused_before_it_is_read(tmp_path):
    with open("/dev/zero", "rb") as zero:
        t0 = time.monotonic()
        r = _cli("summary", "-", cwd=tmp_path, stdin=zero, timeout=120)
        took = time.monotonic() - t0
        read = os.lseek(zero.fileno(), 0, os.SEEK_CUR)  # /dev/zero's offset: what the CLI read
    _one_line_error(r, "not JSON")
    assert read < 16 << 20, f"read {read:,} bytes of NULs first ({took:.1f} s)"


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="the forked helper runs on Linux with two cores")
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP", "SIGKILL"])
def test_the_decode_helper_dies_with_the_cli(tmp_path, sig):
    """An SSH session closing sends SIGHUP: no handler of ours runs (SIGTERM's does), and the
    helper went on after the CLI was gone (about 3 s on a real trace; here it sleeps 60 s first)."""
    helper_dies_with_the_cli(tmp_path, sig)
