"""Where Enter's jump from the memory view into the tree spends its CPU, part by part.

    python benchmarks/jump_parts.py TRACE [--jumps 8] [--table live|ops] [--size 160x48]

Once the app's workers are done, presses ``5``, focuses the memory view's live or per-op table,
``down`` (a new row each time) and ``Enter``, ``--jumps`` times. Per jump: the key's CPU (press
until Pilot finds the app idle), then the CPU inside each of the functions below during that key
(process_time around each call, summed; a nested part is counted in its caller too), and each
screen update (``TICK``, with the layout and compositor passes in it).
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

acc: dict = collections.defaultdict(float)
on = [False]


def _timed(owner, name: str, label: str) -> None:
    real = getattr(owner, name)

    def wrapper(*a, **k):
        if not on[0]:
            return real(*a, **k)
        t = time.process_time()
        try:
            return real(*a, **k)
        finally:
            acc[label] += (time.process_time() - t) * 1e3
    setattr(owner, name, wrapper)


def _instrument() -> None:
    import textual.css.stylesheet as stylesheet
    import textual.screen as screen
    import textual.widgets._tree as tree

    from tracetui.ui import detail_pane, explorer, tree_view
    for owner, name, label in (
            (explorer.ExplorerScreen, "jump", "jump"),
            (explorer.ExplorerScreen, "_show_view", "  view switch"),
            (stylesheet.Stylesheet, "update_nodes", "  focus restyle"),
            (tree_view.TraceTree, "reveal", "  reveal"),
            (tree_view.TraceTree, "fill", "    fill (new rows, labels)"),
            (tree.Tree, "_build", "    the tree's lines"),
            (explorer.ExplorerScreen, "show_node", "    show_node"),
            (explorer, "describe", "      describe"),
            (detail_pane.DetailPane, "_wrap", "      pane wrap"),
            (screen.Screen, "_on_timer_update", "TICK"),
            (screen.Screen, "_refresh_layout", "  layout"),
            (screen.Screen, "_compositor_refresh", "  compositor")):
        _timed(owner, name, label)


async def run(path: Path, jumps: int, table: str, size: tuple[int, int]) -> None:
    from tracetui.ui.app import TraceApp
    from tracetui.ui.explorer import ExplorerScreen
    app = TraceApp([path])
    rows = []
    async with app.run_test(size=size) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.005)
        view = app.screen.memory_view
        while len(app.screen.trace.store.memory) and not view.pages_ready:
            await pilot.pause(0.01)
        await app.workers.wait_for_complete()
        await pilot.pause()
        for _ in range(jumps):
            await pilot.press("5")
            await pilot.pause()
            view.query_one(f"#mem-{table}").focus()
            await pilot.pause()
            await pilot.press("down")
            await pilot.pause()
            acc.clear()
            on[0] = True
            c = time.process_time()
            await pilot.press("enter")
            await pilot.pause()
            on[0] = False
            rows.append(((time.process_time() - c) * 1e3, dict(acc)))
    print(f"{'key CPU':30s}", " ".join(f"{r[0]:5.1f}" for r in rows))
    for label in dict.fromkeys(k for _, parts in rows for k in parts):
        print(f"{label:30s}", " ".join(f"{parts.get(label, 0):5.1f}" for _, parts in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--jumps", type=int, default=8)
    ap.add_argument("--table", choices=("live", "ops"), default="live")
    ap.add_argument("--size", default="160x48", help="terminal size, COLSxROWS")
    args = ap.parse_args()
    _instrument()
    asyncio.run(run(args.trace, args.jumps, args.table, tuple(int(v) for v in args.size.split("x"))))


if __name__ == "__main__":
    main()
