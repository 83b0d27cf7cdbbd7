"""Names cut until they meant nothing (issue 36, item 6): the memory view's op column showed ~11
cells at any width, kernels looked identical in the kernel table at 80 columns, and the timeline's
range export shortened kernel names. Names now take the width there is, keep a distinguishing tail
where they must be cut, and exports carry them whole. Names are checked against the raw JSON."""
from __future__ import annotations

import asyncio
import csv
import gzip
import json

import pytest

from tracetui.ui.app import TraceApp
from tracetui.ui.explorer import ExplorerScreen
from tracetui.ui.format import ELLIPSIS, fit, fit_distinct

from tests.conftest import TRACES
from tests.ui.test_app import explorer, wait_for

MEM = TRACES / "transformer_eager_memory.json.gz"
GPU = TRACES / "transformer_eager.json.gz"


def _raw(path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _shows(cell: str, name: str) -> bool:
    """``cell`` is ``name`` whole, or cut around ellipses into pieces found in it, in order, its
    first piece its start and its last piece its end (nothing made up, both ends kept)."""
    if cell == name:
        return True
    pieces = cell.split(ELLIPSIS)
    if len(pieces) < 2 or not name.startswith(pieces[0]) or not name.endswith(pieces[-1]):
        return False
    at = len(pieces[0])
    for p in pieces[1:-1]:
        at = name.find(p, at)
        if at < 0:
            return False
        at += len(p)
    return True


def test_fit_keeps_head_and_tail_and_fit_distinct_keeps_look_alikes_apart():
    assert fit("aten::empty_strided", 40) == "aten::empty_strided"
    cut = fit("aten::empty_strided", 14)
    assert len(cut) == 14 and _shows(cut, "aten::empty_strided") and cut.endswith("strided")
    names = ["autograd::engine::evaluate_function: " + n for n in
             ("NllLossBackward0", "EmbeddingBackward0", "LogSoftmaxBackward0", "NativeLayerNormBackward0")]
    names += ["mul: at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<…>, std::array<…> >",
              "mul: at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<…>, std::array<…> >",
              "mul: at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<…>, std::array<…> >"]
    for width in (28, 32, 40):
        out = fit_distinct(names, width)
        assert len(set(out)) == len(names), out
        assert all(len(o) <= width and _shows(o, n) for o, n in zip(out, names)), out


async def _memory(pilot):
    s = await explorer(pilot)
    await pilot.press("5")
    view = s.memory_view
    await wait_for(pilot, lambda: s.trace.memory_ready and view._shown, timeout=30)
    await pilot.pause()
    return s, view


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_memory_view_op_column_uses_the_width_there_is(size):
    """Every op name of the per-op table is shown in the part of the table on screen, whole when
    it fits the table's width and else head…tail, and different ops never read alike (was: the
    op came last, after 77 cells of figures, and showed its first ~11 characters)."""
    raw_ops = {e["name"] for e in _raw(MEM) if e.get("ph") == "X" and e.get("cat") == "cpu_op"}

    async def run():
        app = TraceApp([MEM])
        async with app.run_test(size=size) as pilot:
            s, view = await _memory(pilot)
            for tid, col in (("#mem-ops", "op"), ("#mem-live", "op")):
                table = view.query_one(tid)
                shown = table.scrollable_content_region.width
                j = [h for h, _ in table.columns].index(col)
                x = 1 + sum(w + 2 for w in table._widths[:j])  # where the column starts in a line
                w = table._widths[j]
                assert x + w <= shown, (tid, x, w, shown)  # the whole column is on screen
                names = [r[j] for r in table._given.cells]
                cells = [table.row_text(i)[x:x + w].rstrip() for i in range(table.row_count)]
                assert names and len(cells) == len(names)
                for cell, name in zip(cells, names):
                    if name in raw_ops:  # ops: their names from the JSON (the live table also has "… N more")
                        assert _shows(cell, name), (cell, name)
                        assert len(cell) >= min(len(name), 20)
                assert len({c for c, n in zip(cells, names)}) == len(set(names))
    asyncio.run(run())


def test_kernel_table_at_80_columns_tells_every_kernel_apart():
    """At 80 columns the name column gets what the figures leave, and the kernels (52 distinct in
    this transformer, among them nvjet GEMMs that differ only in their last characters:
    ``…coopB_NNT`` / ``…coopB_bias_TNT``) all read differently, each a cut of its own name."""
    async def run():
        app = TraceApp([GPU])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            t = s.kernel_table
            await wait_for(pilot, lambda: t.is_mounted and t.row_count > 0)
            await pilot.pause()
            cols = list(t.ordered_columns)
            x = sum(c.get_render_width(t) for c in cols[:-1])
            assert x + cols[-1].get_render_width(t) <= t.scrollable_content_region.width  # on screen
            cells = [t.cell_text(i, "name") for i in range(t.row_count)]
            labels = [t._kernel_label(a) for a in t.rows_data]
            assert len(set(labels)) == len(labels) == len(set(cells)) > 40
            assert all(_shows(c, lab) for c, lab in zip(cells, labels))
            # what the rows draw: the name column as rendered, distinct for every row on screen
            drawn = [t.render_line(y).text[x:].strip() for y in range(1, t.scrollable_content_region.height)]
            drawn = [d for d in drawn if d]
            assert len(drawn) >= 10 and len(set(drawn)) == len(drawn)
    asyncio.run(run())


def test_range_export_writes_kernel_names_whole(tmp_path, monkeypatch):
    """The marked range's CSV wrote kernel names as the screen shows them (templates folded:
    ``at::native::::cunn_SoftMaxBackward<8, …>``); it writes them as the trace has them."""
    monkeypatch.chdir(tmp_path)
    raw = _raw(GPU)
    kernel_names = {e["name"] for e in raw if e.get("cat") == "kernel"}
    op_names = {e["name"] for e in raw if e.get("ph") == "X"}

    async def run():
        app = TraceApp([GPU])
        async with app.run_test(size=(120, 40)) as pilot:
            s = await explorer(pilot)
            assert isinstance(s, ExplorerScreen)
            await pilot.press("4")
            tl = s.timeline
            await wait_for(pilot, lambda: tl.is_mounted and tl.lanes)
            tl.set_range(*tl.full)
            await pilot.pause()
            await pilot.press("e")
            await wait_for(pilot, lambda: getattr(s, "last_export", None) is not None)
            rows = list(csv.DictReader(s.last_export.open(encoding="utf-8", newline="")))
            kernels = [r["name"] for r in rows if r["what"] == "kernel"]
            ops = [r["name"] for r in rows if r["what"] == "op"]
            assert len(kernels) == 5 and ops
            assert all(k in kernel_names for k in kernels), kernels
            assert any(len(k) > 100 for k in kernels)  # a templated name, whole
            assert all(o in op_names for o in ops), ops
    asyncio.run(run())
