"""The modal screens the App opens over any other: the key map (`?`) and the open-a-file prompt
(ctrl+o)."""
from __future__ import annotations

import re
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label

HELP_MD = (Path(__file__).with_name("help.md")).read_text(encoding="utf-8")


def help_text(first: str | None = None) -> str:
    """help.md, with the ``## first…`` section moved up under the title (the screen's own keys
    first: the job view's were at the end, after the explorer's and the timeline's)."""
    parts = re.split(r"(?m)^(?=## )", HELP_MD)
    head, sections = parts[0], parts[1:]
    mine = [p for p in sections if first and p.startswith(f"## {first}")]
    return head + "".join(mine + [p for p in sections if p not in mine])


class HelpScreen(ModalScreen):
    """help.md, the screen it was opened over first."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close help")]

    def __init__(self, first: str | None = None):
        super().__init__()
        self.first = first

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            from textual.widgets import Markdown  # noqa: PLC0415 - markdown-it cost ~30 ms of every start-up
            yield Markdown(help_text(self.first))


class OpenScreen(ModalScreen[str]):
    """A path to open; dismissed with what was typed."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box"):
            yield Label("Open a trace file or folder (Enter to open, Esc to cancel):")
            yield Input(placeholder="path/to/trace.json.gz", id="open-path")

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())
