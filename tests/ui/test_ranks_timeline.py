"""The ranks timeline (`t` in the job view): a generated 4-rank job opened as `tracetui DIR`, the key
pressed, collectives walked at 80x24; what it says checked against `tracetui ranks --json`; a
snapshot at 160x48."""
from __future__ import annotations

import asyncio

import pytest

from tracetui.ui.app import TraceApp
from tracetui.ui.job_view import JobScreen
from tracetui.ui.modals import HelpScreen
from tracetui.ui.ranks_timeline import LABEL_W, RanksTimelineScreen

from tests.ui.test_job_view import _ready, job_dir, job_json  # noqa: F401 - the same job, its fixtures


async def _timeline(pilot):
    await _ready(pilot)
    await pilot.press("t")
    for _ in range(50):
        if isinstance(pilot.app.screen, RanksTimelineScreen):
            break
        await pilot.pause(0.02)
    await pilot.pause()


def _text(screen, wid: str) -> str:
    return str(screen.query_one(wid).render())


def test_t_opens_the_timeline_and_walks_the_collectives(job_dir, job_json):
    asyncio.run(_walk(job_dir, job_json))


async def _walk(job_dir, job_json):
    app = TraceApp([job_dir], job=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await _timeline(pilot)
        screen = app.screen
        assert isinstance(screen, RanksTimelineScreen)
        lanes = screen.view
        ranks = [p["rank"] for p in job_json["per_rank"]]
        assert [ln.rank for ln in lanes.rows] == ranks
        assert [lanes.render_line(y).text[:LABEL_W].strip() for y in range(len(ranks))] == \
            [f"▸ rank {r}" for r in ranks]
        colls = job_json["collectives"]
        for j in range(3):  # n walks the collectives in start order; each drawn across the ranks
            await pilot.press("n")
            assert lanes.selected == j
            c = colls[j]
            detail = _text(screen, "#tl-detail")
            first = min(p["start_us"] for p in c["per_rank"])
            last = max(c["per_rank"], key=lambda p: p["start_us"])
            assert f"collective {j + 1}/{len(colls)}" in detail
            assert f"last: rank {c['last_rank']} arrived {last['start_us'] - first:,.0f} µs after the first" in detail
            top = max(c["per_rank"], key=lambda p: p["wait_us"])
            assert f"rank {top['rank']} {top['wait_us']:,.0f} µs" in detail
            lines = [lanes.render_line(y).text for y in range(len(ranks))]
            assert all("┃" in ln for ln in lines)  # the last arrival's column, on every lane
        await pilot.press("p")
        assert lanes.selected == 1
        # the cursor rank's offset, spread, skew and imbalance as ranks --json has them
        await pilot.press("down")
        p = job_json["per_rank"][1]
        detail = _text(screen, "#tl-detail")
        assert f"rank {p['rank']} · clock {p['clock']} offset {p['offset_us']:+,.3f} µs" in detail
        assert f"start skew {p['start_skew_us']:,.0f} µs · work imbalance {p['work_imbalance_us']:,.0f} µs" in detail
        await pilot.press("enter")  # its threads open below it
        subs = [ln for ln in lanes.rows if ln.sub is not None]
        assert subs and all(ln.rank == p["rank"] for ln in subs)
        assert len(lanes.rows) == len(ranks) + len(subs)
        before = (lanes.t0, lanes.t1)
        await pilot.press("plus")
        assert lanes.t1 - lanes.t0 < before[1] - before[0]
        await pilot.press("0")
        assert (lanes.t0, lanes.t1) == (screen.lanes.start, screen.lanes.end)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("escape")
        assert isinstance(app.screen, JobScreen)


def test_keys_move_the_cursor_past_the_screen(job_dir):
    """More lanes than the screen holds: up/down/PgUp move the rank cursor and the view follows it
    (ScrollView's own bindings scrolled the view away from the cursor)."""
    asyncio.run(_past_the_screen(job_dir))


async def _past_the_screen(job_dir):
    app = TraceApp([job_dir], job=True)
    async with app.run_test(size=(80, 18)) as pilot:
        await _timeline(pilot)
        screen = app.screen
        lanes = screen.view
        ranks = list(lanes.job.ranks)
        # every rank opened: more lanes than fit; the keys move the cursor, the view follows
        await pilot.press("pageup")
        assert lanes.cursor == 0
        for _ in range(200):  # bounded: a cursor that does not move must fail, not hang
            ln = lanes.rows[lanes.cursor]
            if ln.sub is None and ln.rank not in lanes.expanded:
                await pilot.press("enter")
            if lanes.cursor == len(lanes.rows) - 1:
                break
            await pilot.press("down")
        assert lanes.expanded == set(ranks) and len(lanes.rows) > lanes.size.height
        assert lanes.cursor == len(lanes.rows) - 1
        assert lanes.scroll_offset.y == len(lanes.rows) - lanes.size.height
        assert _text(screen, "#tl-detail").startswith(f"rank {lanes.rows[-1].rank} {lanes.rows[-1].sub}")
        await pilot.press("pageup")
        assert lanes.cursor == len(lanes.rows) - 1 - (lanes.size.height - 1)


def test_the_key_is_in_the_footer_and_the_palette(job_dir):
    asyncio.run(_key_shown(job_dir))


async def _key_shown(job_dir):
    app = TraceApp([job_dir], job=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Ranks timeline" in titles
        assert any(b.key == "t" and b.description == "Ranks timeline" for b in JobScreen.BINDINGS)
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, RanksTimelineScreen)


@pytest.mark.parametrize("size", [(160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_ranks_timeline_snapshot(snap_compare, job_dir, size):
    app = TraceApp([job_dir], job=True)
    assert snap_compare(app, terminal_size=size, run_before=_timeline, press=["n", "n", "down", "enter"])
