"""--json where orjson gives up (issue 44 items 8 and 9): a file name that is not UTF-8 was a
TypeError traceback; a 30 MB name under an address-space limit crashed the process with SIGSEGV
inside orjson.dumps (its per-string reservation, about 8 bytes a character, failed and was not
checked). Now the name is written as the escape Python reads back to the same path, and under a
limit the JSON is complete or the run is one line, exit 2."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TRACES


@pytest.fixture
def odd_name(tmp_path):
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff\xfe.json.gz")  # surrogate escapes
    shutil.copyfile(TRACES / "mlp_eager.json.gz", path)
    return path


@pytest.mark.parametrize("argv", [["summary", "{p}", "--json"], ["tree", "{p}", "--json", "--depth", "1"],
                                  ["diff", "{p}", str(TRACES / "mlp_compile.json.gz"), "--json"],
                                  ["memory", "{p}", "--json"]])
def test_a_file_name_that_is_not_utf8_round_trips_through_json(odd_name, argv):
    p = subprocess.run([sys.executable, "-m", "tracetui", *[a.format(p=odd_name) for a in argv]],
                       capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # valid JSON (ASCII escapes), and the name is the file's own path
    names = [doc.get("file"), doc.get("name"), (doc.get("a") or {}).get("file")]
    assert odd_name in names or os.path.basename(odd_name) in names, names
    assert b"\\udcff\\udcfe" in p.stdout


@pytest.mark.parametrize("fmt", ["text", "csv", "md"])
def test_the_other_formats_show_the_name_too(odd_name, fmt):
    p = subprocess.run([sys.executable, "-m", "tracetui", "summary", odd_name, "--format", fmt],
                       capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stderr.count(b"Traceback") == 0, p.stderr


HUGE = 30_000_000
WITH_CACHE = {k: v for k, v in os.environ.items() if k != "TRACETUI_NO_CACHE"}
"""The default run, reopen cache on (in the tests' own XDG_CACHE_HOME), as a user runs it: the
cache's msgpack write runs under the same caps as the JSON writer."""


@pytest.fixture(scope="module")
def huge_name(tmp_path_factory):
    """One op named 30 MB of `a` plus `x` inside one ProfilerStep: small enough to load in a second."""
    path = tmp_path_factory.mktemp("huge") / "huge.json"
    name = "a" * HUGE + "x"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 200}]}))
    return path


def _base_vm() -> int:
    """Address space of the CLI's process once its modules are imported (the caps start above it)."""
    code = ("import tracetui.cli.main, tracetui.model, tracetui.report.summary, numpy\n"
            "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize')][0] * 1024)")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
@pytest.mark.parametrize("cmd", ["summary", "tree"])
def test_a_huge_name_under_an_address_space_limit_is_whole_json_or_one_line(huge_name, cmd):
    """From just above what the imports take to well past what the run needs: every cap gives
    either the whole document (the name in it, as written) or one line and exit 2, never a signal."""
    base = _base_vm()
    seen = set()
    for extra_mb in range(100, 451, 50):
        cap = base + (extra_mb << 20)
        p = subprocess.run([sys.executable, "-m", "tracetui", cmd, str(huge_name), "--json"], capture_output=True,
                           cwd=ROOT, timeout=120, env=WITH_CACHE,
                           preexec_fn=lambda cap=cap: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
        assert p.returncode in (0, 2), (extra_mb, p.returncode, p.stderr[-500:])  # before: -11 (SIGSEGV)
        if p.returncode == 2:
            lines = p.stderr.decode().splitlines()
            assert len(lines) == 1 and lines[0].startswith("tracetui: error: ") and "memory" in lines[0], lines
        else:
            doc = json.loads(p.stdout)
            text = json.dumps(doc)
            assert '"' + "a" * HUGE + 'x"' in text  # the whole name, uncut
        seen.add(p.returncode)
    assert 0 in seen  # the range reaches a cap where the document is written
