"""Layout snapshots of the main screens at 80x24 and 160x48 (pytest-textual-snapshot).

Regenerate deliberately with `pytest tests/ui/test_snapshots.py --snapshot-update` and review the SVGs.
"""
from __future__ import annotations

import time

import pytest

from tracetui.ui.app import TraceApp

from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.diff_view import DiffScreen, LadderScreen

from tests.conftest import TRACES

SIZES = [(80, 24), (160, 48)]


async def _settled(pilot):
    """Pause until three pauses in a row, each giving the app 50 ms, leave every widget's region and
    the rendered screen as they were. Regions alone miss a content update that moves nothing (a
    table's rows drawn on a later idle, styles changing with focus): the diff's changes screen
    failed CI once that way at 160x48 (stop 46), so the screen itself is compared too. Two
    instant pauses were not enough on a loaded 2-core machine: a fresh-clone run (2026-12-06,
    12:41 UTC) caught the diff's summary one line high, its layout after a Static.update not yet
    made, so each pause now gives the app time for its idle work, and one more must agree."""
    seen, same = None, 0
    for _ in range(200):
        await pilot.pause(0.05)
        now = ([(w, w.region) for w in pilot.app.screen.walk_children()], pilot.app.export_screenshot())
        same = same + 1 if now == seen else 0
        if same == 2:
            return
        seen = now
    raise AssertionError("the screen kept changing for 200 pauses: no stable state to snapshot")


async def _loaded(pilot):
    deadline = time.monotonic() + 120  # a busy 2-core CI machine: fail here, not as a wrong picture
    while True:
        s = pilot.app.screen
        if isinstance(s, ExplorerScreen) or (isinstance(s, DiffScreen) and s.result is not None) or (
                isinstance(s, LadderScreen) and s.ladder is not None):
            break
        assert time.monotonic() < deadline, f"still loading after 120 s: {type(s).__name__}"
        await pilot.pause(0.02)
    # work still running in workers (a diff's later figures, the explorer's prefetch) may change
    # text without moving any region, which _settled cannot see: let it finish first (the diff
    # changes snapshot failed ~1 run in 10 under load before this)
    await pilot.app.workers.wait_for_complete()
    await _settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_explorer(snap_compare, size):
    app = TraceApp([TRACES / "mlp_eager.json.gz"])
    assert snap_compare(app, terminal_size=size, run_before=_loaded, press=["down", "right", "down", "right"])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_op_table(snap_compare, size):
    """The Ops tab of a GPU training trace: names take what the figures leave, kept apart (issue 43)."""
    app = TraceApp([TRACES / "transformer_eager.json.gz"])
    assert snap_compare(app, terminal_size=size, run_before=_loaded, press=["3"])


async def _opportunities(pilot):
    await _loaded(pilot)
    await pilot.press("O")
    for _ in range(500):
        if getattr(pilot.app.screen, "report", None) is not None:
            break
        await pilot.pause(0.05)
    await pilot.app.workers.wait_for_complete()
    await _settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_opportunities(snap_compare, size):
    """``O``: the ops column gets what the figures leave (it was 4 cells at 80 columns; issue 43)."""
    app = TraceApp([TRACES / "transformer_eager.json.gz"])
    assert snap_compare(app, terminal_size=size, run_before=_opportunities)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_kernel_table(snap_compare, size):
    app = TraceApp([TRACES / "mlp_compile.json.gz"])
    assert snap_compare(app, terminal_size=size, run_before=_loaded, press=["2"])


async def _diff_next(pilot):
    """Load, jump to the first difference, and wait until both panes' cursors have settled."""
    await _loaded(pilot)
    await pilot.press("n")
    s = pilot.app.screen
    for _ in range(200):
        await pilot.pause()
        a, b = s.query_one("#pane-a"), s.query_one("#pane-b")
        if a.cursor_row == b.cursor_row == s.row and a.cursor_row > 0:
            break
    await pilot.wait_for_scheduled_animations()
    await _settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_diff(snap_compare, size):
    app = TraceApp([TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"], diff=True)
    assert snap_compare(app, terminal_size=size, run_before=_diff_next)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_diff_changes(snap_compare, size):
    """The diff's first screen: the biggest changes by kind."""
    app = TraceApp([TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"], diff=True)
    assert snap_compare(app, terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ladder(snap_compare, size):
    """The bundled default's first screen: the MLP ladder."""
    app = TraceApp([TRACES / f"mlp_{x}.json.gz" for x in ("eager", "compile", "triton", "fused")], diff=True)
    assert snap_compare(app, terminal_size=size, run_before=_loaded)


async def _memory(pilot):
    """Load the CPU recording with memory events, open the memory view (5) and wait until the
    model is built and drawn (it is built in a worker)."""
    await _loaded(pilot)
    await pilot.press("5")
    for _ in range(500):
        s = pilot.app.screen
        if s.trace.memory_ready and s.memory_view._shown:
            break
        await pilot.pause(0.02)
    await _settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_memory(snap_compare, size):
    from tests.conftest import DATA
    app = TraceApp([DATA / "cpu_transformer_eager_memory.json.gz"])
    assert snap_compare(app, terminal_size=size, run_before=_memory)


@pytest.fixture(scope="module")
def synth_trace(tmp_path_factory):
    """The Kineto-shaped trace of tests/ui/synth.py: main and autograd threads, two streams."""
    from tests.ui.synth import make
    p = tmp_path_factory.mktemp("snap") / "synth.json"
    make(p)
    return p


TIMELINE_KEYS = {
    "step": ["4"],                                          # the first step, fitted
    "whole": ["4", "w"],                                     # every step: merged coverage
    "deep": ["4", "down", "down", "right", "right", "plus", "plus", "plus", "plus"],  # names inside events
    "range": ["4", "down", "down", "m", "right", "right", "right", "right", "m"],
}
"""The timeline at three zoom levels and with a range marked (its summary line and table)."""


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(TIMELINE_KEYS))
def test_timeline(snap_compare, synth_trace, size, view):
    app = TraceApp([synth_trace])
    assert snap_compare(app, terminal_size=size, run_before=_loaded, press=TIMELINE_KEYS[view])
