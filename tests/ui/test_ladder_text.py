"""The ladder's change list at 80 columns: a long row wraps under its own text, never under the
column of deltas, and a title cut to fit says so."""
from __future__ import annotations

from rich.console import Console

from tracetui.report.ladder import _cut
from tracetui.ui.diff_view import hanging


def test_long_rows_wrap_under_their_text():
    name = "triton_poi_fused__unsafe_view_gelu_mul_0"
    text = f"a → b: device +1.0 µs\n  {49.0:+10.1f}  same work, other time: {name} → {name}x\n  {-3.5:+10.1f}  CPU: mm"
    console = Console(width=50, record=True, color_system=None)
    console.print(hanging(text))
    lines = console.export_text().splitlines()
    assert lines[0].startswith("a → b")
    first = next(i for i, ln in enumerate(lines) if "+49.0" in ln)
    assert lines[first].startswith("       +49.0  same work")
    cont = lines[first + 1:next(i for i, ln in enumerate(lines) if "-3.5" in ln)]
    assert cont and all(ln.startswith(" " * 14) and ln.strip() for ln in cont)
    assert "".join(ln.strip() for ln in [lines[first][14:]] + cont).replace(" ", "") == \
        f"samework,othertime:{name}→{name}x"


def test_a_cut_title_ends_with_an_ellipsis():
    assert _cut("x" * 81, 80) == "x" * 79 + "…" and _cut("y" * 80, 80) == "y" * 80
