"""The diff screen opens with the verdict line (issue 36), and says when two traces are not comparable."""
from __future__ import annotations

import asyncio

from tracetui.ui.app import TraceApp
from tracetui.ui.diff_view import DiffScreen

from tests.compare.test_verdict import raw
from tests.conftest import TRACES
from tests.ui.test_app import wait_for


def _summary(a: str, b: str) -> str:
    async def run():
        app = TraceApp([TRACES / f"{a}.json.gz", TRACES / f"{b}.json.gz"], diff=True)
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.result is not None)
            await pilot.pause()
            return str(app.screen.query_one("#diffsummary").render())
    return asyncio.run(run())


def test_diff_screen_opens_with_the_verdict():
    ra, rb = raw("mlp_eager")["kernel_us"], raw("mlp_compile")["kernel_us"]
    text = _summary("mlp_eager", "mlp_compile")
    first = text.splitlines()[0]
    assert first.startswith(f"B's step is {100 * (ra - rb) / ra:.1f}% faster on the GPU; fusion gives")
    assert "NOT comparable" not in text
    assert "kernels/step" in text  # the figures that were there stay


def test_diff_screen_says_not_comparable():
    text = _summary("linear_eager", "mlp_eager")
    assert "NOT comparable: shapes" in text
