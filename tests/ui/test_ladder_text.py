"""The ladder's change list at 80 columns: a long row wraps under its own text, never under the
column of deltas, and a title cut to fit says so."""
from __future__ import annotations

from rich.console import Console

from tracetui.shorten import fit, fit_arrow
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


def test_a_cut_title_says_where_it_was_cut():
    """A ladder's change title cut to a terminal keeps head and tail around an ellipsis (issue 43:
    one shortening rule), and the replacement after → survives the cut."""
    cut = fit("x" * 40 + "y" * 41, 80)
    assert len(cut) == 80 and cut.startswith("x" * 39) and cut.endswith("y" * 40) and "…" in cut
    assert fit("y" * 80, 80) == "y" * 80 and fit("z" * 500, None) == "z" * 500  # no width: whole
    t = fit_arrow("gelu + mul + " + "a" * 100 + " → triton_poi_fused__unsafe_view_gelu_mul_0", 60)
    assert len(t) == 60 and t.endswith(" → triton_poi_fused__unsafe_view_gelu_mul_0")
