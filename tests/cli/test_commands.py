"""The subcommands come from one list (issue 43, "the house"): tracetui/cli/main.py's
COMMAND_MODULES. The parser, the dispatch and the words that are commands (not a file to open) are
all derived from it, so a command can't be parsed but not dispatched, or dispatched but taken for a
file name. Checked here from the outside: the modules on disk, the parser argparse builds, and what
main() does with each word."""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tracetui.cli import main as cli_main

CLI = Path(cli_main.__file__).resolve().parent


def _declared_names() -> dict[str, tuple]:
    """Module stem -> the NAMES it assigns at top level, read from the source (not imported)."""
    out = {}
    for path in CLI.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NAMES" for t in node.targets):
                out[path.stem] = ast.literal_eval(node.value)
    return out


def _subparsers(p: argparse.ArgumentParser) -> dict:
    (action,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def test_every_command_module_on_disk_is_registered():
    """A module that declares NAMES but is missing from COMMAND_MODULES would never run: each one
    on disk is in the list, and the list holds nothing else."""
    declared = _declared_names()
    registered = {m.__name__.rsplit(".", 1)[-1]: m for m in cli_main.COMMAND_MODULES}
    assert set(declared) == set(registered)
    for stem, names in declared.items():
        m = registered[stem]
        assert callable(m.add_parser) and callable(m.run), stem
        assert tuple(m.NAMES) == tuple(names)


def test_the_parser_registers_exactly_the_declared_words():
    words = [w for names in _declared_names().values() for w in names]
    assert len(words) == len(set(words)), "two modules claim one word"
    assert set(_subparsers(cli_main._parser())) == set(words) == set(cli_main.SUBCOMMANDS)


@pytest.mark.parametrize("word", cli_main.SUBCOMMANDS)
def test_every_command_parses(word, capsys):
    """`tracetui WORD --help` is that command's help (exit 0), not `open`'s."""
    with pytest.raises(SystemExit) as e:
        cli_main._parser().parse_args([word, "--help"])
    assert e.value.code == 0
    assert f"usage: tracetui {word}" in capsys.readouterr().out


@pytest.mark.parametrize("word", cli_main.SUBCOMMANDS)
def test_one_commands_parser_is_the_whole_parsers_part(word, capsys):
    """main() declares only the named command's options (``_parser(word)``): its help, and what it
    makes of arguments, are the whole parser's."""
    helps = []
    for parser in (cli_main._parser(), cli_main._parser(word)):
        with pytest.raises(SystemExit):
            parser.parse_args([word, "--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and f"usage: tracetui {word}" in helps[0]
    assert set(_subparsers(cli_main._parser(word))) == set(cli_main.COMMANDS[word].NAMES)
    argv = [word] + {"gen": [], "skill": [], "mcp": [], "record": ["x.py"]}.get(word, ["trace.json"])
    try:
        whole = cli_main._parser().parse_args(argv)
    except SystemExit:  # a command that needs more than one path (diff): both refuse alike
        with pytest.raises(SystemExit):
            cli_main._parser(word).parse_args(argv)
        return
    assert vars(cli_main._parser(word).parse_args(argv)) == vars(whole)


@pytest.mark.parametrize("word", cli_main.SUBCOMMANDS)
def test_a_command_word_never_falls_through_to_open(word, monkeypatch):
    """main() routes each word to its own module's run(), whatever else the command line holds,
    and never prepends `open` (which would try to open a file called WORD)."""
    seen = []
    monkeypatch.setattr(cli_main, "_parser", lambda cmd=None: _Recorder())
    for m in cli_main.COMMAND_MODULES:
        monkeypatch.setattr(m, "run", lambda args, m=m: seen.append((m, args.cmd)) or 0)
    assert cli_main.main([word, "x"]) == 0
    assert seen == [(cli_main.COMMANDS[word], word)]


class _Recorder:
    """A parser that keeps the first word as the command (what argparse does with a known word)."""

    def parse_args(self, argv):
        return argparse.Namespace(cmd=argv[0], rest=argv[1:])


def test_a_word_that_is_not_a_command_opens_a_file(monkeypatch):
    """The other side of the rule: anything else is a trace to open."""
    seen = []
    monkeypatch.setattr(cli_main, "_parser", lambda cmd=None: _Recorder())
    monkeypatch.setattr(cli_main.COMMANDS["open"], "run", lambda args: seen.append(args.cmd) or 0)
    assert cli_main.main(["some_trace.json"]) == 0
    assert seen == ["open"]


def test_the_help_lists_every_command():
    p = subprocess.run([sys.executable, "-m", "tracetui", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for word in cli_main.SUBCOMMANDS:
        assert f"\n    {word} " in p.stdout or f"\n    {word}\n" in p.stdout, word
