"""Focus moved and restyled in the key that moves it, so the key draws one frame, not two.

``Screen.set_focus`` only posts Focus and Blur: the widgets take their ``:focus`` look from those
handlers (``has_focus``, then a restyle and a repaint), after the key's frame. The frame drew the
newly focused widget as blurred, and the next one drew it again, focused: on Enter's jump from the
memory view into the tree (270k events, 160x48) a second frame over the whole tree, 2-3 ms, and
the tree's ~44 rows built twice (a restyle invalidates a Tree's lines).

``focus_now`` sets both widgets' ``has_focus`` in the key (its watcher restyles them, which asks
for the repaints the new look needs) and asks for their repaint; the Focus and Blur that follow
find the state already set, and ``FocusApplied`` keeps them from repainting the widget again.
"""
from __future__ import annotations

from textual import events


def focus_now(screen, widget) -> None:
    """``screen.set_focus(widget)``, with the focused and the blurred widget restyled now."""
    before = screen.focused
    screen.set_focus(widget)
    if screen.focused is not widget or before is widget:
        return
    if before is not None:
        before.has_focus = False  # Widget.watch_has_focus restyles it
        before.refresh()          # what its Blur handler would ask, in this frame
    widget.has_focus = True
    widget.refresh()


class FocusApplied:
    """Mix in before a focusable Widget: a Focus or Blur that finds ``has_focus`` already set (by
    ``focus_now``) does not repaint the widget again; the parent hears of it as from Widget."""

    def _on_focus(self, event: events.Focus) -> None:
        if self.has_focus:
            event.prevent_default()  # not Widget._on_focus: restyled and repainted already
            if self.parent is not None:
                self.parent.post_message(events.DescendantFocus(self))

    def _on_blur(self, event: events.Blur) -> None:
        if not self.has_focus:
            event.prevent_default()
            if self.parent is not None:
                self.parent.post_message(events.DescendantBlur(self))
