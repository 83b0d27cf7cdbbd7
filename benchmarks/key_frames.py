"""Where a key's CPU goes, frame by frame: each screen update (layout, compositor) and each
widget's render_lines, timed per call with process_time (no profiler), for the keys marked ``*``.

    python benchmarks/key_frames.py TRACE 'KEYS' [--size 160x48]

KEYS is a comma-separated list of Pilot key names, pressed in order once the app's workers are
done; ``*down`` is timed and reported, ``down`` only pressed; ``@live`` / ``@ops`` focus the
memory view's live-at-peak / per-op table (e.g. ``'5,@live,down,*enter'``). Per timed key: its
CPU, then each screen update (``TICK``: whether it laid out, the widgets it repainted) with the
layout and compositor passes nested in it, then the widgets whose render_lines cost over 0.3 ms.
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

log: list = []
on = [False]
depth = [0]
rendered: dict = collections.defaultdict(float)


def _name(w) -> str:
    return type(w).__name__ + (f"#{w.id}" if w.id else "")


def _instrument() -> None:
    import textual.screen as S
    import textual.widget as W

    def timed(cls, name, label):
        real = getattr(cls, name)

        def wrapper(self, *a, **k):
            if not on[0]:
                return real(self, *a, **k)
            extra = ""
            if name == "_on_timer_update":
                extra = (f" layout={self._layout_required} repaint={self._repaint_required} "
                         f"dirty={sorted(_name(w) for w in self._dirty_widgets)}")
            t = time.process_time()
            depth[0] += 1
            try:
                return real(self, *a, **k)
            finally:
                depth[0] -= 1
                log.append((depth[0], label + extra, (time.process_time() - t) * 1e3))
        setattr(cls, name, wrapper)

    timed(S.Screen, "_on_timer_update", "TICK")
    timed(S.Screen, "_refresh_layout", "layout")
    timed(S.Screen, "_compositor_refresh", "compositor")
    real_render = W.Widget.render_lines

    def render_lines(self, crop):
        t = time.process_time()
        try:
            return real_render(self, crop)
        finally:
            if on[0]:
                rendered[_name(self)] += (time.process_time() - t) * 1e3
    W.Widget.render_lines = render_lines


async def run(path: Path, keys: str, size: tuple[int, int]) -> None:
    from tracetui.ui.app import TraceApp
    from tracetui.ui.explorer import ExplorerScreen
    app = TraceApp([path])
    async with app.run_test(size=size) as pilot:
        while not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.005)
        screen = app.screen
        while len(screen.trace.store.memory) and not screen.memory_view.pages_ready:
            await pilot.pause(0.01)
        await app.workers.wait_for_complete()
        await pilot.pause()
        for k in keys.split(","):
            if k.startswith("@"):
                screen.memory_view.query_one("#mem-" + k[1:]).focus()
                await pilot.pause()
                continue
            timed = k.startswith("*")
            k = k.lstrip("*")
            on[0] = timed
            log.clear()
            rendered.clear()
            c = time.process_time()
            await pilot.press(k)
            await pilot.pause()
            on[0] = False
            if timed:
                print(f"=== {k}: {(time.process_time() - c) * 1e3:.1f} ms CPU")
                for d, label, ms in log:
                    print("  " * d + f"{ms:6.1f} {label}")
                print("   render_lines:", {n: round(v, 1) for n, v in sorted(rendered.items(), key=lambda x: -x[1])
                                          if v > 0.3})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("keys")
    ap.add_argument("--size", default="160x48", help="terminal size, COLSxROWS")
    args = ap.parse_args()
    _instrument()
    asyncio.run(run(args.trace, args.keys, tuple(int(v) for v in args.size.split("x"))))


if __name__ == "__main__":
    main()
