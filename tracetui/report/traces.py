"""CLI reports (text and JSON) built from the model: summary, tree, diff. No Textual here."""
from __future__ import annotations

import sys

import numpy as np
import orjson

from tracetui.read.events import K, KINDS
from tracetui.model.stats import what_it_counts
from tracetui.model.trace import Trace
from tracetui.model.tree import diagnostic_lines
from tracetui.textsafe import json_safe, visible

US = 1e-3  # ns -> µs


def _shown(s: str) -> str:
    """``s`` with control characters made visible line by line: the last guard before the
    terminal, for the names, devices and provenance from the file that reach a report line."""
    return "\n".join(map(visible, s.split("\n")))


def _out(s: str = "") -> None:
    sys.stdout.write(_shown(s) + "\n")


def _dump(obj) -> None:
    sys.stdout.buffer.write(json_safe(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)) + b"\n")


def emit_report(doc: dict, fmt: str, table: str | None = None, first: str | None = None,
         tables: list | None = None, title: str | None = None) -> None:
    """Write a report's JSON ``doc`` as ``json``, ``csv`` or ``md`` (``tracetui.report.export``): the one
    path every command's ``--format`` other than ``text`` takes. ``table`` picks one table (csv
    prints one: ``table``, else ``first``, else the first); ``tables`` replaces the generic
    flattening. Raises export.UnknownTable for a name the report lacks."""
    if fmt == "json":
        _dump(doc)
        return
    from tracetui.report.export import render_report, report_tables
    tabs = tables if tables is not None else report_tables(doc)
    if first and fmt == "csv":  # csv writes one table: the main one unless --table names another
        tabs = sorted(tabs, key=lambda t: t.name != first)
    sys.stdout.write(render_report(doc, fmt, tables=tabs, table=table, title=title))


def fmt_of(args) -> str:
    """``--format`` with ``--json`` as its alias (``--text`` of ``diff`` too)."""
    if getattr(args, "json", False):
        return "json"
    if getattr(args, "text", False):
        return "text"
    return getattr(args, "format", None) or "text"


TEXT_OP_KINDS = ("op", "annotation", "step", "runtime")
"""The text summary's op table leaves Python frames and modules to the tree; --json lists every row."""


def attribution(t: Trace, node: int) -> dict:
    """Which module and ATen ops a GPU activity came from: the facts a user asks first."""
    mod = t.scope_module(node)
    ops = t.op_chain(node, stop=(K["module"], K["step"]))
    return {"module": t.name(mod)[len("nn.Module: "):] if mod else None, "ops": ops}


TEXT_STEP_ROWS = 200
"""The text summary lists this many steps, then says how many more there are (``--json`` has
every one): 250,000 lines would take longer to print than the trace takes to load."""


def summary_dict(t: Trace, top: int = 15, op_kinds: tuple | None = None, step_rows: int | None = None) -> dict:
    """The summary as data; ``op_kinds`` keeps only those kinds in ``ops`` (before ``top`` applies);
    ``step_rows`` keeps only the first steps in ``per_step`` (``steps`` still counts them all)."""
    if step_rows is not None and t.n_steps > step_rows:
        steps = [step_dict(t, s) for s in t.steps[:step_rows]]
    else:
        steps = [step_dict(t, s, b) for s, b in zip(t.steps, t.windows.breakdowns())]  # all steps in one pass
    classes: dict = {}
    kernels = []
    for a in t.kernel_table:
        info, by_class = t.row_info(a.nodes)  # each instance classed with its own launching op
        for k, n in zip(*np.unique(t.classes_of(a.nodes), return_counts=True)):
            c = classes.setdefault(str(k), {"count": 0, "total_us": 0.0})
            c["count"] += int(n)
            c["total_us"] += by_class[str(k)]
        row = {"name": a.name, "count": a.count, "total_us": a.device_total_us, "mean_us": a.mean_device_us,
               "class": info.klass, "library": info.library}
        if len(by_class) > 1:  # a name with mixed classes says so: µs per class, biggest first
            row["classes_us"] = by_class
        kernels.append(row)
    ops = [{"name": a.name, "kind": a.kind, "count": a.count, "cpu_total_us": a.cpu_total_us,
            "cpu_self_us": a.cpu_self_us, "device_total_us": a.device_total_us,
            "device_scope_us": a.device_scope_us}
           for a in t.op_table if op_kinds is None or a.kind in op_kinds]  # default: every key_averages() row
    first_step = []
    if t.steps:
        for g in t.step_gpu_nodes(t.steps[0]).tolist():
            if t.tree.kind[g] != K["kernel"]:
                continue  # memcpy/memset are in the kernel table and classes, not this list
            info = t.kernel_info(g)
            first_step.append({"name": t.name(g), "class": info.klass, "device_us": t.tree.dur[g] * US,
                               **attribution(t, g)})
    return {
        "file": str(t.path), "device": t.device_name, "steps": t.n_steps, "events": len(t.store),
        "step_marker": {"rule": t.step_choice.rule, "description": t.step_choice.description,
                        "reason": t.step_choice.reason or None, "hint": t.step_choice.hint or None},
        "phases": serving_phases(t), "cuda_graphs": cuda_graphs(t),
        "self_time_rule": {"frames_own_time": t.self_time.frames_own_time, "label": t.self_time.label,
                           "reason": t.self_time.reason},
        "provenance": t.provenance or None, "per_step": steps, "kernel_classes": classes,
        "kernels": kernels[:top] if top else kernels, "ops": ops[:top] if top else ops,
        "first_step_kernels": first_step, "diagnostics": t.tree.diagnostics,
        "load": {"repairs": t.report.repairs, "truncated_bytes": t.report.truncated_bytes},
    }


def step_dict(t: Trace, step: int, b: dict | None = None) -> dict:
    """One step's breakdown over its window, in µs (``windows.Windows.breakdown``; ``b``: given)."""
    b = t.step_breakdown(step) if b is None else b
    us = lambda ns: ns * US  # noqa: E731
    return _honest(t, step, {"name": t.name(step), "cpu_us": us(b["cpu_ns"]), "window_us": us(b["window_ns"]),
            "gpu_busy_us": us(b["busy_ns"]), "other_steps_us": us(b["other_steps_ns"]),
            "gpu_idle_us": us(b["idle_ns"]), "idle_split_us": {k: us(v) for k, v in b["idle_split_ns"].items()},
            "device_us": us(b["device_ns"]), "kernels": b["kernels"], "gpu_events": b["gpu_events"],
            "busy_by_class_us": {k: us(v) for k, v in b["busy_by_class_ns"].items()},
            "comm_exposed_us": us(b["comm_exposed_ns"]), "comm_overlapped_us": us(b["comm_overlapped_ns"]),
            "launch_cpu_us": us(b["launch_cpu_ns"]), "launches": b["launches"],
            "sync_cpu_us": us(b["sync_cpu_ns"]), "syncs": b["syncs"], "threads": b["threads"],
            "verdict": b["verdict"], "verdict_reason": b["verdict_reason"]})


UNKNOWN_WHEN_HIDDEN = ("gpu_busy_us", "other_steps_us", "gpu_idle_us", "idle_split_us", "busy_by_class_us",
                       "comm_exposed_us", "comm_overlapped_us")
"""A step whose CUDA-graph work is hidden (model/graphs.py) has these figures unknown: JSON null."""


def _honest(t: Trace, step: int, row: dict) -> dict:
    """The step's serving label, its graph launches, and null for what a hidden graph makes unknown."""
    lab = t.step_labels.get(step)
    row["label"] = {**lab.as_dict(), "text": lab.text} if lab is not None else None
    gaps = t.graph_gaps.by_step.get(step)
    row["graphs"] = {**gaps.as_dict(), "note": gaps.note() or None} if gaps is not None else None
    if gaps is not None and gaps.incomplete:
        row.update({k: None for k in UNKNOWN_WHEN_HIDDEN})
    return row


def serving_phases(t: Trace, top: int = 5) -> list[dict]:
    """Per phase (prefill / decode / mixed …): steps, device µs, kernels, top kernels (µs)."""
    out = []
    for f in t.phase_figures(top):
        out.append({"phase": f["phase"], "steps": f["steps"], "unknown_steps": f["unknown_steps"],
                    "device_us": round(f["device_ns"] * US, 3), "kernels": f["kernels"], "batch_mean": f["batch_mean"],
                    "top_kernels": [{"name": k["name"], "count": k["count"], "device_us": round(k["device_ns"] * US, 3)}
                                    for k in f["top_kernels"]]})
    return out


def cuda_graphs(t: Trace) -> dict | None:
    """Graph launches, those with no kernels linked, and how many steps that leaves unknown."""
    g = t.graph_gaps
    return {**g.as_dict(), "note": g.summary()} if g.launches else None


def _step_line(s: dict, w: int) -> str:
    """One per-step row of the text summary; a step whose graph work is hidden says "unknown"."""
    head = f"  {visible(s['name']):{w}s} {s['window_us']:9.1f} "
    tail = (f" {s['launch_cpu_us']:11.1f} {s['sync_cpu_us']:9.1f} {s['kernels']:7d}  {s['verdict']}"
            + (f"  {s['label']['text']}" if s.get("label") else ""))
    if s["gpu_idle_us"] is None:
        return head + f"{'unknown (CUDA graph work hidden)':>51s}" + tail
    sp = s["idle_split_us"]
    return (head + f"{s['gpu_busy_us']:9.1f} {s['other_steps_us']:9.1f} {s['gpu_idle_us']:9.1f} "
            f"({sp['host_wait']:.1f}/{sp['kernel_wait']:.1f}/{sp['other']:.1f})" + tail)


def _print_phases(phases: list[dict]) -> None:
    """Per phase of a serving trace: steps, device time, kernels and its top kernels."""
    if not phases:
        return
    _out("\nper phase (steps labelled by the engine's annotation; µs)")
    for f in phases:
        bs = f" · mean batch {f['batch_mean']:g}" if f["batch_mean"] is not None else ""
        unk = f" · {f['unknown_steps']} step(s) left out: CUDA graph work hidden" if f["unknown_steps"] else ""
        _out(f"  {f['phase']}: {f['steps']} step(s){bs} · device {f['device_us']:,.1f} · {f['kernels']} kernels{unk}")
        for k in f["top_kernels"]:
            _out(f"    {k['count']:6d} {k['device_us']:10.1f}  {visible(_short(k['name']))}")


def print_summary(t: Trace, as_json: bool = False, top: int = 15, fmt: str | None = None,
                  table: str | None = None) -> None:
    fmt = fmt or ("json" if as_json else "text")
    text = fmt == "text"
    d = summary_dict(t, top=top, op_kinds=TEXT_OP_KINDS if text else None, step_rows=TEXT_STEP_ROWS if text else None)
    if fmt != "text":  # csv: the ops table unless --table names another
        emit_report(d, fmt, table=table, first="ops", title=f"tracetui summary: {t.path.name}")
        if fmt == "json" and top:  # the cap said on stderr (tracetui/report/caps.py)
            from tracetui.report.caps import note_truncated
            note_truncated([(k, len(d[k]), n) for k, n in (("kernels", len(t.kernel_table)), ("ops", len(t.op_table)))
                            if len(d[k]) < n])
        return
    _out(f"{visible(t.path.name)}: {d['events']:,} events, {d['steps']} step(s), device: {visible(t.device_label)}")
    prov = d["provenance"]
    if prov and prov.get("recorder") == "record":  # tracetui record: a user's program
        _out(f"  recorded by tracetui record: torch {prov.get('torch')} on {prov.get('device')}"
             f" (rank {prov.get('rank')} of {prov.get('world_size')}, host {prov.get('host')})")
    elif prov:
        _out(f"  recorded by tracetui gen: {prov.get('workload')}/{prov.get('impl')} {prov.get('dtype')} "
             f"torch {prov.get('torch')} on {prov.get('device')}")
    for r in d["load"]["repairs"]:
        _out(f"  ! {r}")
    _out(f"  steps: {d['step_marker']['description']}")
    if d["step_marker"]["hint"]:
        _out(f"  {d['steps']} steps; {visible(d['step_marker']['hint'])}")
    if d["cuda_graphs"]:
        _out(f"  {d['cuda_graphs']['note']}")
    _out(f"  CPU self time: {d['self_time_rule']['label']} — {d['self_time_rule']['reason']}")
    if d["per_step"]:
        _out("\nper step (window: host start → end of its last GPU work; all threads and streams; µs)")
        w = max(16, *(len(visible(s["name"])) for s in d["per_step"]))  # a step's name is never cut
        _out(f"  {'step':{w}s} {'window':>9s}      busy   other-steps  idle (host/kernel/other wait)   launch CPU  sync CPU  kernels  verdict")
        for s in d["per_step"]:
            _out(_step_line(s, w))
        if d["steps"] > len(d["per_step"]):
            _out(f"  … {d['steps'] - len(d['per_step']):,} more steps (summary --json lists every one)")
        s = d["per_step"][0]
        _out(f"  {visible(s['name'])}: {s['verdict']} — {s['verdict_reason']}")
        classes = s["busy_by_class_us"] or {}
        if classes:
            _out("  busy by class: " + ", ".join(f"{c} {v:.1f}" for c, v in sorted(classes.items(), key=lambda x: -x[1]))
                 + (f"; communication exposed {s['comm_exposed_us']:.1f}, overlapped {s['comm_overlapped_us']:.1f}"
                    if s["comm_exposed_us"] or s["comm_overlapped_us"] else ""))
    _print_phases(d["phases"])
    if d["first_step_kernels"]:
        _out(f"\nkernels in {visible(t.name(t.steps[0]))} (first step), in launch order, with the ops that launched them:")
        for k in d["first_step_kernels"][:40]:
            src = (" > ".join(k["ops"]) or "(no ATen op)")
            _out(f"  {k['class']:13s} {k['device_us']:9.1f} µs  {visible(_short(k['name']))[:58]:58s}"
                 f"  <- {visible(src)}{' in ' + visible(k['module']) if k['module'] else ''}")
        if len(d["first_step_kernels"]) > 40:
            _out(f"  … {len(d['first_step_kernels']) - 40} more")
    if d["kernel_classes"]:
        _out("\nkernel classes: " + ", ".join(f"{c} {v['count']}× {v['total_us']:.1f} µs"
                                              for c, v in sorted(d["kernel_classes"].items(), key=lambda x: -x[1]["total_us"])))
    if d["kernels"]:
        _out(f"\n{'top kernels by device time':72s} {'count':>6s} {'total µs':>10s} {'mean µs':>10s}")
        for k in d["kernels"]:
            _out(f"  {visible(_short(k['name']))[:70]:70s} {k['count']:6d} {k['total_us']:10.1f} {k['mean_us']:10.2f}")
            if k.get("classes_us"):  # its instances differ in class (launching ops): say how
                _out("    mixed classes: " + ", ".join(f"{c} {v:.1f} µs" for c, v in k["classes_us"].items()))
    _out(f"\n{'top ops':44s} {'count':>6s} {'CPU total µs':>13s} {'CPU self µs':>12s} {'device µs':>10s}")
    for o in d["ops"]:
        _out(f"  {visible(o['name'])[:42]:42s} {o['count']:6d} {o['cpu_total_us']:13.1f} {o['cpu_self_us']:12.1f} {o['device_total_us']:10.1f}")
    diag = diagnostic_lines(d["diagnostics"])
    if diag:
        _out("\ndiagnostics (nothing is dropped silently):")
        for label, v, meaning in diag:
            _out(f"  {label}: {v} — {meaning}" if meaning else f"  {label}: {v}")


def _short(name: str) -> str:
    from tracetui.model.names import shorten_cpp
    return shorten_cpp(name) if "<" in name or "(" in name else name


def _node_fields(t: Trace, node: int) -> dict:
    r = t.roll
    out = {"id": int(node), "name": t.name(node), "kind": KINDS[t.tree.kind[node]],
           "cpu_us": r.cpu_total[node] * US, "cpu_self_us": r.cpu_self[node] * US,
           "device_us": r.device[node] * US, "kernels": int(r.kernels[node]),
           "start_us": int(t.tree.start[node]) * US, "dur_us": int(t.tree.dur[node]) * US}
    counts = what_it_counts(t.tree, node)
    if counts:  # a root, thread or step row says what its figures count
        out["counts"] = counts
    return out


def tree_dict(t: Trace, node: int, depth: int | None, keep: set | None, level: int = 0,
              python: bool = False, path_only: set | None = None) -> dict:
    """The subtree as nested dicts (``children`` lists), built with a stack, not recursion: a
    trace can nest thousands of events deep."""
    path_only = path_only or ()
    root = {**_node_fields(t, node), "children": []}
    stack = [(root, node, level)]
    while stack:
        d, n, lv = stack.pop()
        if depth is not None and lv >= depth:
            continue
        for c in _tree_kids(t, n, keep, python):
            cd = {**_node_fields(t, c), "children": []}
            d["children"].append(cd)
            stack.append((cd, c, lv + (c not in path_only)))
    return root


def _dump_tree(doc: dict) -> None:
    """``tree --json``: orjson where the nesting fits its limit (254 levels); deeper trees are
    written node by node from a stack (same fields, same escaping), so no depth breaks the output."""
    try:
        _dump(doc)
        return
    except orjson.JSONEncodeError:
        pass
    out = []
    stack: list = [doc]
    opt = orjson.OPT_SERIALIZE_NUMPY
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):  # a separator or a closing bracket, in order
            out.append(item)
            continue
        fields = orjson.dumps({k: v for k, v in item.items() if k != "children"}, option=opt)
        kids = item["children"]
        out.append(fields[:-1] + b',"children":[')
        stack.append(b"]}")
        for i, c in enumerate(reversed(kids)):
            stack.append(c)
            if i < len(kids) - 1:
                stack.append(b",")
    sys.stdout.buffer.write(json_safe(b"".join(out)) + b"\n")


def _tree_kids(t: Trace, node: int, keep: set | None, python: bool) -> list[int]:
    """The children the tree shows: Python frames hidden (their children lifted), as in the app,
    unless ``python``; with a filter, only the kept ones."""
    if python:
        kids = t.tree.children(node)
    else:
        from tracetui.read.events import K
        off, idx = t.tree.children_without(K["python"])
        kids = idx[off[node]:off[node + 1]]
    return [int(c) for c in kids if keep is None or int(c) in keep]


def match_sets(t: Trace, text: str) -> tuple[set, set]:
    """(every node kept by ``--filter text``, the matches and the paths down to them): ``--depth``
    counts the levels under the matches, so a deep match is never cut off."""
    keep = matching_paths(t, text)
    low = text.lower()
    import numpy as np
    tree = t.tree
    hits = [i for i, n in enumerate(tree.names) if low in n.lower()]
    under = np.isin(tree.name_id, hits)
    by_depth = np.argsort(tree.depth, kind="stable")
    starts = np.searchsorted(tree.depth[by_depth], np.arange(1, int(tree.depth.max()) + 1))
    for level in np.split(by_depth, starts)[1:]:
        under[level] |= under[tree.parent[level]]
    matches = set(np.nonzero(np.isin(tree.name_id, hits))[0].tolist())
    return keep, (keep - set(np.nonzero(under)[0].tolist())) | matches


def matching_paths(t: Trace, text: str) -> set:
    """Nodes whose name contains ``text`` (case-insensitive), their ancestors, and everything
    under them: filtering for an op shows what it launched, down to its kernels."""
    low = text.lower()
    hits = [i for i, n in enumerate(t.tree.names) if low in n.lower()]
    if not hits:
        return set()
    import numpy as np
    tree = t.tree
    under = np.isin(tree.name_id, hits)
    keep = set(np.nonzero(under)[0].tolist())
    for n in list(keep):  # the paths down to the matches
        n = int(tree.parent[n])
        while n >= 0 and n not in keep:
            keep.add(n)
            n = int(tree.parent[n])
    by_depth = np.argsort(tree.depth, kind="stable")
    starts = np.searchsorted(tree.depth[by_depth], np.arange(1, int(tree.depth.max()) + 1))
    for level in np.split(by_depth, starts)[1:]:  # parents' level first: a match's subtree
        under[level] |= under[tree.parent[level]]
    keep.update(np.nonzero(under)[0].tolist())
    return keep


def tree_rows(doc: dict) -> list[dict]:
    """A ``tree_dict`` as flat rows in depth-first order, each with its ``parent`` id and ``depth``."""
    rows, stack = [], [(doc, None, 0)]
    while stack:
        node, parent, level = stack.pop()
        rows.append({"id": node["id"], "parent": parent, "depth": level,
                     **{k: v for k, v in node.items() if k not in ("id", "children")},
                     "children": len(node["children"])})
        stack.extend((c, node["id"], level + 1) for c in reversed(node["children"]))
    return rows


def print_tree(t: Trace, depth: int | None = None, text_filter: str | None = None, as_json: bool = False,
               python: bool = False, fmt: str | None = None) -> None:
    """The hierarchy, Python frames hidden unless ``python``; ``depth`` counts the levels shown
    (below the matches, with ``text_filter``). ``fmt`` json, or csv/md (one row per node)."""
    fmt = fmt or ("json" if as_json else "text")
    keep, path_only = match_sets(t, text_filter) if text_filter else (None, set())
    if fmt == "json":
        _dump_tree(tree_dict(t, 0, depth, keep, python=python, path_only=path_only))
        return
    if fmt != "text":  # csv / md: one row per node (``children`` is the count shown under it)
        from tracetui.report.export import records_table
        doc = tree_dict(t, 0, depth, keep, python=python, path_only=path_only)
        emit_report({}, fmt, tables=[records_table("nodes", tree_rows(doc))], title=f"tracetui tree: {t.path.name}")
        return
    stack = [(0, 0, 0)]
    while stack:
        node, level, indent = stack.pop()
        r = t.roll
        kind = KINDS[t.tree.kind[node]]
        dev = f" dev {r.device[node] * US:.1f}µs" if r.device[node] else ""
        ker = f" k={int(r.kernels[node])}" if r.kernels[node] and kind not in ("kernel",) else ""
        cpu = f" cpu {r.cpu_total[node] * US:.1f}µs" if r.cpu_total[node] else ""
        counts = what_it_counts(t.tree, node)
        counts = f" ({counts})" if counts else ""
        _out(f"{'  ' * indent}{visible(t.name(node))} [{kind}]{cpu}{dev}{ker}{counts}")
        if depth is not None and level >= depth:
            continue
        kids = _tree_kids(t, node, keep, python)
        stack.extend((c, level + (c not in path_only), indent + 1) for c in reversed(kids))


def print_diff(d, as_json: bool = False, write=None, top: int = 10, rows: bool = True,
               fmt: str | None = None, table: str | None = None, head: list | None = None,
               extra: dict | None = None) -> None:
    """Print the diff report (or hand each line to ``write``, as the app does): totals that
    reconcile, the biggest changes by kind (``top`` per kind; 0: all), then fusion details and the
    full aligned list (``rows``). ``fmt`` json/csv/md writes the data instead (``table`` picks one).
    ``head``: lines the text opens with (the verdict); ``extra``: keys added to the JSON."""
    fmt = fmt or ("json" if as_json else "text")
    sink = write or _out

    def emit(line: str) -> None:  # the app shows these lines too: the same guard for both
        sink(_shown(line))
    from tracetui.compare.changes import diff_dict
    from tracetui.model.memory import memory_diff
    j = diff_dict(d)
    mem = memory_diff(d.a, d.b)  # only when both traces have [memory] instants
    if mem is not None:
        j["memory"] = mem
    if fmt != "text":
        out = diff_dict(d, top=top) if top else j
        if mem is not None:
            out["memory"] = mem
        if extra and fmt == "json":
            out.update(extra)
        if fmt == "json":
            _dump(out)
            if top and write is None:  # the cap said on stderr (tracetui/report/caps.py)
                from tracetui.report.caps import note_truncated, walk_caps
                note_truncated(walk_caps(out, j))
        else:  # csv: the aligned kernels unless --table names another
            emit_report(out, fmt, table=table, first="kernels", title="tracetui diff")
        return
    a, b = j["a"], j["b"]
    for line in head or []:
        emit(line)
    for side, x in (("A", a), ("B", b)):  # a GPU trace may lack deviceProperties: not "CPU" then
        dev = x["device"] or ("GPU (name not recorded)" if x.get("gpu") else "CPU")
        emit(f"{side}: {visible(x['file'])}  ({visible(dev)}, {x['steps']} step{'s' if x['steps'] != 1 else ''})")
    for line in diff_header(j):
        emit(line)
    for line in change_lines(j["changes"], top):
        emit(line)
    if j["fused"]:
        emit("\nfusion (each instance; replaced kernels of A, in launch order):")
        for f in j["fused"][: top * 3 if top else None]:
            emit(f"  {visible(_short(f['kernel']))} replaces {len(f['replaces'])} kernel(s) "
                 f"(ops {', '.join(f['ops'])}; matched by {f['matched_by']}"
                 + (f"; block {', '.join(f['blocks_a'])}" if f["blocks_a"] else "") + "):")
            if f.get("evidence"):
                emit(f"    evidence: {visible(f['evidence'])}")
            if f["gemm"]:
                emit(f"    = {visible(_short(f['gemm']))[:90]}  (the GEMM it replaced)")
            for r in f["replaces"]:
                emit(f"    - {visible(_short(r))[:90]}")
            emit(f"    saves {f['saved_us']:.1f} µs and {f['launches_saved']} launch(es) per step"
                 + (f"; intermediate no longer in HBM: {f['intermediate_bytes'] / 1e6:.1f} MB "
                    f"({f['hbm_traffic_saved_bytes'] / 1e6:.1f} MB of traffic)" if f["intermediate_bytes"] else ""))
        if top and len(j["fused"]) > top * 3:
            emit(f"  … {len(j['fused']) - top * 3} more (--top 0 lists all)")
    if j.get("unfused"):
        emit("\nfusion undone (a kernel of A that B runs as several, in launch order):")
        for f in j["unfused"][: top * 3 if top else None]:
            emit(f"  {visible(_short(f['kernel']))} runs as {len(f['parts'])} kernel(s) (matched by "
                 f"{f['matched_by']}): {f['a_us']:.1f} → {f['b_us']:.1f} µs per step")
            if f["evidence"]:
                emit(f"    evidence: {visible(f['evidence'])}")
            for p in f["parts"]:
                emit(f"    + {visible(_short(p))[:90]}")
    if j["chains"]:
        emit("\ndispatch chains that changed:")
        seen = set()
        for c in j["chains"]:
            key = (tuple(c["a"]), tuple(c["b"]))
            if key in seen:
                continue
            seen.add(key)
            emit(f"  {' → '.join(c['a']) or '∅'}  ⇒  {' → '.join(c['b']) or '∅'}")
    if j["added_ops"]:
        pre = [o for o in j["added_ops"] if o["compile_preop"]]
        if pre:
            emit("\ncompile pre-ops (per step, B's CPU µs): " + ", ".join(
                f"{visible(o['name'])} {o['b_cpu_us']:.1f}" for o in pre))
    if rows:
        emit("\nkernels per step (aligned; Δ = what the row adds to B)        A µs      B µs      Δ µs  status")
        for k in j["kernels"]:
            au = f"{k['a_us']:9.1f}" if k["a_us"] is not None else " " * 9
            bu = f"{k['b_us']:9.1f}" if k["b_us"] is not None else " " * 9
            why = k["reason"] or k["detail"] or ("unexplained" if k["status"] in ("added", "removed") else "")
            extra = f"  ({visible(why)})" if why else ""
            emit(f"  {visible(_short(k['name']))[:58]:58s} {au} {bu} {k['delta_us']:+9.1f}  {k['status']}{extra}")

    if mem is not None:
        _emit_memory_diff(mem, emit)


def diff_header(j: dict) -> list[str]:
    """The per-step totals of a diff, reconciled: rows sum to the delta, launches to the counts."""
    a, b, t = j["a"], j["b"], j["totals"]
    alike = ""
    if a["steps_alike"] < a["steps"] or b["steps_alike"] < b["steps"]:
        alike = f" (steps alike: A {a['steps_alike']}/{a['steps']}, B {b['steps_alike']}/{b['steps']})"
    dev = "device" if a["device"] or b["device"] or a.get("gpu") or b.get("gpu") else "compute (CPU ops)"
    out = [f"per step{alike}: {dev} {t['device_us_a']:,.1f} → {t['device_us_b']:,.1f} µs "
           f"({t['device_delta_us']:+,.1f}; rows sum to {t['rows_delta_us']:+,.1f}), "
           f"kernels {t['kernels_a']} → {t['kernels_b']} (launches saved {t['launches_saved']}), "
           f"CPU {a['cpu_us_per_step']:,.1f} → {b['cpu_us_per_step']:,.1f} µs"]
    if a["memcpy_memset_per_step"] or b["memcpy_memset_per_step"]:
        out.append(f"  memcpy/memset (not in the rows): {a['memcpy_memset_per_step']:g} → "
                   f"{b['memcpy_memset_per_step']:g} "
                   f"per step, {a['memcpy_memset_us_per_step']:.1f} → {b['memcpy_memset_us_per_step']:.1f} µs")
    out.append(f"  B's kernels explained {t['b_kernels_explained']}/{t['b_kernels']}; unexplained rows "
               f"{t['unexplained']} ({t['unexplained_added']} added, {t['unexplained_removed']} removed)")
    for side, key in (("B", "weight_repack_us_b"), ("A", "weight_repack_us_a")):
        if t.get(key):
            out.append(f"  weight repacks in {side}: {t[key]:,.1f} µs per step (weights copied into a fused "
                       "GEMM's layout every step)")
    return out


def change_lines(changes: list[dict], top: int = 10) -> list[str]:
    """The biggest changes, grouped by kind, each group sorted by |Δ| per step, repeats folded."""
    out = []
    kinds = list(dict.fromkeys(c["kind"] for c in changes))
    for kind in kinds:
        group = [c for c in changes if c["kind"] == kind]
        unit = "CPU µs" if kind == "cpu" else "µs"
        total = sum(c["delta_us"] for c in group)
        out.append(f"\n{group[0]['label']}: {total:+,.1f} {unit} per step")
        for c in group[: top or None]:
            rep = f"  [{c['repeat']}]" if c["repeat"] else ""
            why = f"  ({c['detail']})" if c["detail"] and kind in ("added", "removed", "implementation") else ""
            if kind in ("added", "removed") and not c["detail"]:
                why = "  (unexplained)"
            out.append(f"  {c['delta_us']:+10.1f}  {visible(c['title'])[:90]}{rep}{visible(why)[:80]}")
        if top and len(group) > top:
            rest = sum(c["delta_us"] for c in group[top:])
            out.append(f"  {rest:+10.1f}  … {len(group) - top} more")
    return out


def print_ladder(ld: dict, names: list[str], as_json: bool = False, write=None) -> None:
    """An N-way ladder: per step figures of each rung, and why each next rung is faster or slower."""
    if as_json:
        _dump(ld)
        return
    sink = write or _out

    def emit(line: str) -> None:
        sink(_shown(line))
    for line in ladder_lines(ld, names):
        emit(line)


def ladder_tables(ld: dict, names: list[str]) -> list:
    """The csv/md tables of a ladder (``diff A B C …``): ``rungs`` (one row per trace, its
    per-step figures), ``steps`` (one per neighbour pair, its totals), ``changes`` and
    ``cpu_changes`` (the pair's top changes, each led by the pair's ``from`` and ``to`` names)."""
    from tracetui.report.export import records_table
    rungs = [{"name": n, **r} for n, r in zip(names, ld["rungs"])]
    steps = [{"from": names[s["from"]], "to": names[s["to"]], **s["totals"]} for s in ld["steps"]]

    def changes(key: str) -> list[dict]:
        return [{"from": names[s["from"]], "to": names[s["to"]], **c} for s in ld["steps"] for c in s[key]]
    return [records_table("rungs", rungs), records_table("steps", steps),
            records_table("changes", changes("top")), records_table("cpu_changes", changes("cpu_top"))]


def _cut(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters, an ellipsis saying where it was cut."""
    return text if len(text) <= n else text[:n - 1] + "…"


def ladder_lines(ld: dict, names: list[str]) -> list[str]:
    out = ["per step           device µs   kernels  launches  launch CPU µs    CPU µs   file"]
    for name, r in zip(names, ld["rungs"]):
        out.append(f"  {visible(name)[:14]:14s} {r['device_us_per_step']:11,.1f} {r['kernels_per_step']:9d} "
                   f"{r['launches_per_step']:9.0f} {r['launch_cpu_us_per_step']:14,.1f} {r['cpu_us_per_step']:9,.1f}   "
                   f"{visible(r['file'])}")
    for s in ld["steps"]:
        t = s["totals"]
        out.append(f"\n{visible(names[s['from']])} → {visible(names[s['to']])}: "
                   f"device {t['device_delta_us']:+,.1f} µs, "
                   f"kernels {t['kernels_a']} → {t['kernels_b']}, CPU {t['cpu_delta_us']:+,.1f} µs; "
                   f"unexplained rows {t['unexplained']}")
        for c in s["top"]:
            rep = f"  [{c['repeat']}]" if c["repeat"] else ""
            out.append(f"  {c['delta_us']:+10.1f}  {c['label']}: {_cut(visible(c['title']), 80)}{rep}")
        for c in s["cpu_top"]:
            out.append(f"  {c['delta_us']:+10.1f}  CPU: {_cut(visible(c['title']), 80)}")
    return out


def _emit_memory_diff(mem: dict, emit) -> None:
    from tracetui.model.memory import fmt_bytes
    emit("\nmemory (peak per device, A → B):")
    for p in mem["peaks"]:
        emit(f"  {p['device']:>6} {fmt_bytes(p['a_bytes']):>12} → {fmt_bytes(p['b_bytes']):>12}  "
             f"({'+' if p['change_bytes'] >= 0 else '-'}{fmt_bytes(abs(p['change_bytes']))})")
    if mem["ops"]:
        emit(f"  largest per-op changes in allocation size{' per step' if mem['per_step'] else ''} (A → B):")
        for o in mem["ops"]:
            emit(f"  {o['device']:>6} {fmt_bytes(o['a_allocation_bytes']):>12} → {fmt_bytes(o['b_allocation_bytes']):>12}  "
                 f"{visible(o['name'])[:60]}")


def print_memory(t: Trace, as_json: bool = False, top: int = 10, fmt: str | None = None,
                 table: str | None = None) -> None:
    """``tracetui memory``: peaks per device and per step, what held them, never-freed blocks,
    the per-op table (TensorBoard plugin definitions). JSON sizes are integer bytes, times µs."""
    from tracetui.report.export import report_tables
    from tracetui.model.memory import OP_COLUMNS, fmt_bytes, memory_dict
    fmt = fmt or ("json" if as_json else "text")
    j = memory_dict(t, top=top)
    if fmt != "text":  # json, or csv/md tables (csv: the per-op table unless --table)
        tabs = report_tables(j, columns={"ops": OP_COLUMNS})  # no memory events: still its header
        emit_report(j, fmt, table=table, first="ops", tables=tabs, title=f"tracetui memory: {t.path.name}")
        if fmt == "json" and top:  # the cap said on stderr (tracetui/report/caps.py)
            from tracetui.report.caps import note_truncated, walk_caps
            note_truncated(walk_caps(j, memory_dict(t, top=0)))
        return
    b = lambda n: f"{fmt_bytes(n)} ({n:,} B)" if abs(n) >= 1024 else fmt_bytes(n)  # noqa: E731
    t0 = int(t.store.ts.min()) * US if len(t.store) else 0.0  # text times: offsets from the first event
    at = lambda us: f"+{(us - t0) / 1e3:,.3f} ms"  # noqa: E731
    _out(f"{t.path.name}: {j['instants']:,} memory instants")
    if not j["instants"]:
        _out("no [memory] events: record with torch.profiler.profile(profile_memory=True)")
        return
    for d in j["devices"]:
        _out(f"\n{d['device']}: peak {b(d['peak_bytes'])} at {at(d['peak_us'])}"
             f" (reserved there {fmt_bytes(d['peak_reserved_bytes'])}, most reserved {fmt_bytes(d['max_reserved_bytes'])})")
        _out(f"  {d['allocations']:,} allocations: {d['paired']:,} freed in the trace, {d['never_freed']:,} never freed "
             f"({fmt_bytes(d['never_freed_bytes'])}); {d['unmatched_frees']:,} frees of memory allocated before it")
        _out(f"  held at the peak: {d['live_at_peak']:,} allocations made in the trace, "
             f"{fmt_bytes(d['held_before_bytes'])} allocated before it")
        for by in ("op", "module", "step"):
            rows = d["holders"][by]
            if rows and not (len(rows) == 1 and rows[0][by] == "-"):
                _out(f"    by {by}:")
                for r in rows:
                    _out(f"      {fmt_bytes(r['bytes']):>12} {r['count']:>6}  {r[by]}")
        if d["never_freed_blocks"]:
            _out("  never freed (largest):")
            for r in d["never_freed_blocks"]:
                _out(f"      {fmt_bytes(r['bytes']):>12}  {r['op']}  ·  {r['module']}  ·  {r['step']}  at {at(r['ts_us'])}")
    if j["steps"]:
        _out("\nper step (peak inside the step's host interval; top holder by op):")
        for s in j["steps"]:
            top_op = s["holders"]["op"][0] if s["holders"]["op"] else None
            held = f"  top: {top_op['op']} {fmt_bytes(top_op['bytes'])}" if top_op else ""
            _out(f"  {s['name'][:30]:30s} {s['device']:>5} {fmt_bytes(s['peak_bytes']):>12}{held}")
    _out("\nper op (TensorBoard plugin definitions; self = not counting child ops):")
    _out(f"  {'device':>6} {'calls':>7} {'allocs':>7} {'alloc size':>11} {'self allocs':>11} {'self size':>11} "
         f"{'increase':>11} {'self incr.':>11}  name")
    for o in j["ops"]:
        _out(f"  {o['device']:>6} {o['calls']:>7,} {o['allocation_count']:>7,} {fmt_bytes(o['allocation_bytes']):>11} "
             f"{o['self_allocation_count']:>11,} {fmt_bytes(o['self_allocation_bytes']):>11} "
             f"{fmt_bytes(o['size_increase_bytes']):>11} {fmt_bytes(o['self_size_increase_bytes']):>11}  {o['name']}")
