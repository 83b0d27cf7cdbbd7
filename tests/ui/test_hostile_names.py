"""File names and trace text are plain text everywhere: CLI errors and notices, --json output,
the app's pop-ups and titles; and the app's exit code follows the CLI's."""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from tracetui.cli.main import main
from tracetui.ui.app import TraceApp
from tracetui.ui.diff_view import DiffPane, DiffScreen

from tests.ui.test_app import wait_for

EVIL_FILE = "t\x1b]0;pwned\x07.json"  # would set the terminal's title
MARKUP_FILE = "[bold red]x[@click=app.quit]y.json"


def _trace(names: list[str]) -> bytes:
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0}]
    evs += [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1.0 + 5 * i, "dur": 2.0}
            for i, n in enumerate(names)]
    return json.dumps({"traceEvents": evs}).encode()


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("tracetui: error: ") and "Traceback" not in err
    assert not any(c in err for c in "\x1b\x07\x85\u202e")
    return err


def test_cli_error_line_shows_file_names_escaped(tmp_path, capsys):
    for name, shown in [(EVIL_FILE, "t\\x1b]0;pwned\\x07.json"), ("two\nlines.json", "two\\x0alines.json")]:
        p = tmp_path / name
        p.write_bytes(b"not json")
        assert main(["summary", str(p)]) == 2
        err = _one_line(capsys.readouterr().err)
        assert shown in err and "not JSON" in err


def test_folder_notice_shows_file_names_escaped(tmp_path, capsys):
    d = tmp_path / "run\x1b[2J"
    d.mkdir()
    for i, name in enumerate(["a.pt.trace.json", "b\x1b]0;x\x07.pt.trace.json"]):
        (d / name).write_bytes(_trace(["aten::mm"]))
        os.utime(d / name, (1000 + i, 1000 + i))
    assert main(["summary", str(d)]) == 0
    err = capsys.readouterr().err
    assert "opening the newest of 2 traces, b\\x1b]0;x\\x07.pt.trace.json" in err
    assert "run\\x1b[2J" in err and "\x1b" not in err and "\x07" not in err


def test_json_output_escapes_c1_bidi_and_line_separators(tmp_path, capsys):
    """The names come back equal once decoded; the bytes carry no raw C1, bidi or U+2028."""
    names = ["aten::a\x85b", "aten::rtl\u202eevil", "aten::line\u2028sep", "aten::zw\u200bj", "aten::del\x7f",
             "aten::é€ ok"]
    p = tmp_path / "names.json"
    p.write_bytes(_trace(names))
    for argv in (["summary", str(p), "--json", "--top", "0"], ["tree", str(p), "--json"],
                 ["diff", str(p), str(p), "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert not any(c in out for c in "\x7f\x85\u202e\u2028\u200b"), argv
        text = json.dumps(json.loads(out), ensure_ascii=False)
        for n in names:
            assert json.dumps(n, ensure_ascii=False)[1:-1] in text, (argv, n)
    assert main(["summary", str(p), "--json", "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert set(names) <= {o["name"] for o in json.loads(out)["ops"]}
    assert "aten::é€ ok" in out  # other text stays as it is, unescaped


def _run_app(app: TraceApp, script):
    async def run():
        async with app.run_test(size=(100, 30)) as pilot:
            await script(pilot)
    asyncio.run(run())


@pytest.mark.parametrize("name", ["x[/]y.json", MARKUP_FILE, EVIL_FILE])
def test_app_error_popup_shows_the_file_name_as_text_and_exit_code_is_2(tmp_path, name):
    p = tmp_path / name  # "x[/]y.json": a folder "x[" and a file "]y.json", "[/]" in the path
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(b"\x00\x01 nothing like JSON")
    app = TraceApp([p])

    async def script(pilot):
        await wait_for(pilot, lambda: app.failure is not None and app._notifications)
        note = list(app._notifications)[-1]
        assert note.markup is False and "not JSON" in note.message
        assert note.message.startswith(str(tmp_path)) and "\x1b" not in note.message
        await pilot.press("q")
    _run_app(app, script)
    assert app.return_code == 2


def test_diff_pane_titles_are_plain_text(tmp_path):
    a, b = tmp_path / MARKUP_FILE, tmp_path / "[red]b.json"
    a.write_bytes(_trace(["aten::mm"]))
    b.write_bytes(_trace(["aten::mm", "aten::add"]))
    app = TraceApp([a, b], diff=True)

    async def script(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
        await pilot.pause()
        titles = [w._border_title for w in app.screen.query("*") if getattr(w, "_border_title", None)]
        plain = sorted(t.plain for t in titles)
        # the panes carry the file names (the changes table has a fixed title of its own)
        assert sorted(w._border_title.plain for w in app.screen.query(DiffPane)) == sorted([MARKUP_FILE, "[red]b.json"])
        assert set(plain) - {MARKUP_FILE, "[red]b.json"} == {app.screen.query_one("#changes")._border_title.plain}
        assert all(not t.spans for t in titles)  # no style, no @click
        await pilot.press("q")
    _run_app(app, script)
    assert app.return_code == 0


def test_cli_open_exits_with_the_apps_code(tmp_path, monkeypatch, capsys):
    """`tracetui FILE` on a file that fails to decode: the app shows it, and on quit the process
    exits 2 with the same one line on stderr as `summary` gives."""
    p = tmp_path / EVIL_FILE
    p.write_bytes(b"{ not json")
    run = TraceApp.run

    def headless(self, **kw):
        async def auto(pilot):
            await wait_for(pilot, lambda: self.failure is not None)
            await pilot.press("q")
        return run(self, headless=True, size=(80, 24), auto_pilot=auto)
    monkeypatch.setattr(TraceApp, "run", headless)
    assert main([str(p)]) == 2
    app_err = _one_line(capsys.readouterr().err)
    assert main(["summary", str(p)]) == 2
    assert capsys.readouterr().err == app_err
