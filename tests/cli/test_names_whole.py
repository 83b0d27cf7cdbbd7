"""Issue 43 item 1: names were cut until they meant nothing (``summary`` at 58/42 characters, diff
rows, opportunities, ladder rungs), often with no ``…``. Piped or redirected output now writes every
name whole; on a terminal a name column gets what the figures leave, head … tail, and different
names never read alike. Checked against the raw JSON's names and the reports' own --json rows."""
from __future__ import annotations

import fcntl
import gzip
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from tests.conftest import TRACES

MLP = [TRACES / f"mlp_{x}.json.gz" for x in ("eager", "compile", "fused")]
GPU = TRACES / "transformer_eager.json.gz"
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


def raw_names(path) -> set[str]:
    with gzip.open(path, "rt") as f:
        return {e.get("name", "") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}


def piped(*args) -> str:
    p = subprocess.run([sys.executable, "-m", "tracetui", *map(str, args)], capture_output=True, text=True,
                       env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def in_pty(*args, cols: int = 80) -> str:
    """``tracetui ARGS`` with stdout on a pseudo-terminal ``cols`` wide, as a user at a terminal sees it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "tracetui", *map(str, args)], stdout=slave,
                         stderr=subprocess.DEVNULL, env=ENV)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    p.wait(timeout=300)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def table_rows(out: str, title: str, skip: int = 1) -> list[str]:
    """The rows of the text table under the line starting with ``title`` (after ``skip`` header lines)."""
    lines = out.split("\n")
    i = next(k for k, ln in enumerate(lines) if ln.startswith(title))
    rows = []
    for ln in lines[i + 1 + skip:]:
        if not ln.strip() or not ln.startswith("  "):
            break
        rows.append(ln)
    return rows


SUMMARY_TABLES = (("top kernels by device time", 3, "kernels"), ("top ops", 5, "ops"))


@pytest.mark.parametrize("path", [MLP[0], GPU], ids=lambda p: p.name)
def test_piped_summary_writes_every_name_whole(path):
    names = raw_names(path)
    out = piped("summary", path, "--top", "0")
    j = json.loads(piped("summary", path, "--json", "--top", "0"))
    for title, figures, key in SUMMARY_TABLES:
        rows = table_rows(out, title)
        shown = [r.split(None, figures)[figures] for r in rows]
        want = [o["name"] for o in j[key]]
        assert shown == want, (title, [(s, w) for s, w in zip(shown, want) if s != w][:3])
        assert all(n in names or n == "ProfilerStep*" for n in shown)
    first = [r for r in table_rows(out, "kernels in ", skip=0) if " <- " in r]
    step_names = {k["name"] for k in j["first_step_kernels"]}
    assert first and all(r.split(" µs  ", 1)[1].split("  <- ")[0] in step_names for r in first), first[:2]  # whole


def test_piped_diff_ladder_and_opportunities_write_names_whole():
    names = set().union(*(raw_names(p) for p in MLP[:2]))
    out = piped("diff", MLP[0], MLP[1], "--text")
    j = json.loads(piped("diff", MLP[0], MLP[1], "--json"))
    rows = table_rows(out, "kernels per step")
    assert len(rows) == len(j["kernels"])
    for r, k in zip(rows, j["kernels"]):
        assert f"  {k['status']:8s}  {k['name']}" in r and k["name"] in names, r
    for f in j["fused"]:
        for a in f["replaces"]:
            assert f"    - {a}\n" in out  # the kernels a fusion replaced, whole
    ladder = piped("diff", *MLP)
    for p in MLP:  # a rung's name whole ("mlp_max_autotu" was cut at 14)
        assert re.search(rf"^  {re.escape(p.name.split('.')[0])} +[\d,.]+ ", ladder, re.M), ladder[:400]
    opp = piped("opportunities", GPU)
    listed = [ln[5:] for ln in opp.split("\n") if ln.startswith("   - ")]
    gpu_names = raw_names(GPU)  # once, not once per listed kernel
    assert listed and all(k in gpu_names for k in listed), [k for k in listed if k not in gpu_names][:2]


def _distinct(rendered: list[str], raw: list[str]) -> None:
    """No two different raw names render alike, and each rendering fits in one line."""
    by: dict[str, set[str]] = {}
    for s, r in zip(rendered, raw):
        by.setdefault(s, set()).add(r)
    clash = {s: v for s, v in by.items() if len(v) > 1}
    assert not clash, clash


@pytest.mark.parametrize("path", [MLP[0], GPU], ids=lambda p: p.name)
def test_at_an_80_column_terminal_no_two_names_read_alike(path):
    out = in_pty("summary", path, "--top", "0")
    j = json.loads(piped("summary", path, "--json", "--top", "0"))
    for title, figures, key in SUMMARY_TABLES:
        rows = table_rows(out, title)
        assert all(len(r) <= 80 for r in rows), max(rows, key=len)
        _distinct([r.split(None, figures)[figures] for r in rows], [o["name"] for o in j[key]])


def test_at_an_80_column_terminal_diff_rows_stay_apart():
    out = in_pty("diff", MLP[0], MLP[1], "--text")
    j = json.loads(piped("diff", MLP[0], MLP[1], "--json"))
    rows = table_rows(out, "kernels per step")
    shown = [re.split(r"  \(", re.search(r"[+-][\d,.]+  \w+ +(.*)$", r).group(1))[0] for r in rows]
    assert len(shown) == len(j["kernels"])
    _distinct(shown, [k["name"] for k in j["kernels"]])


def test_piped_tree_and_memory_write_every_name_whole():
    """The other text commands: tree's op, kernel and runtime rows and memory's per-op rows carry
    the raw JSON's names whole."""
    names = raw_names(MLP[0])
    out = piped("tree", MLP[0], "--depth", "12")
    rows = re.findall(r"^ *(.+?) \[(op|kernel|runtime)\] ", out, re.M)
    assert rows and all(n in names for n, _ in rows), [n for n, _ in rows if n not in names][:3]
    mem = TRACES / "transformer_eager_memory.json.gz"
    out = piped("memory", mem, "--top", "0")
    block = out.split("\nper op")[1].split("\n\n")[0].splitlines()[2:]
    ops = [re.split(r"\s{2,}", ln.strip())[-1] for ln in block if ln.strip()]
    mem_names = raw_names(mem)  # once: it parses the whole recording (was once per op row, 40 s)
    assert ops and all(o in mem_names for o in ops), [o for o in ops if o not in mem_names][:3]
