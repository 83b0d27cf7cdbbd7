"""Textual's Footer, whose key widgets are kept and shown or hidden as the active keys change.

Textual's Footer recomposes (new key widgets, restyled, laid out) on every change of the
active bindings, a frame after the key that changed them, and a focus change is one: `/`
(tree -> search box), Enter (back) and every view switch (1-5) rebuilt it, ~30-50 ms of the
key's CPU on a 270k-event trace (cProfile, benchmarks/bench_ui.py). Here the footer keeps a
pool of key widgets, every key it has shown, in an order where each set of keys shown so far
is a subsequence: a change shows the pool's widgets of the new keys and hides the others, in
the key's own frame. A key the pool lacks recomposes once, with the pool and the new keys
merged; so do a new palette key, a change of compactness, and grouped keys (Footer's own).
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
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


def _ident(k: tuple) -> tuple:
    """What makes a key the same widget in the pool: key, action and description (`? Help` and
    `f1 Help`, when the search box takes `?`, are two widgets, one shown: no relabel, no resize)."""
    return k[0], k[1], k[2]


def merged(wanted: list[tuple], pool: list[tuple]) -> list[tuple]:
    """``wanted`` in its order, with each key of ``pool`` it lacks after the key before it in
    ``pool`` (the pool's first keys first): both stay subsequences where they can."""
    out = list(wanted)
    have = {_ident(k) for k in out}
    for j, k in enumerate(pool):
        if _ident(k) in have:
            continue
        prev = _ident(pool[j - 1]) if j else None
        at = next((i + 1 for i, o in enumerate(out) if _ident(o) == prev), 0)
        out.insert(at, k)
        have.add(_ident(k))
    return out


class StableFooter(Footer):
    _shown: tuple | None = None
    _pool: list[tuple] | tuple = ()
    """Per key widget mounted, in order: (key, action, description, enabled, tooltip, group)."""
    # its keys' total width, which showing and hiding keys changes in the layout that placed
    # them: no second layout for it (scrolling the footer still follows it)
    virtual_size: Reactive[Size] = Reactive(Size(0, 0))
    # its scrollbars are 0 cells (Footer's CSS): whether one is "shown" when the keys overflow
    # (the timeline's at 120 columns) changes no layout
    show_horizontal_scrollbar: Reactive[bool] = Reactive(False)
    show_vertical_scrollbar: Reactive[bool] = Reactive(False)

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def _wanted(self, keys: tuple) -> list[tuple]:
        """One key per action, the first, in order (as Footer.compose)."""
        first: dict[str, tuple] = {}
        for k in keys[0]:
            first.setdefault(k[1], k)
        return list(first.values())

    def compose(self) -> ComposeResult:
        """Footer.compose with ``_Key`` widgets for the pool (grouped keys: Footer's own)."""
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        keys = self._keys(self.screen)
        if any(k[5] is not None for k in keys[0]):
            self._pool = ()
            yield from super().compose()
            return
        wanted = self._wanted(keys)
        shown = {_ident(k) for k in wanted}
        self._pool = merged(wanted, self._pool)
        self.styles.grid_size_columns = len(wanted)
        for key, action, description, enabled, tooltip, _ in self._pool:
            w = _Key(key, self.app.get_key_display(self._binding(key, action)), description, action,
                     disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
            w.display = (key, action, description) in shown
            yield w
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE and palette is not None:
            _, binding, enabled, _ = palette
            yield _Key(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                       classes="-command-palette", disabled=not enabled,
                       tooltip=binding.tooltip or binding.description)

    def _binding(self, key: str, action: str):
        """The active binding of ``key`` and ``action`` (the pool's hidden keys: any screen's)."""
        for _, b, _, _ in self.screen.active_bindings.values():
            if b.key == key and b.action == action:
                return b
        return Binding(key, action)

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
        if self._bindings_ready and self._show_from_pool(screen, keys):
            self._shown = keys
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._shown = keys  # the recompose Footer just scheduled shows these

    def _show_from_pool(self, screen: Screen, keys: tuple) -> bool:
        """Show ``keys`` with the pool's widgets (False: the pool cannot, recompose)."""
        if self._shown is None or keys[1:] != self._shown[1:] or not screen.app.app_focus \
                or not self.is_attached or screen is not self.screen:
            return False
        wanted = self._wanted(keys)
        if any(k[5] is not None for k in wanted):
            return False
        mounted = [w for w in self.children if isinstance(w, _Key) and not w.has_class("-command-palette")]
        if len(mounted) != len(self._pool) or len(mounted) + self._palette_keys() != len(self.children):
            return False
        at = {_ident(k): i for i, k in enumerate(self._pool)}
        where = [at.get(_ident(k), -1) for k in wanted]
        if -1 in where or where != sorted(where):
            return False
        show = dict(zip(where, wanted))
        toggled = False
        for i, w in enumerate(mounted):
            k = show.get(i)
            # display set as a rule, and one layout of the screen asked directly: a widget's
            # refresh(layout=True) posts its Layout from its own message loop at its next idle,
            # and one that came after the screen's next frame laid the screen out a second time
            toggled |= w.styles.set_rule("display", "block" if k is not None else "none")
            if k is not None and (w._disabled, w.tooltip or "") != (not k[3], k[4] or ""):
                w._disabled = not k[3]
                w.set_class(not k[3], "-disabled")
                w.tooltip = k[4] or None
                self._pool[i] = k
        if toggled:
            self._nodes.updated()  # the displayed children, and the arrangement keyed on them
            self.screen.refresh(layout=True)  # the screen's own flag: its next frame lays out, once
        return True

    def _palette_keys(self) -> int:
        return sum(1 for w in self.children if isinstance(w, FooterKey) and w.has_class("-command-palette"))
