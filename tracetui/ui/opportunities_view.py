"""Fusion opportunities of one trace (``O`` in the explorer): the chains of
``tracetui.model.opportunities``, biggest projected saving first; Enter shows a chain's first
kernel in the tree. Computed in a worker; the same numbers as ``tracetui opportunities --json``."""
from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tracetui.shorten import fit_distinct
from tracetui.textsafe import visible
from tracetui.ui.footer import StableFooter


class OpportunitiesScreen(Screen):
    """Ranked fusion chains of the explorer's trace; Esc goes back, Enter jumps to the chain."""

    BINDINGS = [
        Binding("enter", "jump", "Show in tree"),
        Binding("escape,O", "back", "Back"),
    ]
    DEFAULT_CSS = """
    #opp-head { height: auto; background: $panel; padding: 0 1; }
    #opp-table { height: 1fr; }
    """

    def __init__(self, trace, on_jump=None):
        super().__init__()
        self.trace, self.on_jump = trace, on_jump
        self.report: dict | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("finding fusion chains…", style="italic"), id="opp-head")
        yield DataTable(id="opp-table", cursor_type="row", zebra_stripes=True)
        yield StableFooter()

    def on_mount(self) -> None:
        self.compute()

    @work(thread=True, exclusive=True, group="opportunities")
    def compute(self) -> None:
        from tracetui.model.opportunities import opportunities
        o = getattr(self.trace, "_opportunities", None)  # a trace's chains do not change: found once
        if o is None:
            o = self.trace._opportunities = opportunities(self.trace)  # pure model work, off the UI thread
        self.app.call_from_thread(self._show, o)

    def _show(self, o: dict) -> None:
        self.report = o
        bw = o["bandwidth"]
        head = Text()
        if bw is None:
            head.append(f"no fusion chains: {o.get('note', '')}", style="bold")
        else:
            head.append(f"{len(o['chains'])} fusion chains · projected saving {o['projected_us_per_step']:,.1f} µs "
                        f"of {o['device_us_per_step']:,.1f} device µs per step", style="bold")
            head.append(f"\nHBM {bw['gbps']:,.0f} GB/s, {bw['source']}: {bw['how']} · Enter: show in tree")
        self.query_one("#opp-head", Static).update(head)
        self._fill()
        self.query_one("#opp-table", DataTable).focus()

    def _fill(self) -> None:
        """The table, its text columns sized to the screen: the figures first, then the ops (what
        the chain fuses: the part a reader needs, given what the others leave), then the module.
        At 80 columns the ops column was 4 cells (``fill``, ``_log``, ``nati``)."""
        table = self.query_one("#opp-table", DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        chains = self.report["chains"] if self.report else []
        ops = [visible(" → ".join(x.replace("aten::", "") for x in c["ops"])) for c in chains]
        mods = [visible(c["module"]) for c in chains]
        fixed = (("#", 3), ("saves µs", 8), ("chain µs", 8), ("MB", 7), ("dir", 3))
        # what the figures, the two text columns' padding and a scrollbar leave
        room = (self.size.width or self.app.size.width or 80) - sum(w + 2 for _, w in fixed) - 2 * 2 - 2
        mod_w = min(max([6] + [len(m) for m in mods]), max(12, room // 3))
        ops_w = max(12, room - mod_w)
        for label, width in fixed + (("ops", ops_w), ("module", mod_w)):
            table.add_column(label, width=width)
        for c, op, mod in zip(chains, fit_distinct(ops, ops_w), fit_distinct(mods, mod_w)):
            save = c["projected_saving_us"]
            mb = c["intermediate_bytes"]
            table.add_row(str(c["rank"]), "?" if save is None else f"{save:,.1f}", f"{c['us_per_step']:,.1f}",
                          "?" if mb is None else f"{mb / 1e6:,.1f}", "bwd" if c["backward"] else "fwd",
                          Text(op), Text(mod), key=str(c["rank"]))
        if chains and row > 0:
            table.move_cursor(row=min(row, len(chains) - 1), animate=False)

    def on_resize(self, event) -> None:
        if self.report is not None:
            self._fill()

    def chain_at_cursor(self) -> dict | None:
        if not self.report or not self.report["chains"]:
            return None
        row = self.query_one("#opp-table", DataTable).cursor_row
        return self.report["chains"][row] if 0 <= row < len(self.report["chains"]) else None

    @on(DataTable.RowSelected)
    def selected(self, event: DataTable.RowSelected) -> None:
        self.action_jump()

    def action_jump(self) -> None:
        c = self.chain_at_cursor()
        if c is None:
            return
        self.app.pop_screen()
        if self.on_jump is not None:
            self.on_jump(c["first_node"])

    def action_back(self) -> None:
        self.app.pop_screen()
