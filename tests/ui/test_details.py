"""The detail pane's facts for kernels of each kind (rendered text, from the model only)."""
from tracetui.model import load_trace
from tracetui.ui.details import describe

from tests.conftest import TRACES


def _first(t, pred):
    return next(i for i in range(len(t.tree)) if pred(i))


def test_inductor_kernel_shows_fused_ops_and_source():
    t = load_trace(TRACES / "mlp_compile.json.gz")
    k = _first(t, lambda i: t.kind(i) == "kernel" and t.name(i).startswith("triton_poi"))
    text = str(describe(t, k))
    assert "Triton (Inductor)" in text and "_unsafe_view, gelu, mul" in text
    assert "class pointwise\n" in text and "Inductor kind pointwise\n" in text
    assert "an Inductor pointwise (poi)" in text  # the rule's reason, from the taxonomy table
    assert "source" in text and ".py" in text and "bytes" in text and "TB/s" in text


def test_gemm_roofline_and_decoded_name():
    t = load_trace(TRACES / "mlp_eager.json.gz")
    k = _first(t, lambda i: t.kind(i) == "kernel" and t.name(i).startswith("nvjet"))
    text = str(describe(t, k))
    assert "tile" in text and "256x128" in text and "TNT" in text
    assert "GFLOP" in text and "% of 989 peak bf16" in text and "compute (" in text


def test_view_op_marked_cpu_only_and_step_busy_idle():
    t = load_trace(TRACES / "linear_eager.json.gz")
    v = _first(t, lambda i: t.name(i) == "aten::t")
    assert "launches no GPU work" in str(describe(t, v))
    assert "GPU busy" in str(describe(t, t.steps[0])) and "launch CPU" in str(describe(t, t.steps[0]))


def test_user_triton_kernel_has_no_op():
    t = load_trace(TRACES / "mlp_triton.json.gz")
    k = _first(t, lambda i: t.name(i) == "geglu_kernel")
    text = str(describe(t, k))
    # the project's own kernel is known by name (taxonomy), and still has no ATen op above it
    assert "Triton (tracetui)" in text and "pointwise" in text and "launched outside any op" in text


def test_kinetos_zero_occupancy_is_not_shown_as_an_estimate():
    """Kineto writes ``est. achieved occupancy %: 0`` where it made no estimate (here on 312 of the
    transformer's kernels, read from the raw JSON); the pane said "0 % (est.)". A real estimate
    is still shown with its unit."""
    import gzip
    import json

    path = TRACES / "transformer_eager.json.gz"
    raw = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") == "kernel"]
    zero = {(e["name"], round(e["ts"] * 1000)) for e in raw if e["args"].get("est. achieved occupancy %") == 0}
    some = {(e["name"], round(e["ts"] * 1000)): e["args"]["est. achieved occupancy %"] for e in raw
            if e["args"].get("est. achieved occupancy %", 0) > 0}
    assert zero and some
    t = load_trace(path)
    checked = {"zero": 0, "some": 0}
    for i in range(len(t.tree)):
        if t.kind(i) != "kernel":
            continue
        text = str(describe(t, i))
        line = next(ln for ln in text.splitlines() if ln.strip().startswith("occupancy"))
        if "% (est.)" in line:
            value = float(line.split("occupancy", 1)[1].split("%")[0])
            assert value > 0  # never a 0 dressed up as an estimate
            assert value in some.values()
            checked["some"] += 1
        else:
            assert line.split("occupancy", 1)[1].strip() == "- (not estimated)"
            checked["zero"] += 1
    assert checked["zero"] == len(zero) and checked["some"] == len(some)
