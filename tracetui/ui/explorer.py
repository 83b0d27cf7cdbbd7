"""The explorer of one trace: the tree with its detail pane, the kernel and op tables, the
timeline and the memory view, as tabs; search, jumps, copy and export."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.lazy import Lazy
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher, DataTable, Input, Static, Tree
from textual.worker import get_current_worker

from tracetui.model import Trace
from tracetui.model.names import shorten_cpp
from tracetui.model.taxonomy import CLASSES
from tracetui.read.events import KINDS, K
from tracetui.textsafe import visible
from tracetui.ui.boxes import Box, HBox, Switcher, VBox
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.details import describe
from tracetui.ui.exporting import EXPORT_BINDINGS, ExportsView
from tracetui.ui.focus_now import focus_now
from tracetui.ui.footer import StableFooter
from tracetui.ui.format import plain
from tracetui.ui.idle_gc import keep_out_of_gc, release_frozen
from tracetui.ui.memory_view import MemoryView
from tracetui.ui.tab_bar import TabBar
from tracetui.ui.tables import AggTable
from tracetui.ui.navigate import OpenOpportunities
from tracetui.ui.range_table import RangeTable
from tracetui.ui.timeline import Timeline
from tracetui.ui.tree_view import Row, TraceTree

SEARCH_SETTLE_S = 0.15
"""Typing pause after which incremental search moves the cursor to the first match."""
SEARCH_KINDS = (None, "module", "op", "kernel", "runtime", "annotation", "step", "python")


class ExplorerScreen(ExportsView, Screen):
    """Tree + details, kernel and op tables, timeline for one trace."""

    BLANK = True  # its lines are its background, all of them covered (ui/boxes.py): a focus change redraws them
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    """Screen.focused, less its repaint of the whole screen: the focused and blurred widgets repaint
    themselves, and this screen draws nothing of its own. After a view switch's layout (Enter's jump,
    1-5) that repaint was a second compositor pass over the screen in the key's frame, ~1.5 ms."""

    BINDINGS = [
        Binding("slash", "search", "Search"),
        Binding("n", "next_match", "Next match"),
        Binding("N", "prev_match", "Prev match", show=False),
        Binding("F", "cycle_kind", "Filter kind", show=False),
        Binding("o", "jump_op", "Launching op"),
        Binding("x", "jump_kernel", "Kernels"),
        Binding("f", "full_name", "Full name", show=False),
        Binding("p", "toggle_python", "Py frames"),
        Binding("c", "toggle_collapse", "Collapse chains", show=False),
        Binding("t", "toggle_avg", "Totals / per step", show=False),  # `a` opens trace A in a diff
        Binding("d", "toggle_details", "Details", show=False),
        Binding("D", "diagnostics", "Diagnostics", show=False),
        Binding("O", "opportunities", "Fusion opportunities", show=False),  # ui/opportunities_view.py
        Binding("1", "tab('tree')", "Tree", show=False),
        Binding("2", "tab('kernels')", "Kernels", show=False),
        Binding("3", "tab('ops')", "Ops", show=False),
        Binding("4", "tab('timeline')", "Timeline", show=False),
        Binding("5", "tab('memory')", "Memory", show=False),
        Binding("escape", "close_search", "Close search / back", show=False),
        Binding("y", "copy_name", "Copy name", show=False),
        *EXPORT_BINDINGS,
    ]

    def __init__(self, trace: Trace):
        super().__init__()
        self.trace = trace
        self.matches: np.ndarray = np.zeros(0, dtype=np.int64)
        self.match_i = -1
        self.kind_filter: str | None = None
        self.full_names = False
        self.kernel_cycle = 0
        self._search_timer = None
        self._names_lower = [n.lower() for n in trace.tree.names]
        # the hidden tabs mount after the first paint (Lazy), so the first screen does not style
        # their tables (first_screen_pty: 1.72 -> 1.68 s and 1.68 -> 1.65 s)
        self.kernel_table = AggTable(trace, kernels=True, id="kernel-table")
        self.op_table = AggTable(trace, kernels=False, id="op-table")
        self.timeline = Timeline(trace, id="timeline-widget")
        self.memory_view = MemoryView(trace, id="memory-widget")

    def compose(self) -> ComposeResult:
        yield Static(id="breadcrumb")
        yield TabBar(id="tabbar")
        with Switcher(initial="tree", id="views"):
            with HBox(id="tree"):
                yield TraceTree(self.trace, id="tree-widget")
                yield DetailPane(id="details")
            with Box(id="kernels"):
                yield Lazy(self.kernel_table)
            with Box(id="ops"):
                yield Lazy(self.op_table)
            with VBox(id="timeline"):
                yield Lazy(self.timeline)
                yield RangeTable(id="range-table")
            with Box(id="memory"):
                yield Lazy(self.memory_view)
        yield Input(placeholder="search names (Enter: back to tree, Esc: cancel)", id="search")
        yield Static(id="status")
        yield StableFooter()

    def on_unmount(self) -> None:
        release_frozen()

    def on_mount(self) -> None:
        tree = self.tree
        tree.on_cursor = self.show_if_new
        tree.rows[0] = tree.root
        tree.fill(tree.root)
        tree.root.expand()
        # open the first step (or first thread) so the first screen already says something
        first = self.trace.steps[0] if self.trace.steps else (int(tree.visible_children(0)[0]) if len(self.trace.tree) > 1 else 0)
        tree.reveal(first)
        self.show_node(first)
        tree.focus()
        self._status()
        if self.trace.report.repairs:  # a damaged file: say what was done before anything else
            self.notify(visible("; ".join(self.trace.report.repairs)) + " (D: details)",
                        title="trace repaired", severity="warning", timeout=12, markup=False)
        # after the first paint: the args pass holds the GIL (~0.15 s per 60 MB) and, started
        # here, delayed the first screen by as much (first_screen_pty A/B: 1.88 -> 1.71 s)
        self.call_after_refresh(self.prefetch_args)

    @work(thread=True, group="args")
    def prefetch_args(self) -> None:
        """Compute the tables and decode every event's args after the first screen (which needs
        neither: it shows a step), so the detail pane and the tabs never wait for them."""
        self.trace.warm()  # ~37 ms on 270k events, off the first screen (1.62 -> 1.58 s, 9 rounds)
        if not self.trace.store.args_loaded:
            self.trace.store.load_args()
            if len(self.trace.store.memory):  # the memory view and detail pane read it
                self.trace.memory  # noqa: B018
            keep_out_of_gc()
            try:
                self.app.call_from_thread(self._args_ready)
            except RuntimeError:  # the app closed meanwhile
                pass
            if len(self.trace.store.memory):  # every page of the memory view, so that no key computes one
                worker = get_current_worker()
                self.memory_view.prepare(getattr(self, "current", 0), lambda: worker.is_cancelled)
                keep_out_of_gc()
                try:  # and its first layout, off screen, so that the first 5 is like the next ones
                    self.app.call_from_thread(lambda: self.memory_view.warm_layout(getattr(self, "current", 0)))
                except RuntimeError:  # the app closed meanwhile
                    pass
        self.timeline.prepare()  # its lanes: ~0.2 s on 270k events, before `4` asks

    def _args_ready(self) -> None:
        if self.is_attached and self.app.screen is self:
            self.show_node(self.current)

    def on_resize(self, event) -> None:
        self.query_one("#tree").set_class(self.size.width < 110, "narrow")

    @property
    def tree(self) -> TraceTree:
        return self.query_one(TraceTree)

    # ---- status line & details
    def _status(self, extra: str = "") -> None:
        tr = self.trace
        d = tr.tree.diagnostics
        issues = sum(v for k, v in d.items() if isinstance(v, int)
                     and k not in ("linked_by_external_id", "steps_spanned_by_events"))
        # (text, style, drop order): what does not fit one line goes, least telling first, so
        # 80 columns keep the news, the file, the steps and the diagnostics key (D)
        marker = tr.step_choice.short if tr.step_choice and tr.step_choice.rule != "ProfilerStep" else ""
        parts = []
        if extra:  # first, so 80 columns still show what just changed (match count, mode)
            parts.append((extra, "bold cyan", 9))
        if getattr(self, "per_step", False) and "per-step" not in extra:  # the mode stays said, early
            parts.append(("per step", "cyan", 8))
        parts.append((visible(tr.path.name), "bold", 7))
        parts.append((visible(tr.device_label), "", 2))
        parts.append((f"{tr.n_steps} steps" + (f" ({visible(marker)})" if marker and tr.n_steps else ""), "", 4))
        parts.append((f"{len(tr.store):,} events", "", 1))
        if issues or tr.report.repairs:
            parts.append((f"{issues} diagnostics" + (f", {len(tr.report.repairs)} repairs" if tr.report.repairs else "")
                          + " (D)", "yellow", 6))
        if self.kind_filter:
            parts.append((f"filter: {self.kind_filter}", "cyan", 5))
        width = (self.size.width or 80) - 2
        while len(parts) > 1 and sum(len(p[0]) for p in parts) + 3 * (len(parts) - 1) > width:
            parts.remove(min(parts, key=lambda p: p[2]))
        txt = Text()
        for i, (text, style, _) in enumerate(parts):
            if i:
                txt.append(" · ", style=parts[i - 1][1] if parts[i - 1][1] == "bold cyan" else "")
            txt.append(text, style=style)
        if txt == getattr(self, "_status_shown", None):
            return  # drawn already: a view switch asks for the same line again
        self._status_shown = txt
        self.query_one("#status", Static).update(txt, layout=False)  # one line, always

    def show_if_new(self, node: int) -> None:
        """Show ``node`` unless it is shown: a second detail update in one key costs a second frame.

        The tree calls this as its cursor moves (TraceTree.on_cursor), in the key's own frame.
        """
        if node != getattr(self, "current", None):
            self.show_node(node)

    def show_node(self, node: int) -> None:
        self.query_one(DetailPane).show(describe(self.trace, node, self.full_names))
        path = self.trace.tree.path(node)[1:]
        if self.tree.hide_python:  # the breadcrumb follows the tree: frames hidden there, hidden here
            path = [p for p in path if self.trace.tree.kind[p] != K["python"] or p == node]
        crumb = " › ".join(shorten_cpp(self.trace.name(p))[:48] for p in path)
        width = max(20, self.size.width - 2)
        if len(crumb) > width:
            crumb = "…" + crumb[-(width - 1):]
        self.query_one("#breadcrumb", Static).update(plain(crumb), layout=False)  # one line, always
        self.current = node

    @on(Tree.NodeExpanded)
    def expanded(self, event: Tree.NodeExpanded) -> None:
        self.tree.fill(event.node)

    @on(Tree.NodeSelected)
    def selected(self, event: Tree.NodeSelected) -> None:
        row: Row | None = event.node.data
        if row is not None and row.more_of >= 0:
            self.tree.show_more(event.node)
        else:
            event.node.toggle()

    # ---- jumping
    def jump(self, node: int, focus: bool = True) -> None:
        """Show ``node`` in the tree (expanding its path) and the detail pane, in one repaint."""
        with self.app.batch_update():
            self._show_view("tree")
            if focus:  # now, not after this frame (tree.focus() would restyle it in a second one),
                focus_now(self, self.tree)  # and before reveal: a Tree's restyle drops its lines
            self.tree.reveal(int(node))
            self.show_if_new(int(node))  # moving the cursor usually showed it already

    def action_opportunities(self) -> None:
        """Chains of kernels a fusion could merge, ranked by projected saving (``tracetui opportunities``);
        the App pushes the screen (screens never import each other)."""
        self.post_message(OpenOpportunities(self.trace, on_jump=self.jump))

    def action_diagnostics(self) -> None:
        """The root row: its detail pane spells out the status line's diagnostics and repairs,
        each with what it means and an example; D again jumps to the example of each in turn."""
        from tracetui.ui.details import diagnostic_examples
        examples = diagnostic_examples(self.trace)
        at = getattr(self, "_diag_at", None)  # (index of the example shown, its node)
        on_overview = getattr(self, "current", None) == 0 and at is not None and at[0] < 0
        if examples and (on_overview or (at is not None and at[0] >= 0 and at[1] == getattr(self, "current", None))):
            i = at[0] + 1
            if i < len(examples):
                label, node = examples[i]
                self._diag_at = (i, node)
                if self.tree.hide_python and self.trace.tree.kind[node] == K["python"]:
                    self.action_toggle_python()  # the example is a frame: show them
                self.jump(node)
                self._status(f"{label}: example {i + 1}/{len(examples)} (D: next)")
                return
        if self.query_one("#details").has_class("hidden"):
            self.action_toggle_details()
        self._diag_at = (-1, 0)
        self.jump(0)
        # after the refresh: a pane that was hidden wraps its text only once it has a width again
        self.call_after_refresh(self.query_one(DetailPane).scroll_to_heading, "repairs", "diagnostics")

    def action_jump_op(self) -> None:
        node = getattr(self, "current", 0)
        tr = self.trace
        target = tr.launching_op(node)
        if target is None and tr.kind(node) in ("kernel", "memcpy", "memset"):
            target = tr.launcher(node)
        if target is None:
            self.notify("no launching op for this node", severity="warning")
            return
        self.jump(target)

    def action_jump_kernel(self) -> None:
        node = getattr(self, "current", 0)
        tr = self.trace
        if tr.kind(node) in ("kernel", "memcpy", "memset"):
            op = getattr(self, "kernel_origin", None)
            ks = tr.gpu_descendants(op) if op is not None else np.zeros(0, dtype=np.int64)
        else:
            self.kernel_origin = node
            self.kernel_cycle = 0
            ks = tr.gpu_descendants(node)
        if not ks.size:
            self.notify("this node launched no GPU work", severity="warning")
            return
        k = int(ks[self.kernel_cycle % ks.size])
        self.kernel_cycle += 1
        self.jump(k)  # first: the jump's view change clears the status line
        self._status(f"kernel {self.kernel_cycle % ks.size or ks.size}/{ks.size}")

    # ---- search
    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("visible")
        # focus now, not at the next idle (Widget.focus): keys typed right after `/` (a paste,
        # a script, a fast typist) went to the tree's bindings, `E` exporting the subtree
        self.app.update_styles(box)
        self.set_focus(box)

    def action_close_search(self) -> None:
        """Close the search box; without one open, go back to what opened this trace (the diff,
        or the trace shown before ctrl+o), if anything did."""
        if not self.query_one("#search", Input).has_class("visible") and len(self.app.screen_stack) > 2:
            self.app.pop_screen()
            return
        self._close_search()

    def _close_search(self) -> None:
        self.query_one("#search", Input).remove_class("visible")
        self.tree.focus()

    def find(self, text: str) -> np.ndarray:
        tr = self.trace.tree
        q = text.lower()
        ids = [i for i, n in enumerate(self._names_lower) if q in n] if q else []
        by_class = self.trace.nodes_of_class(q) if q in CLASSES else np.zeros(0, dtype=np.int64)
        if not ids and not by_class.size:
            return np.zeros(0, dtype=np.int64)
        nodes = np.nonzero(np.isin(tr.name_id, ids))[0] if ids else np.zeros(0, dtype=np.int64)
        nodes = np.union1d(nodes[nodes > 0], by_class)  # a kernel class finds its kernels (/gemm)
        if self.kind_filter:
            nodes = nodes[tr.kind[nodes] == K[self.kind_filter]]
        if self.tree.hide_python:  # a hidden frame is no place to land (p shows them)
            nodes = nodes[tr.kind[nodes] != K["python"]]
        return nodes[np.lexsort((tr.depth[nodes], tr.start[nodes]))]

    @on(Input.Changed, "#search")
    def search_changed(self, event: Input.Changed) -> None:
        # Each keystroke updates the match count at once; the tree jumps to the first match when
        # typing pauses, so a fast "aten::mm" does not expand eight places on the way.
        self.matches = self.find(event.value)
        self.match_i = -1
        if self._search_timer is not None:
            self._search_timer.stop()
            self._search_timer = None
        if self.matches.size:
            self._status(f"{self.matches.size:,} matches")
            self._search_timer = self.set_timer(SEARCH_SETTLE_S, self._search_settled)
        else:
            self._status("no match" if event.value else "")

    def _search_settled(self) -> None:
        self._search_timer = None
        if self.matches.size and self.match_i < 0:
            self.action_next_match(keep_focus=True)

    @on(Input.Submitted, "#search")
    def search_done(self, event: Input.Submitted) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
            self._search_timer = None
        if self.matches.size and self.match_i < 0:
            self.action_next_match(keep_focus=True)
        self._close_search()

    def action_next_match(self, keep_focus: bool = False, step: int = 1) -> None:
        if not self.matches.size:
            self.notify("no matches: / to search", severity="warning")
            return
        self.match_i = (self.match_i + step) % self.matches.size
        node = int(self.matches[self.match_i])
        with self.app.batch_update():  # one repaint for tree, details, breadcrumb and status
            self.jump(node, focus=not keep_focus)
            self._status(f"match {self.match_i + 1}/{self.matches.size}")

    def action_prev_match(self) -> None:
        self.action_next_match(step=-1)

    def action_cycle_kind(self) -> None:
        i = SEARCH_KINDS.index(self.kind_filter)
        self.kind_filter = SEARCH_KINDS[(i + 1) % len(SEARCH_KINDS)]
        box = self.query_one("#search", Input)
        if not box.value:
            self._status()
            return
        self.matches = self.find(box.value)
        # the match under the cursor keeps its place (n goes on from it); else n starts at the first
        here = np.nonzero(self.matches == getattr(self, "current", -1))[0]
        self.match_i = int(here[0]) if here.size else -1
        n = self.matches.size
        self._status(f"match {self.match_i + 1}/{n}" if here.size else f"{n:,} matches" if n else "no match")

    # ---- view options
    def action_full_name(self) -> None:
        self.full_names = not self.full_names
        self.show_node(getattr(self, "current", 0))

    def action_toggle_python(self) -> None:
        self.tree.hide_python = not self.tree.hide_python
        self._rebuild("python frames " + ("hidden" if self.tree.hide_python else "shown"))

    def action_toggle_collapse(self) -> None:
        self.tree.collapse = not self.tree.collapse
        self._rebuild("chains " + ("collapsed" if self.tree.collapse else "expanded"))

    def _rebuild(self, status: str) -> None:
        """Re-create the tree after a view option changed, and show its cursor's node again: the
        cursor callback skips a node already shown, but the breadcrumb follows the options."""
        self.tree.rebuild()
        row = self.tree.cursor_node.data if self.tree.cursor_node else None
        self.show_node(row.node if row is not None else self.current)
        self._status(status)

    def action_toggle_avg(self) -> None:
        for t in (self.kernel_table, self.op_table):
            t.per_step = not t.per_step
            if t.is_mounted:  # else its on_mount fills it with the new setting
                t.refill()
        self.per_step = self.kernel_table.per_step
        if self.is_mounted:  # (a key can come before the screen is composed)
            self._status("per-step averages (t: totals)" if self.per_step else "totals")

    def action_toggle_details(self) -> None:
        self.query_one("#details").toggle_class("hidden")

    def _show_view(self, name: str) -> None:
        switcher = self.query_one(ContentSwitcher)
        if switcher.current != name and self.is_mounted:  # a message about one view ("occurrence
            self._status()                                 # 1/1746 (n/N …)") does not follow to the next
        switcher.current = name
        self.query_one(TabBar).active = name
        for box in switcher.children:  # their Layout now, not from their own idle: one that came
            if box._layout_required:   # after the screen's next frame laid the screen out again
                box._check_refresh()
        self.call_next(self._post_repaints)

    def _post_repaints(self) -> None:
        """Ask the screen now for the repaints the key asked of its widgets (a view shown, a jump):
        each widget posts its own from its message loop, at its next idle, and those that came
        after the key's frame (the memory view's tables and plot on a new step, the tree and the
        detail pane after a jump) drew a second frame over the same regions."""
        for w in self.walk_children():
            if w._repaint_required and w.display:
                w._check_refresh()
            for bar in (w._vertical_scrollbar, w._horizontal_scrollbar, w._scrollbar_corner):
                if bar is not None and bar._repaint_required:  # a new scroll size, a focus change
                    bar._check_refresh()

    def action_tab(self, name: str) -> None:
        # focus now, not Widget.focus (at the next idle): the focus change moves the footer's
        # keys, and after the view's frame it laid the screen out and painted it a second time;
        # focus_now, not set_focus: the focused and blurred widgets' look is in the view's frame
        self._show_view(name)
        if name == "timeline":  # the tree's selection, in the timeline
            self.timeline.show(getattr(self, "current", 0))
            if self.timeline.is_mounted:
                focus_now(self, self.timeline)
            else:
                self.call_after_refresh(self.timeline.focus)
        elif name == "memory":
            view = self.memory_view
            if view.is_mounted:
                view.show(getattr(self, "current", 0))
                focus_now(self, view.query_one("#mem-live"))
            else:  # a key pressed within a frame of the first screen
                self.call_after_refresh(self.action_tab, "memory")
        elif name in ("kernels", "ops"):
            table = self.kernel_table if name == "kernels" else self.op_table
            if name == "kernels" and not self.trace.kernel_table:  # else a header over nothing
                self.notify("no GPU kernels in this trace (CPU only): 3 shows the ops and their CPU time",
                            markup=False)
            if table.is_mounted:
                focus_now(self, table)
            else:  # a key pressed within a frame of the first screen
                self.call_after_refresh(table.focus)
        else:
            focus_now(self, self.tree)

    @on(Timeline.Opened)
    def timeline_opened(self, event: Timeline.Opened) -> None:
        self.jump(event.node)

    @on(Timeline.RangeChanged)
    def range_changed(self, event: Timeline.RangeChanged) -> None:
        self.query_one(RangeTable).show(event.summary)

    # ---- copy and export
    EXPORT_ROWS = 200_000
    """A subtree export stops after this many rows (and says so)."""

    def _view(self) -> str:
        return self.query_one(ContentSwitcher).current or "tree"

    def action_copy_name(self) -> None:
        """The selection's full name to the clipboard (OSC 52: works over ssh, in most terminals)."""
        view = self._view()
        if view == "timeline" and self.timeline.cur.index >= 0:
            lane = self.timeline.lanes[self.timeline.cur.lane]
            name = lane.name(self.trace, self.timeline.cur.index)
        elif view in ("kernels", "ops"):
            agg = (self.kernel_table if view == "kernels" else self.op_table).selected()
            name = agg.name if agg is not None else ""
        else:
            name = self.trace.name(getattr(self, "current", 0))
        if not name:
            self.notify("nothing selected to copy", severity="warning")
            return
        self.app.copy_to_clipboard(name)
        self.notify(f"copied: {visible(name)[:80]}", timeout=3, markup=False)

    def export_table(self) -> tuple[str, list[str], list[list]]:
        """(file stem, header, rows) of what the view shows: the selection's subtree in the tree,
        the table in 2/3, the marked range's table (else the cursor lane's events in view) in 4."""
        tr, view = self.trace, self._view()
        stem = Path(tr.path.name).name.split(".")[0]
        if view in ("kernels", "ops"):
            table = self.kernel_table if view == "kernels" else self.op_table
            cols = list(table.columns_shown)
            # plain numbers (no "18,374.0" for a spreadsheet to re-parse), headers saying /step
            # in per-step mode as the table's own do
            from tracetui.ui.tables import PER_STEP_COLUMNS

            def cell(i, a, c):
                if c in ("name", "kind", "share %"):
                    return {"name": a.name, "kind": a.kind}.get(c) or table.cell_text(i, c)
                v = float(table._value(a, c))
                return int(v) if v.is_integer() else round(v, 3)
            header = [c + "/step" if table.per_step and c in PER_STEP_COLUMNS else c for c in cols]
            rows = [[cell(i, a, c) for c in cols] for i, a in enumerate(table.rows_data)]
            return f"{stem}-{view}", header, rows
        if view == "timeline":
            tl = self.timeline
            if tl.summary is not None:
                from tracetui.ui.range_table import range_rows
                header = [c if c != "time" else "time µs" for c in RangeTable.COLUMNS]  # one unit, plain numbers
                return f"{stem}-range", header, [list(r) for r in range_rows(tl.summary, str, lambda ns: round(ns / 1e3, 3))]
            lane = tl.lanes[tl.cur.lane]
            vis = (lane.ends > tl.lo) & (lane.starts < tl.hi)
            rows = [[lane.label, lane.name(tr, i), int(lane.starts[i]) - tl.full[0], int(lane.ends[i] - lane.starts[i])]
                    for i in np.nonzero(vis)[0].tolist()]
            return f"{stem}-lane", ["lane", "name", "start ns", "duration ns"], rows
        t, r = tr.tree, tr.roll
        top = getattr(self, "current", 0)
        rows, stack = [], [(top, 0)]
        while stack and len(rows) < self.EXPORT_ROWS:
            n, d = stack.pop()
            gpu = t.kind[n] in (K["kernel"], K["memcpy"], K["memset"])
            rows.append([d, KINDS[t.kind[n]], tr.name(n), f"{r.cpu_total[n] / 1e3:.3f}", f"{r.cpu_self[n] / 1e3:.3f}",
                         f"{(t.dur[n] if gpu else r.device[n]) / 1e3:.3f}", int(r.kernels[n])])
            stack.extend((int(c), d + 1) for c in reversed(self.tree.visible_children(n)))
        if stack:
            self.notify(f"subtree cut at {self.EXPORT_ROWS:,} rows", severity="warning")
        header = ["depth", "kind", "name", "CPU total µs", "CPU self µs", "device µs", "kernels"]
        return f"{stem}-subtree", header, rows

    @on(DataTable.RowSelected)
    def row_selected(self, event: DataTable.RowSelected) -> None:
        table = event.data_table
        if not isinstance(table, AggTable):
            return
        agg = table.selected()
        if agg is None:
            return
        tr = self.trace.tree
        nodes = np.asarray(agg.nodes)
        self.matches = nodes[np.argsort(tr.start[nodes])]
        self.match_i = -1
        self.action_next_match()
        self._status(f"{visible(agg.name)[:40]}: occurrence 1/{self.matches.size} (n/N for more)")

    def system_commands(self):
        """For the command palette (the App lists them): (title, help, callback)."""
        return [
            ("Show tree", "Hierarchy and details (1)", lambda: self.action_tab("tree")),
            ("Show kernel table", "Kernels aggregated by name (2)", lambda: self.action_tab("kernels")),
            ("Show op table", "Ops aggregated by name (3)", lambda: self.action_tab("ops")),
            ("Show timeline", "CPU and GPU lanes of the step (4)", lambda: self.action_tab("timeline")),
            ("Show memory", "Allocated/reserved, peak holders, per-op memory (5)", lambda: self.action_tab("memory")),
            ("Toggle Python frames", "Hide/show python_function events (p)", self.action_toggle_python),
            ("Toggle chain collapsing", "Merge single-child chains (c)", self.action_toggle_collapse),
            ("Toggle per-step averages", "Tables per ProfilerStep (t)", self.action_toggle_avg),
            ("Search names", "Incremental search (/)", self.action_search),
            ("Jump to launching op", "From a kernel (o)", self.action_jump_op),
            ("Jump to launched kernels", "From an op (x)", self.action_jump_kernel),
            ("Cycle search kind filter", "module/op/kernel/... (F)", self.action_cycle_kind),
            ("Diagnostics and repairs", "What loading repaired and could not place (D)", self.action_diagnostics),
            ("Copy name", "The selection's full name to the clipboard (y)", self.action_copy_name),
            ("Export view as CSV", "Subtree, table or timeline range to a new file (e)",
             lambda: self.action_export("csv")),
            ("Export view as Markdown", "Subtree, table or timeline range to a new file (E)",
             lambda: self.action_export("md")),
        ]
