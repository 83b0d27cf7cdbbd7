"""The timeline's lanes, drawn in numpy: layers, the selection on top, the whole trace at the root."""
from __future__ import annotations

import numpy as np

from tracetui.model import load_trace
from tracetui.model.events import K
from tracetui.ui.timeline import Timeline

from tests.conftest import TRACES


def _lanes(tl: Timeline, width: int = 100) -> dict:
    """Lane label -> (characters, style per character)."""
    text = tl.render_lanes(width)
    out, pos = {}, 0
    for line in text.plain.split("\n"):
        label = line[:14].strip()
        if label.startswith(("cpu ", "gpu")):
            styles = [""] * len(line)
            for span in text.spans:
                for i in range(max(span.start, pos), min(span.end, pos + len(line))):
                    styles[i - pos] = str(span.style)
            out[label] = (line[14:], styles[14:])
        pos += len(line) + 1
    return out


def test_a_selected_op_is_drawn_reversed_over_the_launches_inside_it():
    t = load_trace(TRACES / "mlp_eager.json.gz")
    mm = next(i for i in range(len(t.tree.kind)) if t.tree.kind[i] == K["op"] and t.name(i) == "aten::mm")
    tl = Timeline(t)
    tl.node, tl.zoom, tl.pan = mm, 1.0, 0.0
    (label, (chars, styles)), = [(k, v) for k, v in _lanes(tl).items() if k.startswith("cpu 425")]
    rev = [i for i, s in enumerate(styles) if "reverse" in s]
    _, s0, s1, _ = tl._window()
    first, last = ((np.array([t.tree.start[mm], t.tree.start[mm] + t.tree.dur[mm]]) - s0) / (s1 - s0) * 100).astype(int)
    assert rev == list(range(first, last + 1))  # every cell of the op, the ones its launch shares too
    assert {chars[i] for i in rev} == {"━"}
    launch = [i for i in range(len(t.tree.kind)) if t.tree.parent[i] == mm and t.tree.kind[i] == K["runtime"]]
    assert launch  # (there is one inside it to draw over)
    tl.node = int(t.steps[0])  # nothing selected inside the step: nothing reversed
    assert not any("reverse" in s for _, (_, ss) in _lanes(tl).items() for s in ss)


def test_the_root_shows_every_thread_and_stream_over_the_whole_trace():
    t = load_trace(TRACES / "mlp_eager.json.gz")
    tl = Timeline(t)
    tl.node = 0
    lanes = _lanes(tl)
    host_tracks = {t.store.track_keys[k][1] for k in np.unique(t.store.track[t.tree.ev[
        np.isin(t.tree.kind, [K["op"], K["annotation"], K["module"], K["runtime"]])]]).tolist()}
    assert {f"cpu {tid}" for tid in host_tracks} == {k for k in lanes if k.startswith("cpu")}
    gpu_chars, gpu_styles = lanes["gpu0 s7"]
    assert gpu_chars.count("█") > 10 and {"red", "yellow"} <= set(gpu_styles)  # GEMMs and pointwise kernels


def test_lane_labels_from_the_trace_are_plain_text(tmp_path):
    """A thread id is whatever the file says: a string with an escape code must not reach the terminal."""
    import json
    tid = "\x1b[2J\x1b]0;x\x07"
    evs = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": tid, "ts": 0, "dur": 50},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": tid, "ts": 1, "dur": 20}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t = load_trace(p)
    tl = Timeline(t)
    tl.node = int(t.steps[0])
    text = tl.render_lanes(60).plain
    assert "\x1b" not in text and "\x07" not in text and "cpu \\x1b" in text


def test_every_taxonomy_class_has_its_own_colour_key():
    from tracetui.model.taxonomy import CLASSES
    from tracetui.ui.timeline import CLASS_STYLE
    assert set(CLASS_STYLE) == set(CLASSES)
