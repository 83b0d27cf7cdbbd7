"""The explorer's views as one line of labels: the keys 1-5 (or a click) switch them.

One Static in place of TabbedContent's tab strip (ContentTabs, one ContentTab per view, an
underline bar and a TabPane around each view): those widgets were styled and laid out before
the first screen could show, 0.06 s of it on the bundled trace (first_screen_pty, 7 rounds).
"""
from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

VIEWS = (("tree", "Tree"), ("kernels", "Kernels"), ("ops", "Ops"), ("timeline", "Timeline"), ("memory", "Memory"))
"""(id, label) of each view, in key order: key 1 is the first."""


class TabBar(Static):
    """Which view is shown; the labels are ours, never a trace's, so they may carry actions."""

    active: reactive[str] = reactive("tree")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._drawn: dict[str, Content] = {}

    def render(self) -> Content:
        """The labels with ``active`` highlighted: parsed once per view (a view switch redraws
        this line; parsing the markup again cost ~0.6 ms of it)."""
        content = self._drawn.get(self.active)
        if content is None:
            content = self._drawn[self.active] = self._labels()
        return content

    def _labels(self) -> Content:
        parts = []
        for i, (view, label) in enumerate(VIEWS, start=1):
            style = "reverse bold" if view == self.active else "dim"
            parts.append(Content.from_markup(f"[@click=screen.tab('{view}')][{style}] {i} {label} [/][/]"))
        return Content(" ").join(parts)
