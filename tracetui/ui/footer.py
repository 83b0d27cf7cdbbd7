"""Textual's Footer, rebuilt only when the keys it shows change.

Textual's Footer recomposes (new key widgets, restyled, laid out) on every change of the
active bindings, and a focus change is one: `/` (tree -> search box) and Enter (back) each
rebuilt the same footer. The search box and the tree show no keys of their own, so the
footer's keys stay the same and the rebuild is skipped.
"""
from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


COMPACT_BELOW = 110
"""Under this many columns the footer drops the padding around its keys: at 80 columns the
padded keys ran past the edge and cut off `? Help`."""


class StableFooter(Footer):
    _shown: tuple | None = None

    def on_resize(self, event) -> None:
        narrow = event.size.width < COMPACT_BELOW
        self.compact = narrow
        self.show_command_palette = not narrow  # docked right, it covered `? Help` (ctrl+p still works)

    def _keys(self, screen: Screen) -> tuple:
        """Everything Footer.compose reads from the active bindings."""
        shown = tuple((b.key, b.action, b.description, enabled, tooltip, b.group and b.group.description)
                      for _, b, enabled, tooltip in screen.active_bindings.values() if b.show)
        palette = screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return shown, palette[2] if palette else None, self.show_command_palette, self.compact

    def bindings_changed(self, screen: Screen) -> None:
        keys = self._keys(screen)
        if self._bindings_ready and keys == self._shown:
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._shown = keys  # the recompose Footer just scheduled shows these
