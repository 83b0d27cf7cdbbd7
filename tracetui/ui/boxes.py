"""Containers that draw nothing of their own, painted as blank lines of their background.

A container's own lines are drawn again whenever it is refreshed: showing or hiding a view (its
box's ``display``), the switcher's ``current`` and the screen's focus change are each one. Through
Textual's StylesCache that cost ~0.8 ms per 160x48 box, for lines its children cover: 3-4 ms of
every view switch (1-5, Enter's jump from the memory view) on a 270k-event trace. These boxes have
no border, padding or content, so their lines are their background (Widget.BLANK), as the
snapshot tests check.
"""
from __future__ import annotations

from textual.containers import Container, Horizontal, Vertical
from textual.widgets import ContentSwitcher


class Box(Container):
    BLANK = True


class HBox(Horizontal):
    BLANK = True


class VBox(Vertical):
    BLANK = True


class Switcher(ContentSwitcher):
    BLANK = True
