"""The fusion-opportunities screen (`O` in the explorer): Pilot test on the bundled eager MLP and
transformer, against the chains the raw-JSON reference of tests/model/test_opportunities.py finds."""
from __future__ import annotations

import asyncio

from tracetui.ui.app import ExplorerScreen, TraceApp
from tracetui.ui.opportunities_view import OpportunitiesScreen

from tests.conftest import TRACES
from tests.model.test_opportunities import Raw, reference_chains
from tests.ui.test_app import explorer, wait_for


def _open(name: str, then):
    async def run():
        app = TraceApp([TRACES / f"{name}.json.gz"])
        async with app.run_test(size=(140, 40)) as pilot:
            s = await explorer(pilot)
            await pilot.press("O")
            await wait_for(pilot, lambda: isinstance(app.screen, OpportunitiesScreen) and app.screen.report is not None)
            await pilot.pause()
            return await then(pilot, app, s)
    return asyncio.run(run())


def test_o_lists_the_chains_and_enter_shows_one_in_the_tree():
    ref = reference_chains(Raw("mlp_eager"))

    async def then(pilot, app, explorer_screen):
        o = app.screen
        table = o.query_one("#opp-table")
        assert table.row_count == len(ref) == 1
        row = [str(x) for x in table.get_row_at(0)]
        assert row[6] == "GeGLU_0" and row[5] == "gelu → mul" and row[4] == "fwd"  # ops before the module (issue 43)
        assert "HBM" in str(o.query_one("#opp-head").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplorerScreen))
        await pilot.pause()
        node = explorer_screen.current
        return explorer_screen.trace.name(node)
    name = _open("mlp_eager", then)
    assert name == ref[0][0]["name"]  # the chain's first kernel, gelu's


def test_transformer_ranks_chains_and_escape_goes_back():
    ref = reference_chains(Raw("transformer_eager"))

    async def then(pilot, app, explorer_screen):
        o = app.screen
        n = o.query_one("#opp-table").row_count
        saves = [c["projected_saving_us"] for c in o.report["chains"] if c["projected_saving_us"] is not None]
        await pilot.press("escape")
        await pilot.pause()
        return n, saves, isinstance(app.screen, ExplorerScreen)
    n, saves, back = _open("transformer_eager", then)
    assert n == len(ref) and saves == sorted(saves, reverse=True) and back


def test_the_binding_is_described_and_in_help():
    from tracetui.ui.app import ExplorerScreen as E
    b = next(b for b in E.BINDINGS if b.action == "opportunities")
    assert b.key == "O" and b.description
    from pathlib import Path
    import tracetui.ui
    help_md = (Path(tracetui.ui.__file__).parent / "help.md").read_text()
    assert "| `O` | fusion opportunities" in help_md
