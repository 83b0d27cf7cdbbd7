"""Every write of output is checked (issue 44 items 2 and 5): a full disk, a file over `ulimit -f`,
stdout closed and a broken pipe give one line and exit 2, never a traceback and never exit 0 with a
cut file. Each run is a fresh process whose stdout is broken for real (tests/corpus.py); the whole
matrix, every command in every format under every fault, is `benchmarks/corpus_cli.py
--output-faults`. Before the fix: --json/csv/md over `ulimit -f` exited 0 with 2,048 bytes of the
document, /dev/full and `>&-` were tracebacks (OSError, AttributeError on None)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, TRACES
from tests.corpus import OUTPUT_FAULTS, OUTPUT_FSIZE, output_commands, output_fault_ok, run_output_fault

COMMANDS = dict(output_commands())
SUMMARY = ["summary", str(TRACES / "mlp_eager.json.gz")]


@pytest.mark.parametrize("fault", OUTPUT_FAULTS)
@pytest.mark.parametrize("fmt", ["text", "json", "csv", "md"])
def test_summary_in_every_format_under_every_fault(fault, fmt, tmp_path):
    r = run_output_fault(SUMMARY + ["--format", fmt, "--top", "0"], fault, tmp_path)
    assert output_fault_ok(r), r
    if fault == "ulimit_f":
        assert r["written"] <= OUTPUT_FSIZE  # cut, and the exit code says so


@pytest.mark.parametrize("label", ["tree json", "diff json", "ranks json", "ladder csv", "memory md",
                                   "opportunities text", "skill text", "open text"])
def test_every_command_under_a_file_size_limit(label, tmp_path):
    """The issue's case: a CI job writing --json to a file got a broken document and exit 0."""
    r = run_output_fault(COMMANDS[label], "ulimit_f", tmp_path)
    assert output_fault_ok(r), r


def test_the_whole_output_reaches_a_healthy_file(tmp_path):
    """The other side: with room to write, the file holds the whole document, exit 0."""
    out = tmp_path / "s.json"
    with open(out, "wb") as f:
        p = subprocess.run([sys.executable, "-m", "tracetui", *SUMMARY, "--json", "--top", "0"], stdout=f,
                           stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stderr == b""
    import json
    doc = json.loads(out.read_bytes())
    assert doc["file"].endswith("mlp_eager.json.gz") and len(out.read_bytes()) > OUTPUT_FSIZE


def test_closed_stdin_is_one_line(tmp_path):
    """`summary - <&-`: stdin closed was an AttributeError traceback."""
    import os
    p = subprocess.run([sys.executable, "-m", "tracetui", "summary", "-"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, preexec_fn=lambda: os.close(0))
    assert p.returncode == 2 and p.stderr == "tracetui: error: -: stdin is closed: nothing to read a trace from\n"


class _ShortWrites:
    """A binary stream that takes at most ``n`` bytes a call and fails once ``cap`` are in: what a
    file over `ulimit -f` does (a short write, then EFBIG)."""

    def __init__(self, n: int, cap: int):
        self.n, self.cap, self.data = n, cap, bytearray()

    def write(self, b) -> int:
        import errno
        room = self.cap - len(self.data)
        if room <= 0:
            raise OSError(errno.EFBIG, "File too large")
        k = min(len(b), self.n, room)
        self.data += bytes(b[:k])
        return k

    def flush(self) -> None:
        pass


class _Stdout:
    """sys.stdout over a _ShortWrites buffer (what TextIOWrapper over a file is, to output.py)."""
    encoding = "utf-8"

    def __init__(self, buffer):
        self.buffer = buffer

    def flush(self) -> None:
        self.buffer.flush()


def test_short_writes_are_retried_then_the_error_is_raised(monkeypatch):
    """In process: a stream that takes 7 bytes a call gets the whole text; one that stops at 100
    bytes raises OutputError (the retry loop, without a subprocess)."""
    from tracetui.report import output
    doc = {"name": "x" * 500, "n": list(range(50))}
    whole = _ShortWrites(7, 1 << 20)
    monkeypatch.setattr(sys, "stdout", _Stdout(whole))
    output.write_json(doc)
    import json
    assert json.loads(bytes(whole.data)) == doc
    cut = _ShortWrites(7, 100)
    monkeypatch.setattr(sys, "stdout", _Stdout(cut))
    with pytest.raises(output.OutputError, match="File too large"):
        output.write_json(doc)
    assert len(cut.data) == 100
