"""Textual's Footer, rebuilt only when no key widget it has can show the new keys.

Textual's Footer recomposes (new key widgets, restyled, laid out) on every change of the
active bindings, a frame after the key that changed them, and a focus change is one: `/`
(tree -> search box), Enter (back) and every view switch (1-5) rebuilt it, ~30-50 ms of the
key's CPU on a 270k-event trace (cProfile, benchmarks/bench_ui.py). Here the same keys skip
the rebuild, and other keys are written into the key widgets already mounted, in the key's
own frame: each takes its new key and description, and those left over are hidden. Only a
change of the palette key, of compactness, a group of keys, or more keys than there are
widgets recomposes.
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


COMPACT_BELOW = 110
"""Under this many columns the footer drops the padding around its keys: at 80 columns the
padded keys ran past the edge and cut off `? Help`."""


class _Key(FooterKey):
    """A footer key whose new size (a new label) is not a second layout: Widget's virtual_size
    asks for one when it changes, which the layout that gave the size has just done."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0))


class StableFooter(Footer):
    _shown: tuple | None = None

    def compose(self) -> ComposeResult:
        """Footer.compose, with ``_Key`` for its keys (grouped keys: Footer's own)."""
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        if any(b.group is not None for _, b, _, _ in active.values() if b.show):
            yield from super().compose()
            return
        first: dict[str, tuple] = {}
        for _, binding, enabled, tooltip in active.values():
            if binding.show:
                first.setdefault(binding.action, (binding, enabled, tooltip))
        self.styles.grid_size_columns = len(first)
        for binding, enabled, tooltip in first.values():
            yield _Key(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                       disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE and palette is not None:
            _, binding, enabled, _ = palette
            yield _Key(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                       classes="-command-palette", disabled=not enabled,
                       tooltip=binding.tooltip or binding.description)

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
        if self._bindings_ready and self._relabel(screen, keys):
            self._shown = keys
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._shown = keys  # the recompose Footer just scheduled shows these

    def _relabel(self, screen: Screen, keys: tuple) -> bool:
        """Show ``keys`` in the key widgets mounted (False: they cannot, recompose)."""
        if self._shown is None or keys[1:] != self._shown[1:] or not screen.app.app_focus \
                or not self.is_attached or screen is not self.screen:
            return False
        wanted: dict[str, tuple] = {}  # one key per action, in order (as Footer.compose)
        for k in keys[0]:
            if k[5] is not None:  # a binding group: compose lays these out in their own widgets
                return False
            wanted.setdefault(k[1], k)
        mounted = [w for w in self.children if isinstance(w, FooterKey) and not w.has_class("-command-palette")]
        if len(wanted) > len(mounted) or len(mounted) != len(self.children) - self._palette_keys():
            return False
        # the keys wanted in the order of the widgets that show them now (`/` hides a few of the
        # tree's): those widgets keep their size, hidden ones come back at theirs, no relayout
        by_key = {(w.key, w.action, w.description): w for w in mounted}
        keep = [by_key.get(k[:3]) for k in wanted.values()]
        if all(keep) and all(mounted.index(a) < mounted.index(b) for a, b in zip(keep, keep[1:])):
            mounted = keep + [w for w in mounted if w not in keep]
        bindings = {(b.key, b.action): b for _, b, _, _ in screen.active_bindings.values()}
        for w, (key, action, description, enabled, tooltip, _) in zip(mounted, wanted.values()):
            if (w.key, w.action, w.description, w._disabled, w.tooltip or "") != (key, action, description,
                                                                                  not enabled, tooltip or ""):
                w.key, w.action, w.description = key, action, description
                w.key_display = self.app.get_key_display(bindings[key, action])
                w._disabled = not enabled
                w.set_class(not enabled, "-disabled")
                w.tooltip = tooltip or None
                w.refresh(layout=True)
            w.display = True
        for w in mounted[len(wanted):]:
            w.display = False
        return True

    def _palette_keys(self) -> int:
        return sum(1 for w in self.children if isinstance(w, FooterKey) and w.has_class("-command-palette"))
