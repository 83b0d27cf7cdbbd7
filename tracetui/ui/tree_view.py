"""The hierarchy pane: a Textual Tree filled lazily from the model, capped per expansion."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tracetui.read.events import K
from tracetui.model.names import shorten_cpp
from tracetui.model.stats import what_it_counts
from tracetui.model.trace import Trace

from tracetui.ui.format import KIND_STYLE, fmt_us, plain
from tracetui.ui.focus_now import FocusApplied
from tracetui.ui.lean_styles import LeanLines
from tracetui.ui.scrollbars import CachedScrollbars
from tracetui.ui.tree_lines import FastTreeLines

CHILD_CAP = 200
"""Children added per expansion; the rest wait behind a '… N more' row (memray-style)."""


@dataclass(frozen=True)
class Row:
    node: int                 # model node id shown by this row (the last of a collapsed chain)
    chain: tuple = ()         # collapsed single-child chain above ``node`` (model ids)
    more_of: int = -1         # for a '… N more' row: the model parent whose children continue
    offset: int = 0


class TraceTree(FocusApplied, LeanLines, CachedScrollbars, FastTreeLines, Tree[Row]):
    """Tree of one Trace. ``hide_python`` flattens Python frames; ``collapse`` merges single-child chains."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("right,l", "expand_or_down", "Expand / first child", show=False),
        Binding("left,h", "collapse_or_up", "Collapse / parent", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]

    def action_expand_or_down(self) -> None:
        """Expand the row; on an expanded row, go to its first child."""
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and not node.is_expanded:
            self.fill(node)
            node.expand()
        elif node.is_expanded and node.children:
            self.move_cursor(node.children[0])

    def action_collapse_or_up(self) -> None:
        """Collapse the row; on a collapsed row or a leaf, go to its parent."""
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and node.allow_expand:
            node.collapse()
        elif node.parent is not None:
            self.move_cursor(node.parent)

    def __init__(self, trace: Trace, **kw):
        self.trace = trace
        self.hide_python = True  # frames are context; `p` shows them
        self.collapse = False
        self.rows: dict[int, TreeNode] = {}
        super().__init__(plain(trace.name(0), "bold"), data=Row(0), **kw)
        self.show_root = True
        self.auto_expand = False
        self.guide_depth = 2

    on_cursor = None
    """Callable(model node) set by the screen, called as the cursor moves (not a message later)."""

    def watch_cursor_line(self, previous_line: int, line: int) -> None:
        """Let the screen show the new row's details now, so the key costs one frame, not two."""
        super().watch_cursor_line(previous_line, line)
        node = self.cursor_node
        if previous_line != line and node is not None and node.data is not None and self.on_cursor is not None:
            self.on_cursor(node.data.node)

    def get_label_width(self, node: TreeNode) -> int:
        """Width without rendering: the line list is re-measured whole after every expansion."""
        return node.label.cell_len + (cell_len(self.ICON_NODE) if node.allow_expand else 0)

    def process_label(self, label) -> Text:  # names are data: never parse them as markup
        return label if isinstance(label, Text) else Text(str(label))

    # ---- model -> visible children
    def visible_children(self, node: int) -> list[int]:
        return self._visible(node).tolist()

    def _visible(self, node: int) -> np.ndarray:
        t = self.trace.tree
        if not self.hide_python:
            return t.children(node)
        off, idx = t.children_without(K["python"])
        return idx[off[node]:off[node + 1]]

    def has_visible_children(self, node: int) -> bool:
        return bool(self._visible(node).size)

    def label_for(self, node: int, chain: tuple = ()) -> Text:
        tr = self.trace
        kind = tr.kind(node)
        glyph, style = KIND_STYLE.get(kind, ("?", ""))
        t = Text()
        t.append(glyph + " ", style=style)
        for c in chain:
            t.append(plain(shorten_cpp(tr.name(c))[:40], "dim"))
            t.append(" › ", style="dim")
        name = tr.name(node)
        t.append(plain(shorten_cpp(name) if len(name) > 100 else name))
        if kind == "step":  # a serving step says its phase; a step whose graph work is hidden says so
            lab = tr.step_labels.get(node)
            if lab is not None:
                t.append(plain(f"  {lab.text}", "cyan"))
            gaps = tr.graph_gaps.by_step.get(node)
            if gaps is not None and gaps.incomplete:
                t.append(plain("  [graph work hidden: idle unknown]", "yellow"))
        r = tr.roll
        metrics = []
        dev = tr.tree.dur[node] if kind in ("kernel", "memcpy", "memset") else r.device[node]
        share = self._share(node, dev)
        if r.cpu_total[node]:
            metrics.append(f"cpu {fmt_us(r.cpu_total[node])}" + ("" if tr.has_gpu else share))
        if dev:
            metrics.append(f"dev {fmt_us(dev)}" + share)
        if r.kernels[node] and kind not in ("kernel",):
            metrics.append(f"k{int(r.kernels[node])}")
        tag = what_it_counts(tr.tree, node, short=True) if metrics else None
        if tag:  # a thread counts its own launches, a step every thread: say which
            metrics.append(tag)
        if metrics:
            t.append("  " + " · ".join(metrics), style="dim")
        if tr.is_cpu_only(node):
            t.append("  [CPU only]", style="yellow")
        return t

    def _share(self, node: int, dev) -> str:
        """`` (7%)``: the node's share of its step, beside the figure it is a share of: device time
        in a trace with a GPU (what a reader of a GPU trace needs), else CPU time. ``Linear_24 ·
        dev 870.1µs · 0%`` was the CPU share, said nowhere."""
        tr, r = self.trace, self.trace.roll
        step = int(r.step_of[node])
        if step < 0 or step == node:
            return ""
        num, den = (dev, r.device[step]) if tr.has_gpu else (r.cpu_total[node], r.cpu_total[step])
        return f" ({100 * num / den:.0f}%)" if num and den else ""

    # ---- lazy filling
    def fill(self, tnode: TreeNode) -> None:
        row: Row = tnode.data
        if tnode.children:
            return
        self._add_children(tnode, row.node, 0)

    def _add_children(self, tnode: TreeNode, parent: int, offset: int, count: int = CHILD_CAP) -> None:
        with self.held_invalidation():
            self._add_rows(tnode, parent, offset, count)

    def _add_rows(self, tnode: TreeNode, parent: int, offset: int, count: int) -> None:
        kids = self.visible_children(parent)
        for c in kids[offset:offset + count]:
            chain: list[int] = []
            node = c
            if self.collapse:
                while True:
                    vk = self._visible(node)
                    if vk.size != 1:
                        break
                    chain.append(node)
                    node = int(vk[0])
            has_kids = self.has_visible_children(node)
            child = tnode.add(self.label_for(node, tuple(chain)), data=Row(node, tuple(chain)), allow_expand=has_kids)
            self.rows[node] = child
            for ch in chain:
                self.rows.setdefault(ch, child)
        rest = len(kids) - (offset + count)
        if rest > 0:
            tnode.add(Text(f"… {rest:,} more (Enter to show)", style="dim italic"),
                      data=Row(parent, more_of=parent, offset=offset + count), allow_expand=False)

    def show_more(self, tnode: TreeNode, until: int | None = None) -> None:
        """Replace a '… N more' row by the next batch (or, for a jump, up to model node ``until``)."""
        row: Row = tnode.data
        parent = tnode.parent
        count = CHILD_CAP
        if until is not None:
            kids = self.visible_children(row.more_of)
            if until in kids:
                count = max(CHILD_CAP, kids.index(until) - row.offset + CHILD_CAP // 2)
        tnode.remove()
        self._add_children(parent, row.more_of, row.offset, count)

    def rebuild(self) -> None:
        """Re-create the tree after a view option changed, keeping the cursor's node."""
        keep = self.cursor_node.data.node if self.cursor_node and self.cursor_node.data else 0
        self.rows.clear()
        self.root.remove_children()
        self.root.data = Row(0)
        self.rows[0] = self.root
        self.fill(self.root)
        self.root.expand()
        self.reveal(keep)

    def reveal(self, node: int) -> TreeNode | None:
        """Expand the path to model node ``node`` (creating rows as needed) and put the cursor on it."""
        path = self.trace.tree.path(node)
        tnode = self.root
        for p in path[1:]:
            if p in self.rows:
                tnode = self.rows[p]
                continue
            if self.hide_python and self.trace.tree.kind[p] == K["python"]:
                continue
            self.fill(tnode)
            tnode.expand()
            while p not in self.rows:
                more = [c for c in tnode.children if c.data and c.data.more_of >= 0]
                if not more:
                    break
                self.show_more(more[0], until=p)
            if p not in self.rows:
                break
            tnode = self.rows[p]
        for a in _ancestors(tnode):
            if not a.is_expanded:  # TreeNode.expand posts NodeExpanded even for an expanded node
                a.expand()
        self._tree_lines  # noqa: B018 (build the lines now so new rows know their line numbers)
        self.move_cursor(tnode)
        return tnode


def _ancestors(tnode: TreeNode) -> list[TreeNode]:
    out = []
    p = tnode.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out[::-1]
