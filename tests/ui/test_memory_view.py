"""The memory view (key 5) and an op's memory in the detail pane, with Pilot; figures checked
against the raw JSON of the recording, the plot against a column-by-column reference."""
from __future__ import annotations

import asyncio
import gzip
import json
from decimal import Decimal

import numpy as np
import pytest

from tracetui.ui.app import TraceApp

from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.memory_view import braille_plot

from tests.conftest import DATA, TRACES

MEM = DATA / "cpu_transformer_eager_memory.json.gz"


def _raw():
    with gzip.open(MEM, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]


async def _open_memory(pilot):
    app = pilot.app
    while not isinstance(app.screen, ExplorerScreen):
        await pilot.pause(0.02)
    await pilot.press("5")
    view = app.screen.memory_view
    for _ in range(500):
        if app.screen.trace.memory_ready and view._shown:
            break
        await pilot.pause(0.02)
    await pilot.pause()
    return app.screen, view


def test_memory_view_peak_steps_and_jumps():
    asyncio.run(_peak_steps_and_jumps())


async def _warm_view(pilot, ready=lambda view: view.pages_ready and view._warm is None and view.container_size.width,
                     tries: int = 200):
    """(screen, memory view) once the explorer is up, its workers are done and ``ready(view)``
    holds (by default: the pages are built and the view's off-screen first layout is over)."""
    app = pilot.app
    while not isinstance(app.screen, ExplorerScreen):
        await pilot.pause(0.02)
    screen, view = app.screen, app.screen.memory_view
    for _ in range(tries):
        await app.workers.wait_for_complete()
        if ready(view):
            break
        await pilot.pause(0.02)
    return screen, view


async def _peak_steps_and_jumps():
    app = TraceApp([MEM])
    async with app.run_test(size=(120, 40)) as pilot:
        screen, view = await _open_memory(pilot)
        tr = screen.trace
        raw = _raw()
        assert screen.query_one("#views").current == "memory"
        # the first step is selected at start: its peak is the highest Total Allocated in its host
        # interval (or the level it starts with)
        for _ in range(tr.n_steps):
            w = tr.step_window(view.scope)
            ns = lambda e: round(e["ts"] * 1000)  # noqa: E731
            level = [e["args"]["Total Allocated"] for e in raw if ns(e) < w.start][-1:]
            inside = [e["args"]["Total Allocated"] for e in raw if w.start <= ns(e) < w.end]
            assert view._peak.allocated == max(level + inside)
            assert str(view.query_one("#mem-head").render()).count("peak") == 1
            await pilot.press("full_stop")
        # the live table accounts for the peak
        live = view.query_one("#mem-live")
        assert live.row_count >= 1
        assert sum(g["bytes"] for g in view._holders) + view._peak.held_before == view._peak.allocated
        # Enter on the top holder jumps to its op in the tree
        top = view._holders[0]
        live.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.query_one("#views").current == "tree"
        assert tr.kind(screen.current) == "op" and tr.name(screen.current) == top["key"][0]
        # back to memory; Enter on the per-op table's first row walks that op's calls with n
        await pilot.press("5")
        await pilot.pause()
        ops = view.query_one("#mem-ops")
        ops.focus()
        stat = view._stats[0]
        await pilot.press("enter")
        await pilot.pause()
        assert tr.name(screen.current) == stat.name and screen.matches.size == stat.nodes.size
        await pilot.press("n")
        assert tr.name(screen.current) == stat.name


def test_leak_op_detail_pane(cpu_memory_trace):
    """The op that made a never-freed block says so in its detail pane, once the model is built."""
    async def run():
        app = TraceApp([cpu_memory_trace])
        async with app.run_test(size=(160, 48)) as pilot:
            screen, _ = await _open_memory(pilot)
            tr = screen.trace
            mem = tr.memory
            leaks = [int(i) for i in mem.never_freed() if mem.module_label(int(i)) == "Leaky_0"]
            assert len(leaks) == tr.n_steps
            op = int(mem.op[leaks[0]])
            screen.jump(op)
            await pilot.pause()
            assert screen.current == op
            shown = screen.query_one(DetailPane).text.plain
            assert "memory (allocated / freed" in shown and "never freed in the trace" in shown
            assert f"allocated {mem.nbytes[leaks[0]] / 1024:.1f} KiB in 1" in shown
    asyncio.run(run())


def test_memory_view_without_memory_and_palette():
    asyncio.run(_without_memory())


async def _without_memory():
    app = TraceApp([TRACES / "linear_eager.json.gz"])
    async with app.run_test(size=(100, 30)) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.02)
        screen = app.screen
        titles = [c.title for c in app.get_system_commands(screen)]
        assert "Show memory" in titles
        await pilot.press("5")
        for _ in range(200):
            if "no [memory] events" in str(screen.memory_view.query_one("#mem-head").render()):
                break
            await pilot.pause(0.02)
        assert "no [memory] events" in str(screen.memory_view.query_one("#mem-head").render())


def test_braille_plot_against_columns():
    """Every dot column shows the highest level reached in its time slice (the level carried in
    included), as filled dots out of 4 per row; the reserved line sits at its own level."""
    rng = np.random.default_rng(0)
    ts = np.sort(rng.integers(0, 10_000, 200))
    alloc = rng.integers(0, 1 << 20, 200)
    reserved = np.maximum.accumulate(alloc) + 4096
    lo, hi, width, rows = 1_000, 9_000, 37, 5
    text, styles, top = braille_plot(ts, alloc, reserved, lo, hi, width, rows, None)
    xs, ys = 2 * width, 4 * rows

    def colmax(v, x):
        a, b = lo + x * (hi - lo) // xs, lo + (x + 1) * (hi - lo) // xs
        level = [int(v[i]) for i in range(len(ts)) if ts[i] <= a][-1:]
        inside = [int(v[i]) for i in range(len(ts)) if a <= ts[i] < b]
        return max(level + inside + [0])

    want_top = max(max(colmax(alloc, x), colmax(reserved, x)) for x in range(xs))
    assert top == want_top
    bits = np.array([[ord(c) - 0x2800 if c != " " else 0 for c in row] for row in text])
    dots = {(0, 0): 0x01, (1, 0): 0x02, (2, 0): 0x04, (3, 0): 0x40, (0, 1): 0x08, (1, 1): 0x10, (2, 1): 0x20, (3, 1): 0x80}
    for x in range(xs):
        filled = int(np.ceil(colmax(alloc, x) * ys / top))
        line = int(np.ceil(colmax(reserved, x) * ys / top)) - 1
        for y in range(ys):  # y counted from the bottom
            r, dr = divmod(ys - 1 - y, 4)
            on = bool(bits[r, x // 2] & dots[(dr, x % 2)])
            assert on == (y < filled or y == line), (x, y)
    assert all(len(row) == width for row in text) and len(text) == rows


def test_memory_view_two_devices_on_hta_trace(peer_dir):
    """HTA's GPU trace: CPU and GPU1. The view opens on the device whose Total Allocated reaches
    highest in the file (the GPU: its CPU allocations are bytes), with the file's highest GPU
    Total Allocated as the whole-trace peak (the cursor on the root); `v` goes to the other."""
    path = peer_dir / "df_index_resolver_df_index_resolver.json.gz"
    with gzip.open(path, "rt") as f:
        raw = [e["args"] for e in json.load(f)["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    gpu_max = max(a["Total Allocated"] for a in raw if a["Device Type"] == 1)
    cpu_max = max(a["Total Allocated"] for a in raw if a["Device Type"] == 0)
    assert gpu_max > cpu_max

    async def run():
        app = TraceApp([path])
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, ExplorerScreen):
                await pilot.pause(0.02)
            await pilot.press("g")  # the root row: the view shows the whole trace
            await pilot.pause()
            screen, view = await _open_memory(pilot)
            assert view.scope == 0 and screen.trace.memory.devices == ["CPU", "GPU1"]
            assert view.device == 1 and view._peak.allocated == gpu_max
            assert "GPU1" in str(view.query_one("#mem-head").render())
            assert view.query_one("#mem-ops").row_count == len(
                [s for s in screen.trace.memory.op_stats() if s.device == "GPU1"])
            await pilot.press("v")
            await pilot.pause()
            assert view.device == 0 and view._peak.allocated == cpu_max
            assert str(view.query_one("#mem-head").render()).startswith("CPU")
    asyncio.run(run())


def test_memory_view_head_fits_80_columns(peer_dir):
    """At 80x24 the first line keeps every figure (device, peak, reserved, never freed) whole:
    the key hints give way first (the newcomer run saw it cut at 'reserved 11.9')."""
    path = peer_dir / "df_index_resolver_df_index_resolver.json.gz"

    async def run():
        app = TraceApp([path])
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("g")
            screen, view = await _open_memory(pilot)
            head = view.query_one("#mem-head")
            text = str(head.render())
            assert len(text) <= head.size.width, text
            assert "peak " in text and "reserved " in text and "(v)" not in text
            page = view.page(view.device, view.scope)
            if page.never:
                assert f"never freed {page.never}" in text
    asyncio.run(run())


# ---- off the keys: the model built in a worker, Enter landing on the op the raw JSON names

def _raw_view(raw, scope_name: str) -> tuple[int, int, int, list]:
    """From the raw JSON alone, for the step named ``scope_name`` on a CPU recording: its
    window (ns), the peak's Total Allocated in it (the level carried in counts) and the
    allocations live there, as (instant index in ``raw.mem``, thread, ts) ."""
    ns = lambda v: int(Decimal(v) * 1000)  # noqa: E731
    with gzip.open(MEM, "rt") as f:
        ev = json.load(f, parse_float=Decimal)["traceEvents"]
    step = [e for e in ev if e.get("ph") == "X" and e.get("name") == scope_name]
    assert len(step) == 1
    lo, hi = ns(step[0]["ts"]), ns(step[0]["ts"]) + ns(step[0]["dur"])
    cpu = [j for j, m in enumerate(raw.mem) if raw.device(m[3]) == "CPU"]
    before = [j for j in cpu if raw.mem[j][0] < lo][-1:]
    cand = before + [j for j in cpu if lo <= raw.mem[j][0] < hi]
    k = max(cand, key=lambda j: (raw.mem[j][3]["Total Allocated"], -j))  # the first highest
    freed_at = {}  # allocation -> position of its free, walking (device, address) in time order
    open_at = {}
    for j, (_, _, _, a) in enumerate(raw.mem):
        key = (raw.device(a), a["Addr"])
        if a["Bytes"] > 0:
            open_at[key] = j
        elif key in open_at:
            freed_at[open_at.pop(key)] = j
    live = [(j, raw.mem[j][2], raw.mem[j][0]) for j in cpu
            if j <= k and raw.mem[j][3]["Bytes"] > 0 and freed_at.get(j, len(raw.mem)) > k]
    return lo, hi, raw.mem[k][3]["Total Allocated"], live


def test_enter_lands_on_the_raw_op():
    """Enter on a peak-holder row lands on the innermost cpu_op (from the raw JSON) holding one
    of the allocations live at the step's peak, named as the row; Enter on a per-op row lands on
    the earliest raw cpu_op of that name holding a [memory] instant of the step, and n walks as
    many calls as the raw JSON has."""
    from tests.model.test_memory import Raw
    raw = Raw(MEM)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(160, 48)) as pilot:
            screen, view = await _open_memory(pilot)
            tr = screen.trace
            lo, hi, peak, live = _raw_view(raw, tr.name(view.scope))
            assert view._peak.allocated == peak
            innermost = {}  # (name, start ns) of the innermost op of each live allocation
            for _, key, t in live:
                ops = raw.containing(key, t)
                if ops:
                    innermost[(ops[-1][3], ops[-1][0])] = True
            live_table = view.query_one("#mem-live")
            for row in range(min(2, len(view._holders))):
                name = view._holders[row]["key"][0]
                assert f"  {name}" in live_table.row_text(row)
                live_table.focus()
                live_table.cursor = row
                await pilot.press("enter")
                await pilot.pause()
                assert screen.query_one("#views").current == "tree"
                node = screen.current
                assert (tr.name(node), int(tr.tree.start[node])) in innermost
                assert tr.name(node) == name
                await pilot.press("5")
                await pilot.pause()
            ops_table = view.query_one("#mem-ops")
            for row in (0, 2):
                name = view._stats[row].name
                assert ops_table.row_text(row).startswith(f" {name} ")  # the op first, whole
                calls = sorted({o[0] for key, ops in raw.ops.items() for o in ops if o[3] == name
                                and any(o[0] <= t < o[1] and k == key and lo <= t < hi
                                        and raw.device(a) == "CPU" for t, _, k, a in raw.mem)})
                ops_table.focus()
                ops_table.cursor = row
                await pilot.press("enter")
                await pilot.pause()
                node = screen.current
                assert (tr.name(node), int(tr.tree.start[node])) == (name, calls[0])
                assert screen.matches.size == len(calls)
                await pilot.press("n")
                await pilot.pause()
                if len(calls) > 1:
                    assert int(tr.tree.start[screen.current]) == calls[1]
                await pilot.press("5")
                await pilot.pause()
    asyncio.run(run())


def test_memory_key_before_the_model(monkeypatch):
    """5 pressed while the model is still being built answers at once with a placeholder, keys
    keep answering, and the view fills in once the worker is done (the peak the raw JSON has)."""
    import threading
    import time

    from tracetui.model import memory as memory_model

    gate = threading.Event()
    real = memory_model.build_memory

    def gated(trace):
        gate.wait(30)  # held until the test lets it go (30 s: a broken test must not hang)
        return real(trace)

    monkeypatch.setattr(memory_model, "build_memory", gated)
    from tests.model.test_memory import Raw
    raw = Raw(MEM)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, ExplorerScreen):
                await pilot.pause(0.02)
            screen = app.screen
            view = screen.memory_view
            t0 = time.monotonic()
            await pilot.press("5")
            await pilot.pause()
            await pilot.press("full_stop")  # a step key, before anything is built
            await pilot.pause()
            assert time.monotonic() - t0 < 10 and not gate.is_set()
            assert screen.query_one("#views").current == "memory"
            assert not screen.trace.memory_ready and not view._shown
            assert "reading memory events" in str(view.query_one("#mem-head").render())
            assert view.query_one("#mem-live").row_count == 0 and view.query_one("#mem-ops").row_count == 0
            gate.set()
            for _ in range(500):
                if view._shown:
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            tr = screen.trace
            assert tr.steps.index(view.scope) == 1  # the step key was kept: the second step
            _, _, peak, live = _raw_view(raw, tr.name(view.scope))
            assert view._peak.allocated == peak
            assert view.query_one("#mem-live").row_count >= 1 and view.query_one("#mem-ops").row_count >= 1
            assert "peak" in str(view.query_one("#mem-head").render())
            assert view._peak.live.size == len(live)
    asyncio.run(run())


def test_first_layout_off_screen(monkeypatch):
    """Once its pages are built, the hidden view is laid out once below the screen's edge (the
    tree stays what is shown), then put back; the first 5 then shows it in the place and with
    the figures of any later 5."""
    from tracetui.ui.memory_view import MemoryView

    seen = []  # (box region on screen, its size, view shown) at each round of the off-screen layout
    real = MemoryView._warm_rounds

    def rounds(self, left):
        if self._warm is not None:
            seen.append((self._warm.region, self._warm.size, self.screen.query_one("#views").current))
        real(self, left)

    monkeypatch.setattr(MemoryView, "_warm_rounds", rounds)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot, lambda view: seen and view._warm is None, tries=100)
            assert seen and view._warm is None
            switcher = screen.query_one("#views")
            for region, size, current in seen:  # nothing of it on screen, at the size it will have
                assert current == "tree" and (not region.area or region.y >= app.size.height)
            assert seen[-1][1] == switcher.content_size
            box = view.parent
            assert not box.display and view.container_size.width > 0  # hidden again, but laid out
            assert all(box.styles.inline.get_rule(r) is None for r in ("position", "offset", "width", "height"))
            await pilot.press("5")
            await pilot.pause()
            assert box.region == switcher.content_region
            assert view.region.y < app.size.height and view._shown
            tr = screen.trace
            lo, hi, peak, _ = _raw_view(Raw(MEM), tr.name(view.scope))
            assert view._peak.allocated == peak
            assert "peak" in str(view.query_one("#mem-head").render())
    from tests.model.test_memory import Raw
    asyncio.run(run())


def test_first_5_costs_what_a_later_5_costs(monkeypatch):
    """The off-screen first layout also styles the tables' scrollbars and paints the view once:
    the first 5 then lays the screen out once (Textual styled a table's scrollbars the first time
    the 5's focus restyled the table, and laid the screen out a second time for it) and draws no
    line a later 5 does not draw (it drew the plot, the per-op table and the view's boxes)."""
    from textual._styles_cache import StylesCache
    from textual.screen import Screen

    layouts, drawn = [], []
    real_layout, real_line = Screen._refresh_layout, StylesCache.render_line

    def layout(self, *a, **k):
        layouts.append(self)
        return real_layout(self, *a, **k)

    def line(self, styles, y, *a):  # a line drawn, not taken from its widget's cache
        widget = a[5].__self__  # render_content_line: the widget's render_line
        drawn.append(widget.id or type(widget).__name__)
        return real_line(self, styles, y, *a)

    async def key(pilot, k):
        layouts.clear()
        drawn.clear()
        await pilot.press(k)
        await pilot.pause()
        await pilot.pause()
        return len(layouts), set(drawn)

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            _, view = await _warm_view(pilot)
            assert view.pages_ready and view._warm is None and view.container_size.width
            # the tree's own scrollbars are styled at its first blur after they appear (Textual's
            # rule, any view): done here, so that only the memory view's first 5 is measured
            await pilot.press("3", "1")
            await pilot.pause()
            monkeypatch.setattr(Screen, "_refresh_layout", layout)
            monkeypatch.setattr(StylesCache, "render_line", line)
            first = await key(pilot, "5")
            back = await key(pilot, "1")
            later = await key(pilot, "5")
            assert "mem-plot" not in later[1] and "mem-ops" not in later[1]  # a later 5 draws neither
            assert back[0] == later[0] == 1 and "mem-live" in later[1]
            assert first[0] == 1, first
            assert first[1] <= later[1], first[1] - later[1]
            assert "peak" in str(view.query_one("#mem-head").render())
    asyncio.run(run())


def test_new_step_and_jump_paint_in_the_key_frame(monkeypatch):
    """5 on a step the view has not shown fits each table once, at the width it is laid out at
    (fitted while hidden at 0 columns, its Resize on showing fitted and drew it again), and
    Enter's jump asks for the repaints of the tree's detail pane, breadcrumb and status line in
    the frame that lays the tree out (each widget posted its own at its next idle: a second
    frame over them)."""
    from textual.screen import Screen
    from tracetui.ui.line_table import LineTable

    ticks, fits = [], []
    real_tick, real_fit = Screen._on_timer_update, LineTable._fit

    def tick(self):
        ticks.append((self._layout_required, {w.id for w in self._dirty_widgets}))
        return real_tick(self)

    def fit(self, width):
        fits.append((self.id, width))
        return real_fit(self, width)

    monkeypatch.setattr(Screen, "_on_timer_update", tick)  # before the screen's timer takes it

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot)
            tr = screen.trace
            other = tr.steps[-1]
            assert tr.n_steps > 1 and view.scope != other  # the warm layout showed the first step
            screen.jump(other)
            await pilot.pause()
            monkeypatch.setattr(LineTable, "_fit", fit)
            await pilot.press("5")
            await pilot.pause()
            assert view.scope == other
            for tid in ("mem-live", "mem-ops"):
                table = view.query_one(f"#{tid}", LineTable)
                assert [w for t, w in fits if t == tid] == [table.scrollable_content_region.width], fits
            view.query_one("#mem-live").focus()
            await pilot.pause()
            ticks.clear()
            await pilot.press("enter")
            await pilot.pause()
            assert screen.query_one("#views").current == "tree"
            layout = [i for i, (lay, _) in enumerate(ticks) if lay]
            assert layout and {"details", "breadcrumb"} <= ticks[layout[0]][1], ticks
            later = set().union(*(d for _, d in ticks[layout[0] + 1:]))
            assert not later & {"details", "breadcrumb", "status"}, ticks
    asyncio.run(run())


def test_step_keys_find_their_plot_and_rows_drawn_by_the_worker(monkeypatch):
    """Once the app's workers are done, every step's plot and table rows are ready at the view's
    size: , . and 5 on a new step draw no plot and fit no rows in the key, and what they show
    is what a fresh drawing of that step gives (head naming the step, plot, fitted rows)."""
    from tracetui.ui import line_table
    from tracetui.ui.line_table import LineTable
    from tracetui.ui.memory_view import MemoryView

    calls = []
    real_plot, real_fit = MemoryView._render_plot, line_table.relayout

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=(120, 40)) as pilot:
            screen, view = await _warm_view(pilot, lambda view: view.pages_ready and view._warm is None
                                            and view.container_size.width and not view.app.workers, tries=300)
            tr = screen.trace
            monkeypatch.setattr(MemoryView, "_render_plot", lambda *a: calls.append("plot") or real_plot(*a))
            monkeypatch.setattr(line_table, "relayout", lambda *a: calls.append("fit") or real_fit(*a))
            screen.jump(tr.steps[-1])  # a step the view has not shown
            await pilot.pause()
            await pilot.press("5")
            await pilot.pause()
            seen = set()
            for k in ["full_stop"] * tr.n_steps + ["comma"] * 2:
                await pilot.press(k)
                await pilot.pause()
                seen.add(view.scope)
            assert calls == [], calls
            assert len(seen) == tr.n_steps
            monkeypatch.setattr(MemoryView, "_render_plot", real_plot)
            monkeypatch.setattr(line_table, "relayout", real_fit)
            width, n_rows = view._plot_size()
            head, plot, _ = view._render_plot(view.device, view.scope, width, n_rows)
            assert str(view.query_one("#mem-head").render()) == head.plain and tr.name(view.scope) in head.plain
            assert str(view.query_one("#mem-plot").render()) == plot.plain
            page = view.page(view.device, view.scope)
            for tid, lines in (("mem-live", page.live), ("mem-ops", page.ops)):
                table = view.query_one(f"#{tid}", LineTable)
                want = real_fit(table.columns, lines, table.flex, table.scrollable_content_region.width, table.least)
                assert [table.row_text(i) for i in range(table.row_count)] == want.lines
    asyncio.run(run())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_memory_head_of_a_trace_without_steps_offers_no_step_keys(tmp_path, size):
    """A CPU recording with profile_memory=True and no profiler schedule has no step markers: the
    head said "whole trace (, .)", offering step keys that do nothing. Where the hints fit it says
    why there are none; where they do not (80 columns), the figures stay whole."""
    with gzip.open(MEM, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    assert any(e.get("name") == "[memory]" for e in doc["traceEvents"])
    path = tmp_path / "stepless_memory.json"
    path.write_text(json.dumps(doc))

    async def run():
        app = TraceApp([path])
        async with app.run_test(size=size) as pilot:
            screen, view = await _open_memory(pilot)
            assert not screen.trace.steps
            for key in (None, "full_stop", "comma"):
                if key:
                    await pilot.press(key)
                    await pilot.pause()
                head = view.query_one("#mem-head")
                text = str(head.render())
                assert "(, .)" not in text and "whole trace" in text, text
                assert len(text) <= head.size.width and "peak " in text
                if size[0] >= 160:
                    assert "whole trace (no step markers) · peak" in text, text
    asyncio.run(run())
