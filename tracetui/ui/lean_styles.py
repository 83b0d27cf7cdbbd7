"""A widget's lines styled once per paint, not once per line: Textual's StylesCache, lean.

Textual's StylesCache.render_line works out, for every line of every widget it paints, the
widget's border, outline, padding, hatch, tint and opacity, and the styles of its left and right
border, before it draws the line: ~20 µs a line of Python that gives the same answer for every
line of one paint. Enter's jump from the memory view paints ~44 new rows of the tree and ~44 of
the detail pane at 160x48 (270k-event trace), a view switch the memory view's tables.

``LeanStylesCache`` works that out once per paint. A line between the top and bottom gutter of a
widget with no outline, hatch, tint, text opacity or opacity (the tree, the detail pane, the
line tables) is drawn as StylesCache draws it there (content line fitted to the content width,
padded, its left and right border added); every other line and widget goes to StylesCache. It
relies on Textual 8.2's StylesCache.render and render_line; tests/ui/test_lean_styles.py compares
every line with StylesCache's own.
"""
from __future__ import annotations

from typing import NamedTuple

from rich.segment import Segment
from textual import _styles_cache as textual_styles
from textual._styles_cache import StylesCache
from textual.strip import Strip


class _Plan(NamedTuple):
    top: int            # first content row (below the top border and padding)
    bottom: int         # first row past the content rows
    inner: object       # the content's background (rich Style)
    content_width: int
    content_height: int
    pad_left: int
    pad_right: int
    left: Segment | None   # the left border's segment, or None
    right: Segment | None


class LeanStylesCache(StylesCache):
    _plan: _Plan | None = None

    def render(self, styles, size, base_background, background, render_content_line, filters,
               border_title, border_subtitle, content_size=None, padding=None, crop=None, opacity=1.0,
               **kw):
        self._plan = _plan(self, styles, size, content_size or size, styles.padding if padding is None else padding,
                           base_background, background, opacity)
        try:
            return super().render(styles, size, base_background, background, render_content_line, filters,
                                  border_title, border_subtitle, content_size=content_size, padding=padding,
                                  crop=crop, opacity=opacity, **kw)
        finally:
            self._plan = None

    def render_line(self, styles, y, size, content_size, padding, base_background, background,
                    render_content_line, *rest):
        plan = self._plan
        if plan is None or not plan.top <= y < plan.bottom:
            return super().render_line(styles, y, size, content_size, padding, base_background, background,
                                       render_content_line, *rest)
        content_y = y - plan.top
        if content_y < plan.content_height:
            line = render_content_line(content_y).adjust_cell_length(plan.content_width, plan.inner)
        else:
            line = Strip.blank(plan.content_width, plan.inner)
        if plan.pad_left or plan.pad_right:
            line = textual_styles.line_pad(line, plan.pad_left, plan.pad_right, plan.inner)
        if plan.left is not None or plan.right is not None:
            line = [*(() if plan.left is None else (plan.left,)), *line,
                    *(() if plan.right is None else (plan.right,))]
        return Strip(line, size.width)


def _plan(cache: StylesCache, styles, size, content_size, padding, base_background, background,
          opacity) -> _Plan | None:
    """What StylesCache.render_line would work out for each content row, or None where it does
    more than fit, pad and border them (an outline, hatch, tint, text opacity or opacity)."""
    if opacity != 1.0 or styles.text_opacity != 1.0 or styles.tint.a:
        return None
    if any(edge for edge, _ in styles.outline):
        return None
    if styles.has_rule("hatch") and styles.hatch != "none":
        return None
    gutter = styles.gutter
    (_, _), (border_right, right_color), (_, _), (border_left, left_color) = styles.border
    inner, outer = cache.get_inner_outer(base_background, background)
    Style, get_box = textual_styles.Style, textual_styles.get_box
    left = right = None
    if border_left:
        edge = Style(foreground=base_background + left_color.multiply_alpha(opacity))
        left = get_box(border_left, inner, outer, edge)[1][0]
    if border_right:
        edge = Style(foreground=base_background + right_color.multiply_alpha(opacity))
        right = get_box(border_right, inner, outer, edge)[1][2]
    _, pad_right, _, pad_left = padding
    return _Plan(gutter.top, size.height - gutter.bottom, inner.rich_style, content_size.width, content_size.height,
                 pad_left, pad_right, left, right)


class LeanLines:
    """Mix in before a Widget: its lines are styled by a ``LeanStylesCache``."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._styles_cache = LeanStylesCache()
