"""--format text|json|csv|md on summary, tree and diff: each output parsed back (csv module, Markdown
tables by column count, JSON against docs/json.md's schema) and checked against the raw trace."""
from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter

import pytest

from tracetui.cli.main import main
from tracetui.textsafe import visible

from tests.conftest import TRACES

GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy")  # the kernel table lists memset/memcpy too
A, B = TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"


def run(capsys, *argv) -> str:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def raw_events(path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


# The schemas docs/json.md documents ("summary --json", "tree --json", "diff --json"): key -> type,
# a nested dict for an object, [dict] for a list of objects. `None` in a tuple allows null.
NUM = (int, float)
SUMMARY = {
    "file": str, "device": (str, type(None)), "steps": int, "events": int, "provenance": (dict, type(None)),
    "step_marker": {"rule": str, "description": str, "reason": (str, type(None)), "hint": (str, type(None))},
    "phases": [{"phase": str, "steps": int, "unknown_steps": int, "device_us": NUM, "kernels": int,
                "batch_mean": (NUM, type(None)), "top_kernels": [{"name": str, "count": int, "device_us": NUM}]}],
    "cuda_graphs": (dict, type(None)),
    "self_time_rule": {"frames_own_time": bool, "label": str, "reason": str},
    "per_step": [{"name": str, "cpu_us": NUM, "window_us": NUM, "gpu_busy_us": NUM, "other_steps_us": NUM,
                  "gpu_idle_us": NUM, "idle_split_us": {"host_wait": NUM, "kernel_wait": NUM, "other": NUM},
                  "device_us": NUM, "kernels": int, "gpu_events": int, "busy_by_class_us": dict,
                  "comm_exposed_us": NUM, "comm_overlapped_us": NUM, "launch_cpu_us": NUM, "launches": int,
                  "sync_cpu_us": NUM, "syncs": int, "threads": int, "verdict": str, "verdict_reason": str,
                  "label": (dict, type(None)), "graphs": (dict, type(None))}],
    "kernel_classes": dict,
    "kernels": [{"name": str, "count": int, "total_us": NUM, "mean_us": NUM, "class": str, "library": (str, type(None))}],
    "ops": [{"name": str, "kind": str, "count": int, "cpu_total_us": NUM, "cpu_self_us": NUM, "device_total_us": NUM}],
    "first_step_kernels": [{"name": str, "class": str, "device_us": NUM, "module": (str, type(None)), "ops": list}],
    "diagnostics": dict, "load": {"repairs": list, "truncated_bytes": int},
}
TREE = {"id": int, "name": str, "kind": str, "cpu_us": NUM, "cpu_self_us": NUM, "device_us": NUM, "kernels": int,
        "start_us": NUM, "dur_us": NUM, "children": list}
SIDE = {"file": str, "device": (str, type(None)), "steps": int, "kernels_per_step": NUM, "device_us_per_step": NUM,
        "cpu_us_per_step": NUM}
DIFF = {"a": SIDE, "b": SIDE,
        "kernels": [{"name": str, "status": str, "a_us": (NUM, type(None)), "b_us": (NUM, type(None)),
                     "a_name": (str, type(None)), "detail": (str, type(None)), "op_a": object, "op_b": object}],
        "fused": [{"kernel": str, "replaces": list, "ops": list, "saved_us": NUM, "a_us": NUM, "b_us": NUM,
                   "launches_saved": NUM, "intermediate_bytes": NUM, "hbm_traffic_saved_bytes": NUM,
                   "matched_by": str, "module_a": object}],
        "removed_ops": [{"name": str, "a_per_step": NUM, "b_per_step": NUM, "a_cpu_us": NUM, "b_cpu_us": NUM}],
        "added_ops": [{"name": str, "compile_preop": bool}],
        "chains": [{"kernel": object, "a": list, "b": list}]}


def conforms(value, schema, where="$") -> None:
    """Assert ``value`` has every key of ``schema`` with the documented type."""
    if isinstance(schema, dict):
        assert isinstance(value, dict), where
        for k, sub in schema.items():
            assert k in value, f"{where}.{k} missing"
            conforms(value[k], sub, f"{where}.{k}")
    elif isinstance(schema, list):
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            conforms(item, schema[0], f"{where}[{i}]")
    elif schema is not object:
        ok = schema if isinstance(schema, tuple) else (schema,)
        flat = tuple(t for o in ok for t in (o if isinstance(o, tuple) else (o,)))
        assert isinstance(value, flat) and not (isinstance(value, bool) and bool not in flat), \
            f"{where}: {type(value).__name__} is not {flat}"


def md_tables(text: str) -> dict:
    """Markdown -> {heading: (header cells, rows)}; a row is split on unescaped pipes."""
    out, name = {}, None

    def split(line: str) -> list[str]:  # GitHub's rule: a pipe splits unless backslash-escaped
        cells, cur, i = [], "", 0
        line = line.strip()
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                cur += line[i + 1]
                i += 2
                continue
            if ch == "|":
                cells.append(cur.strip())
                cur = ""
            else:
                cur += ch
            i += 1
        return cells[1:]
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            out[name] = None
        elif line.startswith("|") and name:
            cells = split(line)
            if out[name] is None:
                out[name] = (cells, [])
            elif not all(set(c) <= set("-:") and c for c in cells):
                out[name][1].append(cells)
    return out


def test_json_matches_the_documented_schemas(capsys):
    conforms(json.loads(run(capsys, "summary", A, "--format", "json", "--top", "0")), SUMMARY)
    tree = json.loads(run(capsys, "tree", A, "--format", "json"))
    stack = [tree]
    while stack:
        node = stack.pop()
        conforms(node, TREE)
        stack.extend(node["children"])
    diff = json.loads(run(capsys, "diff", A, B, "--format", "json"))
    conforms(diff, DIFF)
    assert diff["fused"]  # eager vs compile: the schema of a fusion row was checked on real rows
    # --json stays an alias of --format json
    assert json.loads(run(capsys, "summary", A, "--json")) == json.loads(run(capsys, "summary", A, "--format", "json"))


def test_csv_summary_kernels_against_the_raw_trace(capsys):
    rows = list(csv.DictReader(io.StringIO(run(capsys, "summary", A, "--format", "csv", "--table", "kernels", "--top", "0"))))
    ref = Counter(e["name"] for e in raw_events(A) if e.get("cat") in GPU_CATS)
    assert {r["name"]: int(r["count"]) for r in rows} == dict(ref)
    durs = Counter()
    for e in raw_events(A):
        if e.get("cat") in GPU_CATS:
            durs[e["name"]] += e["dur"]
    for r in rows:
        assert float(r["total_us"]) == pytest.approx(durs[r["name"]], rel=1e-6, abs=1e-3)
    # the default table is ops, one row per JSON row with the same numbers
    ops = list(csv.DictReader(io.StringIO(run(capsys, "summary", A, "--format", "csv", "--top", "0"))))
    j = json.loads(run(capsys, "summary", A, "--json", "--top", "0"))["ops"]
    assert [(o["name"], int(o["count"]), float(o["cpu_self_us"])) for o in ops] == \
        [(o["name"], o["count"], o["cpu_self_us"]) for o in j]


def test_csv_tree_is_every_node_with_its_parent(capsys):
    rows = list(csv.DictReader(io.StringIO(run(capsys, "tree", A, "--format", "csv"))))
    ids = {int(r["id"]) for r in rows}
    assert len(ids) == len(rows) and rows[0]["kind"] == "root" and rows[0]["parent"] == ""
    for r in rows[1:]:
        assert int(r["parent"]) in ids
    kernels = [r for r in rows if r["kind"] == "kernel"]
    raw = [e for e in raw_events(A) if e.get("cat") == "kernel"]
    assert len(kernels) == len(raw)
    assert sorted(float(r["dur_us"]) for r in kernels) == pytest.approx(sorted(e["dur"] for e in raw), abs=1e-3)


def test_csv_tree_cells_are_plain_numbers_equal_to_the_json(capsys):
    """Every numeric column of ``tree --format csv`` parses as a number and equals ``tree --json``
    (was ``np.float64(0.0)`` in every float column: numpy 2's repr of its scalars)."""
    rows = list(csv.DictReader(io.StringIO(run(capsys, "tree", A, "--format", "csv"))))
    flat, stack = {}, [json.loads(run(capsys, "tree", A, "--json"))]
    while stack:
        n = stack.pop()
        flat[n["id"]] = n
        stack.extend(n["children"])
    assert len(rows) == len(flat) > 100
    for r in rows:
        j = flat[int(r["id"])]
        for col in ("cpu_us", "cpu_self_us", "device_us", "kernels", "start_us", "dur_us"):
            assert float(r[col]) == pytest.approx(j[col], rel=1e-12, abs=1e-9), (col, r[col])


def test_markdown_tables_have_one_cell_per_column(capsys, tmp_path):
    # a name with a pipe, a backslash and an escape: it must not add a column or reach the terminal raw
    doc = json.loads(gzip.decompress(A.read_bytes()))
    evil = "aten::evil|op\\x\x1b[2J"
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::gelu":
            e["name"] = evil
    p = tmp_path / "evil.json"
    p.write_text(json.dumps(doc))
    for argv, expect in ((("summary", p, "--format", "md", "--top", "0"), {"overview", "ops", "kernels", "per_step",
                                                                            "first_step_kernels", "kernel_classes"}),
                         (("tree", p, "--format", "md"), {"nodes"}),
                         (("diff", A, p, "--format", "md"), {"overview", "kernels", "fused", "removed_ops",
                                                              "added_ops", "chains"})):
        out = run(capsys, *argv)
        assert "\x1b" not in out
        tables = md_tables(out)
        assert expect <= set(tables), set(tables)
        for name, t in tables.items():
            if t is None:
                continue
            header, rows = t
            assert all(len(r) == len(header) for r in rows), name
    summary = md_tables(run(capsys, "summary", p, "--format", "md", "--top", "0"))
    j = json.loads(run(capsys, "summary", p, "--json", "--top", "0"))
    header, rows = summary["ops"]
    assert len(rows) == len(j["ops"])
    named = [r for r in rows if r[header.index("name")].startswith("aten::evil|op")]
    assert len(named) == 1 and named[0][header.index("name")] == visible(evil)
    header, rows = summary["per_step"]
    assert [r[header.index("name")] for r in rows] == [s["name"] for s in j["per_step"]]
    assert [float(r[header.index("window_us")]) for r in rows] == pytest.approx([s["window_us"] for s in j["per_step"]], abs=1e-3)


def test_diff_csv_rows_match_the_json(capsys):
    j = json.loads(run(capsys, "diff", A, B, "--json"))
    rows = list(csv.DictReader(io.StringIO(run(capsys, "diff", A, B, "--format", "csv"))))
    assert [(r["name"], r["status"]) for r in rows] == [(k["name"], k["status"]) for k in j["kernels"]]
    fused = list(csv.DictReader(io.StringIO(run(capsys, "diff", A, B, "--format", "csv", "--table", "fused"))))
    assert [float(f["saved_us"]) for f in fused] == [f["saved_us"] for f in j["fused"]]
    assert [f["replaces"].split(" > ") for f in fused] == [f["replaces"] for f in j["fused"]]


def test_text_summary_parses_back(capsys):
    """The text report's op table: one line per op of the JSON's op kinds, the same counts."""
    out = run(capsys, "summary", A, "--format", "text", "--top", "0")
    j = json.loads(run(capsys, "summary", A, "--json", "--top", "0"))
    lines = out.split("\ntop ops")[1].split("\n\n")[0].splitlines()[2:]  # title, header, rows
    counts = [int(line.split()[0]) for line in lines]  # names last: the count leads the row
    assert counts == [o["count"] for o in j["ops"] if o["kind"] in ("op", "annotation", "step", "runtime")]


def test_unknown_table_is_one_line(capsys):
    assert main(["summary", str(A), "--format", "csv", "--table", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tables: " in err and "ops" in err


def _cli(*argv) -> str:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tracetui", *map(str, argv)], capture_output=True, text=True,
                          check=True).stdout


def test_ranks_and_memory_csv_and_md_match_their_json():
    """`ranks` and `memory` take --format too: the CSV parses back to the JSON's main table."""
    import csv
    import io
    import json

    from tests.conftest import PEER, TRACES
    mem = TRACES / "transformer_eager_memory.json.gz"
    j = json.loads(_cli("memory", "--json", "--top", "0", mem))
    rows = list(csv.DictReader(io.StringIO(_cli("memory", "--format", "csv", "--top", "0", mem))))
    assert len(rows) == len(j["ops"]) > 0
    assert [int(r["allocation_bytes"]) for r in rows] == [o["allocation_bytes"] for o in j["ops"]]
    md = _cli("memory", "--format", "md", "--top", "0", mem)
    table = [ln for ln in md.splitlines() if ln.startswith("| ") and "allocation_bytes" in ln]
    assert table and table[0].count("|") == len(rows[0]) + 1
    ranks = [PEER / "trace_filter_sampled_rank-0.json.gz", PEER / "trace_filter_sampled_rank-1.json.gz"]
    if not all(p.exists() for p in ranks):
        return  # ../shared absent: the memory half still ran
    rj = json.loads(_cli("ranks", "--json", *ranks))
    rr = list(csv.DictReader(io.StringIO(_cli("ranks", "--format", "csv", *ranks))))
    assert [int(r["rank"]) for r in rr] == [p["rank"] for p in rj["per_rank"]]
    assert [float(r["wait_total_us"]) for r in rr] == [p["wait_total_us"] for p in rj["per_rank"]]
