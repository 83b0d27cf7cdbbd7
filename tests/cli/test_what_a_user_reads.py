"""Issue 43 items 3, 4 and 8 (what a user reads): the op table shows the GPU work under an op beside
key_averages()' figure; every format lists the same op rows; --help names each report's tables;
JSON and CSV write µs to the ns. Each checked against the raw JSON or the reports' own output."""
from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import defaultdict

import pytest

from tracetui.cli.main import main

from tests.conftest import TRACES

A = TRACES / "mlp_eager.json.gz"
TRITON = TRACES / "mlp_triton.json.gz"


def run(capsys, *args) -> str:
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().out


def raw(path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def test_the_op_table_shows_the_gpu_work_under_an_op(capsys):
    """mlp_triton's gelu·mul is a user @triton.jit kernel launched outside any ATen op: key_averages()
    gives the mlp_fwd annotation only the GEMMs, the tree all of it. The text now shows both, and
    the under-op figure is every GPU activity whose launch lies inside the annotation (raw JSON)."""
    ev = raw(TRITON)
    spans = [(e["pid"], e["tid"], e["ts"], e["ts"] + e["dur"]) for e in ev
             if e.get("ph") == "X" and e.get("name") == "mlp_fwd" and e.get("cat") == "user_annotation"]
    launch = {e["args"]["correlation"]: e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    under = 0.0
    for g in ev:
        if g.get("ph") == "X" and g.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
            r = launch.get(g["args"].get("correlation"))
            if r and any(p == r["pid"] and t == r["tid"] and a <= r["ts"] < b for p, t, a, b in spans):
                under += g["dur"]
    out = run(capsys, "summary", TRITON)
    row = next(ln for ln in out.splitlines() if ln.endswith("  mlp_fwd"))
    count, cpu, self_, device, scope = row.split()[:5]
    j = json.loads(run(capsys, "summary", TRITON, "--json"))
    op = next(o for o in j["ops"] if o["name"] == "mlp_fwd")
    assert float(device) == pytest.approx(op["device_total_us"], abs=0.05)
    assert float(scope) == pytest.approx(under, abs=0.05) and under > op["device_total_us"] + 50, (scope, under)


@pytest.mark.parametrize("python", [False, True])
def test_every_format_lists_the_same_op_rows(capsys, python):
    """CSV's op table was led by Python frames (``module.py(1783): _call_impl``), so --top 15 dropped
    real ops; text hid them. Frames (and module rows) now show in every format only under --python."""
    extra = ["--python"] if python else []
    text = run(capsys, "summary", A, *extra)
    rows = text.split("\ntop ops")[1].split("\n\n")[0].splitlines()[2:]
    text_names = [ln.split(None, 5)[5] for ln in rows]
    j = json.loads(run(capsys, "summary", A, "--json", *extra))
    c = list(csv.DictReader(io.StringIO(run(capsys, "summary", A, "--format", "csv", *extra))))
    md = run(capsys, "summary", A, "--format", "md", "--table", "ops", *extra)
    md_names = [ln.split("|")[1].strip() for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| name")]
    assert text_names == [o["name"] for o in j["ops"]] == [r["name"] for r in c] == md_names
    kinds = {o["kind"] for o in j["ops"]}
    names = {e["name"] for e in raw(A) if e.get("ph") == "X" and e.get("cat") == "python_function"}
    frames = [n for n in text_names if n in names]
    if python:
        assert frames, "no Python frame under --python"
    else:
        assert not frames and kinds <= {"op", "annotation", "step", "runtime"}, (frames, kinds)


def _tables(capsys, *args) -> list[str]:
    """The tables a report writes, from its own refusal of an unknown one."""
    assert main([str(a) for a in args] + ["--format", "csv", "--table", "no-such-table"]) == 2
    err = capsys.readouterr().err
    m = re.search(r"tables: ([^)]*)\)", err) or re.search(r"its one table is (\w+)", err)
    return [t.strip() for t in m.group(1).split(",")]


@pytest.mark.parametrize("cmd,args", [
    ("summary", [A]), ("tree", [A]), ("memory", [TRACES / "transformer_eager_memory.json.gz"]),
    ("diff", [A, TRACES / "mlp_compile.json.gz"]), ("diff", [A, TRACES / "mlp_compile.json.gz", TRACES / "mlp_fused.json.gz"]),
])
def test_help_names_every_table_a_report_writes(capsys, cmd, args):
    tables = _tables(capsys, cmd, *args)
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    names = set(re.findall(r"[a-z_]+", helptext.split("Tables:")[1]))
    assert tables and set(tables) <= names, (set(tables) - names)


def _us_floats(obj, us=False, out=None):
    out = [] if out is None else out
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        ku = us or (isinstance(k, str) and k.endswith("_us"))
        if isinstance(v, float) and ku:
            out.append((k, v))
        elif isinstance(v, (dict, list)):
            _us_floats(v, ku, out)
    return out


def test_json_and_csv_write_microseconds_to_the_ns(capsys):
    """``232.57500000000002`` in --json: µs are rounded to the trace's resolution (ns, 3 decimals),
    and still equal the raw JSON's sums (per kernel name, every instance)."""
    j = json.loads(run(capsys, "summary", A, "--json", "--top", "0"))
    long = [(k, v) for k, v in _us_floats(j) if len(repr(v).split(".")[-1]) > 3]
    assert not long, long[:5]
    want = defaultdict(int)
    for e in raw(A):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
            want[e["name"]] += round(e["dur"] * 1000)  # integer ns
    for k in j["kernels"]:
        assert k["total_us"] == round(want[k["name"]] / 1000, 3), k
    d = json.loads(run(capsys, "diff", A, TRACES / "mlp_compile.json.gz", "--json"))
    assert not [(k, v) for k, v in _us_floats(d) if len(repr(v).split(".")[-1]) > 3]
    c = run(capsys, "summary", A, "--format", "csv", "--table", "per_step")
    assert not re.search(r"\d\.\d{4,}", c), c


def test_a_cpu_only_trace_shows_no_gpu_columns(capsys):
    """A CPU-only trace printed busy/other-steps/idle/launch columns of zeros and device columns in
    the op table. Now its per-step table is the steps' host intervals (raw ProfilerStep durations)."""
    from tests.conftest import DATA
    path = DATA / "cpu_transformer_eager.json.gz"
    steps = {e["name"]: e["dur"] for e in raw(path) if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}
    out = run(capsys, "summary", path)
    per_step = out.split("\nper step")[1].split("\n\n")[0]
    ops = out.split("\ntop ops")[1].split("\n\n")[0]
    for word in ("busy", "idle", "other-steps", "other work", "launch CPU", "kernels"):
        assert word not in per_step, word
    assert "device" not in ops and "under op" not in ops
    rows = [ln.split() for ln in per_step.splitlines()[2:] if re.match(r"\s+ProfilerStep#\d+ ", ln)]
    assert rows and all(float(r[1]) == pytest.approx(steps[r[0]], abs=0.05) for r in rows), (rows, steps)
    gpu = run(capsys, "summary", A)  # a GPU trace keeps them
    assert "idle" in gpu.split("\nper step")[1].split("\n\n")[0] and "under op" in gpu


def test_a_long_first_step_lists_its_longest_kernels_and_says_which_are_unlinked(peer_dir, capsys):
    """HTA's test trace: the first step has 2,101 kernels; its first 40 in launch order were all
    '(no ATen op)' adds, though 74% of the step's kernels link to an op. The text now ranks the
    step's kernels by device time and labels the unlinked ones that ran before the first linked one."""
    path = peer_dir / "trace_diff_test_test.json.gz"
    j = json.loads(run(capsys, "summary", path, "--json", "--top", "0"))
    ks = j["first_step_kernels"]
    out = run(capsys, "summary", path)
    block = out.split("\nkernels in ")[1].split("\n\n")[0].splitlines()
    linked = sum(1 for k in ks if k["ops"])
    assert f"the 40 longest of {len(ks):,}" in block[0] and f"({linked:,} of {len(ks):,} launched by an ATen op)" in block[0]
    rows = [ln for ln in block[1:] if " µs  " in ln]
    shown = [float(ln.split()[1]) for ln in rows]
    assert shown == sorted((k["device_us"] for k in ks), reverse=True)[:40]
    first_linked = next(i for i, k in enumerate(ks) if k["ops"])
    assert first_linked > 0  # the step opens with unlinked work
    early = [ln for ln in rows if "<- (no ATen op: unlinked, before the step's first linked kernel)" in ln]
    assert early and all("<- " in ln for ln in rows)
