"""`tracetui TRACE` into a pipe prints the report instead of starting the app; `-` reads stdin."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

from tracetui.cli.main import main

from tests.conftest import TRACES

A, B = TRACES / "linear_eager.json.gz", TRACES / "linear_compile.json.gz"


def out_of(capsys, *argv, code=0) -> str:
    assert main([str(a) for a in argv]) == code
    return capsys.readouterr().out


def err_of(capsys, *argv) -> str:
    """The one error line of a command that must fail with exit code 2."""
    assert main([str(a) for a in argv]) == 2
    return capsys.readouterr().err


def test_a_pipe_gets_the_summary_not_the_app():
    """A real pipe on stdout: the command ends by itself with the summary and no escape codes."""
    r = subprocess.run([sys.executable, "-m", "tracetui", str(A)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout
    ref = subprocess.run([sys.executable, "-m", "tracetui", "summary", str(A)], capture_output=True, timeout=60)
    assert r.stdout == ref.stdout and b"per step" in r.stdout


def test_two_traces_into_a_pipe_give_the_diff_text(capsys):
    assert out_of(capsys, A, B) == out_of(capsys, "diff", A, B, "--text")
    assert out_of(capsys, "diff", A, B) == out_of(capsys, "diff", A, B, "--text")  # diff itself too


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_dash_reads_a_trace_from_stdin(capsys, monkeypatch):
    direct = json.loads(out_of(capsys, "summary", A, "--json"))
    for data in (A.read_bytes(), gzip.decompress(A.read_bytes())):  # gzipped or not
        _stdin(monkeypatch, data)
        piped = json.loads(out_of(capsys, "summary", "-", "--json"))
        assert piped.pop("file") == "-"
        direct.pop("file", None)
        assert piped == direct
    _stdin(monkeypatch, A.read_bytes())
    assert out_of(capsys, "-").startswith("-: ")  # the default command, into a pipe: the summary
    _stdin(monkeypatch, A.read_bytes())
    piped = json.loads(out_of(capsys, "diff", "-", B, "--json"))
    direct = json.loads(out_of(capsys, "diff", A, B, "--json"))
    assert piped["a"].pop("file") == "-" and direct["a"].pop("file") == str(A)
    assert piped == direct


def test_stdin_respects_the_size_cap_and_bad_input(capsys, monkeypatch):
    data = gzip.decompress(A.read_bytes())
    monkeypatch.setenv("TRACETUI_MAX_BYTES", str(len(data) - 1))
    _stdin(monkeypatch, data)
    err = err_of(capsys, "summary", "-")
    assert err.startswith("tracetui: error: -: ") and "limit" in err and err.count("\n") == 1
    monkeypatch.setenv("TRACETUI_MAX_BYTES", str(len(data)))
    _stdin(monkeypatch, data)
    assert json.loads(out_of(capsys, "summary", "-", "--json"))["steps"] == 3  # exactly at the cap: read
    for bad, says in ((b"", "empty input"), (b"not json", "not JSON"), (b'{"traceEvents": [', "-: ")):
        _stdin(monkeypatch, bad)
        err = err_of(capsys, "summary", "-")
        assert err.startswith("tracetui: error: -: ") and says in err and err.count("\n") == 1, err
    _stdin(monkeypatch, data)
    assert "once" in err_of(capsys, "diff", "-", "-", "--text")
