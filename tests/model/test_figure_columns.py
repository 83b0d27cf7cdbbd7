"""A per-step figure is declared once (issue 43, the house): model/window_figures.COLUMNS. Figures.rows(),
Figures.of(), Windows.breakdown and summary's per_step JSON (``*_ns`` -> ``*_us`` by rule) all come
from it, where a new figure meant editing five lists. The values themselves are checked against the
raw JSON in tests/model/test_window_figures.py; here, that the places agree and follow the table."""
from __future__ import annotations

import pytest

from tests.conftest import DATA, TRACES
from tracetui.model import load_trace
from tracetui.model import window_figures as wf
from tracetui.report.summary import STEP_JSON_HIDDEN, STEP_JSON_NAMES, step_dict

PATHS = [TRACES / "transformer_eager.json.gz", DATA / "gloo_rank0.pt.trace.json.gz", TRACES / "mlp_compile.json.gz"]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_rows_and_of_and_per_step_follow_the_table(path):
    t = load_trace(path)
    f = t.windows.figures
    rows = f.rows()
    assert rows == [f.of(k) for k in range(f.n)] and len(rows) == t.n_steps > 0
    keys = [k for k, _ in wf.COLUMNS]
    for step, row in zip(t.steps, rows):
        assert list(row) == keys
        d = step_dict(t, step)
        want = ["name"] + [STEP_JSON_NAMES.get(k, k[:-3] + "_us" if k.endswith("_ns") else k)
                           for k in keys if k not in STEP_JSON_HIDDEN]
        assert list(d)[:len(want)] == want
        for k in keys:
            if k in STEP_JSON_HIDDEN:
                continue
            j = STEP_JSON_NAMES.get(k, k[:-3] + "_us" if k.endswith("_ns") else k)
            if isinstance(row[k], dict):
                assert d[j] == pytest.approx({c: v * 1e-3 for c, v in row[k].items()})
            else:
                assert d[j] == pytest.approx(row[k] * 1e-3 if k.endswith("_ns") else row[k])


def test_a_figure_added_to_the_table_reaches_every_place(monkeypatch):
    """One row added to COLUMNS (here the device time again, under a new key) appears in rows(),
    of(), the breakdown and --json's per_step as *_us, with nothing else edited."""
    monkeypatch.setattr(wf, "COLUMNS", wf.COLUMNS + (("twice_device_ns", "device"),))
    t = load_trace(TRACES / "mlp_eager.json.gz")
    f = t.windows.figures
    assert [r["twice_device_ns"] for r in f.rows()] == [r["device_ns"] for r in f.rows()]
    s = t.steps[0]
    assert t.step_breakdown(s)["twice_device_ns"] == f.of(0)["device_ns"]
    d = step_dict(t, s)
    assert d["twice_device_us"] == pytest.approx(d["device_us"])
