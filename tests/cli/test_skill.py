"""`tracetui skill` (issue 36 part 3): the SKILL.md shipped in the package. Parsed here: every
command it names runs on the bundled traces, every flag it names exists in that subcommand's
--help, every key it names is bound, and its tables agree with the CLI (exit codes, row caps)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from importlib import resources

import pytest

from tracetui.cli.main import SUBCOMMANDS, _parser

from tests.compare.test_verdict import expected_rc
from tests.conftest import DATA, ROOT, TRACES

SKILL = resources.files("tracetui").joinpath("SKILL.md").read_text(encoding="utf-8")
PLACES = {"TRACE": TRACES / "transformer_eager.json.gz", "A": TRACES / "mlp_eager.json.gz",
          "B": TRACES / "mlp_compile.json.gz", "C": TRACES / "mlp_fused.json.gz",
          "MEMTRACE": TRACES / "transformer_eager_memory.json.gz", "RANKS": DATA / "gloo_rank0.pt.trace.json.gz",
          "NAME": "layer_norm"}
COMMANDS = sorted(set(re.findall(r"`(tracetui(?: [^`]*)?)`", SKILL)))
SERVERS = {"mcp"}  # runs until its client leaves: only its flags are checked


def _argv(cmd: str) -> list[str]:
    return [str(PLACES.get(w, w)) for w in shlex.split(cmd)[1:]]


def _tracetui(*argv, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracetui", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_skill_prints_the_packaged_file():
    p = _tracetui("skill")
    assert p.returncode == 0 and p.stdout == SKILL and p.stderr == ""
    assert '"tracetui" = ["SKILL.md"]' in (ROOT / "pyproject.toml").read_text()  # shipped as package data
    assert SKILL.startswith("---\nname: tracetui\ndescription: ")


def test_it_names_the_commands_the_issue_lists():
    named = {shlex.split(c)[1] for c in COMMANDS if len(shlex.split(c)) > 1}
    assert {"summary", "tree", "diff", "opportunities", "memory", "ranks", "mcp", "skill"} <= named
    assert any("--filter" in c and c.startswith("tracetui tree") for c in COMMANDS)
    assert any("--gate" in c and c.startswith("tracetui diff") for c in COMMANDS)
    assert any(_argv(c) and _argv(c)[0] not in SUBCOMMANDS for c in COMMANDS)  # the app hand-over


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if len(shlex.split(c)) > 1 and shlex.split(c)[1] in SUBCOMMANDS])
def test_every_flag_it_names_exists(cmd):
    sub = shlex.split(cmd)[1]
    help_text = _tracetui(sub, "--help").stdout
    for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", cmd):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), f"{cmd}: {flag} not in `tracetui {sub} --help`"


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_it_names_runs(cmd):
    argv = _argv(cmd)
    if argv and argv[0] in SERVERS:
        assert _tracetui(argv[0], "--help").returncode == 0
        return
    if argv and argv[0] not in SUBCOMMANDS and len(argv) == 1 and str(argv[0]).endswith("gloo_rank0.pt.trace.json.gz"):
        pytest.skip("tracetui RANKS opens the job view: it needs a terminal (`ranks RANKS` runs above)")
    p = _tracetui(*argv)
    want = 0
    if "--gate" in argv:
        want = expected_rc("mlp_eager", "mlp_compile", float(argv[argv.index("--gate") + 1]))
    assert p.returncode == want, f"{cmd}: exit {p.returncode}: {p.stderr[-300:]}"
    assert p.stdout.strip()
    if "--json" in argv:
        import json
        json.loads(p.stdout)  # one JSON document on stdout
        capped = re.findall(r"^tracetui: truncated: .*\(--top 0: all\)$", p.stderr, re.M)
        assert len(capped) <= 1 and (not p.stderr.strip() or capped or "opening" in p.stderr)


def test_exit_code_table_is_the_cli_contract():
    from tracetui.compare.verdict import EXIT_CODES
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", SKILL, re.M))
    assert {int(k) for k in table} == {c for c, _ in EXIT_CODES} | {130}


def test_caps_table_matches_the_parsers_defaults():
    sub = {a.dest: a for a in _parser()._subparsers._group_actions}["cmd"].choices
    for cmd, default in re.findall(r"^\| `(\w+)`[^|]*\|[^|]*\| `--top (\d+)` \|", SKILL, re.M):
        top = next(a for a in sub[cmd]._actions if a.dest == "top")
        assert top.default == int(default), cmd
    assert "20,000" in SKILL and _tracetui("mcp", "--help").returncode == 0


def test_keys_it_names_are_bound():
    from tracetui.ui.app import ExplorerScreen
    from tracetui.ui.diff_view import DiffScreen, LadderScreen
    keys = lambda screen: {k for b in screen.BINDINGS for k in b.key.split(",")}  # noqa: E731
    ex = keys(ExplorerScreen)
    for k in ("1", "2", "3", "4", "5", "slash", "O", "D"):
        assert k in ex, k
    assert {"l", "u"} <= keys(DiffScreen) and "enter" in keys(LadderScreen)
    assert "n" in {k for b in DiffScreen.BINDINGS for k in b.key.split(",")}
