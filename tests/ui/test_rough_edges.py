"""The explorer's rough edges of issue 23, each seen by a new user, each with its test."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import K
from tracetui.ui.app import TraceApp
from tracetui.ui.detail_pane import DetailPane
from tracetui.ui.details import describe

from tests.conftest import TRACES
from tests.ui.test_app import explorer, search


def test_launched_gpu_work_lists_one_entry_a_line_with_no_literal_escape():
    t = load_trace(TRACES / "mlp_eager.json.gz")
    op = next(i for i in range(len(t.tree.kind)) if t.tree.kind[i] == K["module"] and t.gpu_descendants(i).size > 1)
    text = describe(t, op).plain
    assert "\\x0a" not in text
    section = text[text.index("launched GPU work"):].split("\n\n")[0].split("\n")
    names = [s for s in section[1:] if s.startswith("  ")]
    assert len(names) == min(8, t.gpu_descendants(op).size)


@pytest.mark.parametrize("size", [(80, 24), (120, 30)])
def test_the_detail_pane_wraps_at_the_width_left_by_its_scroll_bar(size):
    """A long text gets a scroll bar; lines wrapped before it appeared lost their last cells."""
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=size) as pilot:
            s = await explorer(pilot)
            await search(pilot, "GeluCUDAKernelImpl")
            await pilot.pause()
            pane = s.query_one(DetailPane)
            await pilot.pause()
            assert pane.virtual_size.height > pane.size.height  # it scrolls
            width = pane.scrollable_content_region.width
            assert {strip.cell_length for strip in pane._strips} == {width}
            shown = "".join(pane.render_line(y).text for y in range(pane.size.height))
            assert shown.replace(" ", "") == "".join(strip.text for strip in pane._strips[:pane.size.height]).replace(" ", "")
            words = [w for w in pane.plain.split() if len(w) < width]
            body = " ".join(strip.text.strip() for strip in pane._strips)
            assert all(w in body for w in words)  # nothing cut at the right edge
    asyncio.run(run())


def test_a_launch_row_shows_the_device_time_and_kernels_it_launched():
    """cuLaunchKernelEx (and a CUDA-graph launch) showed `device time -  kernels 0` above the
    GPU work it listed; the reference is the kernel with the same correlation id in the JSON."""
    import gzip
    import json
    t = load_trace(TRACES / "mlp_eager.json.gz")
    raw = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))["traceEvents"]
    rt = next(i for i in range(len(t.tree.kind)) if t.name(i) == "cuLaunchKernelEx")
    corr = t.args(rt)["correlation"]
    ks = [e for e in raw if e.get("cat") == "kernel" and e["args"].get("correlation") == corr]
    assert len(ks) == 1
    from tracetui.ui.format import fmt_us
    fields = {ln[:14].strip(): ln[15:] for ln in describe(t, rt).plain.split("\n")}
    assert fields["device time"] == fmt_us(round(ks[0]["dur"] * 1000))
    assert fields["kernels"] == "1"


def test_thread_0_and_negative_thread_ids_are_labelled_for_what_they_are(tmp_path):
    """`thread -549452224` (CUDA runtime calls under CUPTI's id) and `thread 0` (Python frames
    with no thread) appeared unexplained in the tree."""
    import json
    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": 1.0, "dur": 5.0},
           {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": -549452224, "ts": 2.0, "dur": 1.0},
           {"ph": "X", "cat": "python_function", "name": "train.py(3): step", "pid": 9, "tid": 0, "ts": 0.5, "dur": 8.0}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = load_trace(p)
    threads = {t.name(i) for i in range(len(t.tree.kind)) if t.tree.kind[i] == K["thread"]}
    tids = {e["tid"] for e in evs}
    assert len(threads) == len(tids)
    assert "runtime thread -549452224 (negative id) [pid 9]" in threads
    # the row says what it holds (issue 43 item 8): Python frames, as this file's tid-0 event is
    assert "thread 0 (no thread id: other threads' Python frames) [pid 9]" in threads
    assert "thread 9 [pid 9]" in threads


def test_one_unit_rule_for_times_in_tree_rows_and_details():
    """`dev 7,612.0µs` beside `31.91ms`: every time is written in the largest unit in which it is
    at least 1, so no µs figure reaches 1,000 and no ms figure is below 1."""
    import re
    from tracetui.ui.format import fmt_us

    for ns, want in ((7_612_000, "7.61ms"), (31_910_000, "31.9ms"), (999_000, "999.0µs"), (2_500, "2.50µs"),
                     (640, "640ns"), (3_200_000_000, "3.20s")):
        assert fmt_us(ns) == want

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(160, 48)) as pilot:
            s = await explorer(pilot)
            await pilot.press("g")
            texts = []
            for _ in range(25):
                await pilot.press("right", "down")
                await pilot.pause()
                texts.append(str(s.tree.cursor_node.label))
                texts.append(s.query_one(DetailPane).plain)
            figures = re.findall(r"([\d,]+(?:\.\d+)?)(ns|µs|ms)\b", "\n".join(texts))
            assert figures
            for num, unit in figures:
                v = float(num.replace(",", ""))
                assert v < 1000 and (unit == "ns" or v >= 1 or v == 0), (num, unit)
    asyncio.run(run())


def _raw_kernel_totals(path):
    import gzip
    import json
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    tot: dict = {}
    for e in raw:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("kernel", "gpu_memset", "gpu_memcpy"):
            tot[e["name"]] = tot.get(e["name"], 0.0) + e["dur"]
    return tot


def test_per_step_mode_keeps_shares_whole_and_says_it_is_on():
    """In per-step mode the kernel shares summed to 33% (divided by the step count on one side
    only), and nothing on screen said the mode was on; its key was `a`, the diff's "open A"."""
    from tracetui.ui.tables import AggTable

    tot = _raw_kernel_totals(TRACES / "mlp_eager.json.gz")
    grand = sum(tot.values())

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("t")
            await pilot.pause()
            table = s.query_one("#kernel-table", AggTable)
            assert table.per_step
            shares = [float(table.cell_text(i, "share %")) for i in range(table.row_count)]
            for i, a in enumerate(table.rows_data):
                assert shares[i] == pytest.approx(100 * tot[a.name] / grand, abs=0.06)
            assert sum(shares) == pytest.approx(100, abs=0.5)
            headers = [str(c.label) for c in table.columns.values()]
            assert any(h.startswith("total µs/step") for h in headers)
            assert "per-step" in str(s.query_one("#status").render())
            await pilot.press("1")  # the mode stays said on the status line, at its start
            await search(pilot, "aten::mm")
            status = str(s.query_one("#status").render())
            assert "per step" in status[:40] and "match" in status
            keys = {b.key: b.action for b in s.BINDINGS}
            assert "a" not in keys and keys["t"] == "toggle_avg"
    asyncio.run(run())


def test_kernel_table_names_are_shortened_and_led_by_their_functor():
    """Raw C++ names made two elementwise kernels look the same at 80 columns."""
    from tracetui.model.names import shorten_cpp
    from tracetui.ui.tables import AggTable

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await pilot.press("2")
            await pilot.pause()
            table = s.query_one("#kernel-table", AggTable)
            ew = [i for i, a in enumerate(table.rows_data) if "vectorized_elementwise_kernel" in a.name]
            assert len(ew) >= 2
            cells = [table.cell_text(i, "name") for i in ew]
            assert len({c[:20] for c in cells}) == len(cells)  # they differ where 80 columns show them
            for i, c in zip(ew, cells):  # the shortened name, or (where 80 columns are too few) its head…tail
                label = table._kernel_label(table.rows_data[i])
                assert label.endswith(shorten_cpp(table.rows_data[i].name)) and len(c) < len(table.rows_data[i].name)
                head, _, tail = c.partition("…" if c != label else "\0")
                assert c == label or (label.startswith(head) and label.endswith(tail) and len(tail) >= 4)
            mul = next(c for i, c in zip(ew, cells) if "MulFunctor" in table.rows_data[i].name)
            assert mul.startswith("mul: ")
    asyncio.run(run())


def test_y_copies_the_selected_name_and_e_exports_the_view(tmp_path, monkeypatch):
    """y: the selection's full name by OSC 52; e / E: the subtree, table or range as CSV /
    Markdown in a new file named in a notification. Checked against the tree and the JSON."""
    import csv
    import gzip
    import json

    from tracetui.ui.tables import AggTable

    monkeypatch.chdir(tmp_path)
    raw = json.loads(gzip.decompress((TRACES / "mlp_eager.json.gz").read_bytes()))["traceEvents"]

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "GeluCUDAKernelImpl")
            await pilot.press("y")
            await pilot.pause()
            assert app.clipboard == s.trace.name(s.current) and len(app.clipboard) > 160  # the full name
            await search(pilot, "Linear_0")
            mod = s.current
            await pilot.press("e")
            await pilot.pause()
            path = s.last_export
            assert path.parent == tmp_path and path.suffix == ".csv"
            assert any(str(path) in str(n.message) for n in app._notifications)
            rows = list(csv.reader(path.open(encoding="utf-8", newline="")))
            assert rows[0][:3] == ["depth", "kind", "name"] and rows[1][2] == "nn.Module: Linear_0"
            # the subtree: every descendant shown in the tree (Python frames hidden), once
            t = s.trace.tree
            want, stack = 0, [mod]
            while stack:
                n = stack.pop()
                want += 1
                stack.extend(s.tree.visible_children(n))
            assert len(rows) - 1 == want
            # the kernel table as Markdown: one row per kernel name in the JSON, totals match
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("E")
            await pilot.pause()
            md = s.last_export.read_text(encoding="utf-8").splitlines()
            assert s.last_export.suffix == ".md" and md[0].startswith("| share %")
            names = {e["name"] for e in raw if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")}
            assert len(md) - 2 == len(names)
            table = s.query_one("#kernel-table", AggTable)
            assert table.rows_data[0].name.replace("|", "\\|") in md[2]
            await pilot.press("e")
            await pilot.pause()
            assert s.last_export.name.endswith("kernels-2.csv") or s.last_export.name.endswith("kernels.csv")
    asyncio.run(run())


def test_at_80x24_the_footer_shows_help_and_the_status_line_fits():
    """The footer ran past the edge (no `? Help`), and the status line was cut mid-figure."""
    from textual.widgets._footer import FooterKey

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(80, 24)) as pilot:
            s = await explorer(pilot)
            await search(pilot, "aten::mm")
            await pilot.pause()
            keys = [k for k in s.query(FooterKey) if k.description == "Help"]
            assert keys and keys[0].region.right <= 80 and keys[0].region.width > 0
            others = [k for k in s.query(FooterKey) if k is not keys[0] and k.display]
            assert not any(k.region.overlaps(keys[0].region) for k in others)  # the palette key sat on it
            status = s.query_one("#status")
            text = str(status.render())
            assert len(text) <= status.content_region.width
            n = sum(v for k, v in s.trace.tree.diagnostics.items() if isinstance(v, int)
                    and k not in ("linked_by_external_id", "steps_spanned_by_events"))
            assert text.startswith("match 1/") and f"{n} diagnostics (D)" in text and "mlp_eager.json.gz" in text
    asyncio.run(run())


def test_long_arg_keys_are_shown_whole():
    """Labels were cut mid-word at 14 characters (`Record functio`)."""
    t = load_trace(TRACES / "mlp_eager.json.gz")
    t.store.load_args()
    n = next(i for i in range(1, len(t.tree.kind)) if "Record function id" in t.args(i))
    text = describe(t, n).plain
    assert "Record function id" in text and "Record functio " not in text


def test_search_skips_hidden_python_frames():
    """With Python frames hidden (the default) a search landed on a hidden frame, leaving the
    cursor on a collapsed module: matches are what the tree shows."""
    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            assert s.tree.hide_python
            t = s.trace.tree
            frames = [i for i in range(len(t.kind)) if t.kind[i] == K["python"] and "module.py" in s.trace.name(i)]
            assert frames  # names that only Python frames carry
            await search(pilot, "module.py")
            assert s.matches.size == 0 or not (t.kind[s.matches] == K["python"]).any()
            await pilot.press("p")  # shown: now they match, and the cursor lands on one
            await pilot.pause()
            await search(pilot, "module.py")
            assert s.matches.size == len(frames) + sum(1 for i in range(len(t.kind)) if t.kind[i] != K["python"]
                                                      and "module.py" in s.trace.name(i).lower())
            assert s.tree.cursor_node.data.node == s.current and t.kind[s.current] == K["python"]
    asyncio.run(run())


def test_D_lists_each_diagnostic_with_its_meaning_and_jumps_to_an_example_of_each():
    """D put the cursor on the root with an empty path; now the list says what each means, and
    D again visits an example of each (checked: the example is what the diagnostic counts)."""
    from tracetui.model.tree import DIAGNOSTICS

    async def run():
        app = TraceApp([TRACES / "mlp_eager.json.gz"])
        async with app.run_test(size=(120, 30)) as pilot:
            s = await explorer(pilot)
            await pilot.press("D")
            await pilot.pause()
            text = s.query_one(DetailPane).plain
            assert s.current == 0 and "(the trace itself" in text
            diag = s.trace.tree.diagnostics
            assert diag["partial_overlaps"] and diag["steps_spanned_by_events"]
            for key in ("partial_overlaps", "steps_spanned_by_events"):
                assert DIAGNOSTICS[key] in text
            assert text.count("example: ") == 2
            t = s.trace.tree
            seen = []
            for _ in range(2):
                await pilot.press("D")
                await pilot.pause()
                n = s.current
                assert n != 0 and s.tree.cursor_node.data.node == n
                seen.append(str(s.query_one("#status").render()).split(":")[0])
                end = t.start[n] + t.dur[n]
                if seen[-1] == "partial overlaps":  # starts inside an earlier event on its thread, outlasts it
                    same = [i for i in range(1, len(t.kind)) if t.ev[i] >= 0 and i != n and t.kind[i] != K["thread"]
                            and t.store.track[t.ev[i]] == t.store.track[t.ev[n]]]
                    assert any(t.start[i] < t.start[n] < t.start[i] + t.dur[i] < end - 1000 for i in same)
                else:  # spans the start or end of a step
                    edges = [x for st in s.trace.steps for x in (t.start[st], t.start[st] + t.dur[st])]
                    assert any(t.start[n] < x < end for x in edges)
            assert seen == ["partial overlaps", "steps spanned by events"]
            await pilot.press("D")  # and round again to the list
            await pilot.pause()
            assert s.current == 0
    asyncio.run(run())
