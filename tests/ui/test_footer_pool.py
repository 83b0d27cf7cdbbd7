"""The footer's pool of key widgets (tracetui/ui/footer.py ``merged``): every set of keys shown
so far stays a subsequence of the pool, so a later switch back only shows and hides widgets."""
from __future__ import annotations

import itertools

from tracetui.ui.footer import merged


def _k(name: str) -> tuple:
    return (name.lower(), f"act_{name}", f"desc {name}", True, "", None)


def _is_subsequence(small: list, big: list) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def test_every_view_seen_stays_a_subsequence_of_the_pool():
    tree = [_k(c) for c in ("slash", "n", "o", "x", "p", "q", "help", "open")]
    search = [_k(c) for c in ("slash", "help", "open")]
    timeline = [_k(c) for c in ("plus", "minus", "f", "m", "enter", "slash", "n", "o", "x", "p", "q", "help")]
    ops = [_k(c) for c in ("s", "slash", "n", "o", "x", "p", "q", "help", "open")]
    for order in itertools.permutations([tree, search, timeline, ops]):
        pool: list = []
        for view in order:
            if not _is_subsequence(view, pool):
                pool = merged(view, pool)
            assert _is_subsequence(view, pool)
        assert len(pool) == len({k[1] for view in order for k in view})  # each key once
        assert all(_is_subsequence(view, pool) for view in order)  # every view: show and hide only


def test_a_new_key_name_for_an_action_is_a_widget_of_its_own_next_to_the_old():
    """`?` and `f1` are both Help (the search box takes `?`): two widgets side by side, one
    shown, so opening the search hides one and shows the other, resizing nothing."""
    help_q, help_f1 = _k("help"), ("f1",) + _k("help")[1:]
    tree, search = [_k("slash"), _k("n"), help_q, _k("open")], [_k("slash"), help_f1, _k("open")]
    pool = merged(search, merged(tree, []))
    assert pool == [_k("slash"), _k("n"), help_q, help_f1, _k("open")]
    assert _is_subsequence(tree, pool) and _is_subsequence(search, pool)
