"""``tracetui summary``: per-step figures, kernel classes, top kernels and ops, as text or data."""
from __future__ import annotations

import numpy as np

from tracetui.read.events import K
from tracetui.model.trace import Trace
from tracetui.model.tree import diagnostic_lines
from tracetui.report.output import US, emit_report, write_line, short_name
from tracetui.shorten import column
from tracetui.report.serving import cuda_graphs, hidden_note, honest, marker_lines, print_phases, serving_phases, step_line
from tracetui.textsafe import visible


TEXT_OP_KINDS = ("op", "annotation", "step", "runtime")
"""The op table's rows in every format: Python frames and modules only under ``--python`` (as in
``tree``). ``summary_dict`` without ``op_kinds`` (the MCP tools, the key_averages() tests) keeps
every row."""
PYTHON_OP_KINDS = TEXT_OP_KINDS + ("module", "python")


def attribution(t: Trace, node: int) -> dict:
    """Which module and ATen ops a GPU activity came from: the facts a user asks first."""
    mod = t.scope_module(node)
    ops = t.op_chain(node, stop=(K["module"], K["step"]))
    return {"module": t.name(mod)[len("nn.Module: "):] if mod else None, "ops": ops}


class Attributions:
    """``attribution`` of many GPU nodes, each ancestor's answer kept: the first step of a trace
    of 10^6 kernels walked up the same ancestors once per kernel (~7 µs each)."""

    def __init__(self, t: Trace) -> None:
        self.t = t
        self.module: dict[int, int | None] = {}   # node -> the innermost module at or above it
        self.ops: dict[int, tuple[str, ...]] = {}  # node -> op names at and above it, outermost first

    def of(self, node: int) -> dict:
        """``attribution(t, node)``."""
        tree = self.t.tree
        mod = self._module(int(tree.parent[node]))
        ops = self._ops(int(tree.cparent[node]))
        return {"module": self.t.name(mod)[len("nn.Module: "):] if mod else None, "ops": list(ops)}

    def _module(self, x: int) -> int | None:
        """``Trace.scope_module`` of a child of ``x``: the first module along ``x`` and its parents."""
        tree, memo, path = self.t.tree, self.module, []
        for _ in range(len(tree.parent) + 1):  # a walk up always ends (Tree.ancestors)
            if x <= 0:
                found = None
                break
            if x in memo:
                found = memo[x]
                break
            if tree.kind[x] == K["module"]:
                found = x
                break
            path.append(x)
            x = int(tree.parent[x])
        else:
            found = None
        for y in path:
            memo[y] = found
        return found

    def _ops(self, x: int) -> tuple[str, ...]:
        """``Trace.op_chain(child, stop=(module, step))`` of a child of ``x`` (containment parents)."""
        t, memo, path = self.t, self.ops, []
        tree = t.tree
        for _ in range(len(tree.cparent) + 1):
            if x <= 0 or tree.kind[x] in (K["module"], K["step"]):
                above: tuple[str, ...] = ()
                break
            if x in memo:
                above = memo[x]
                break
            path.append(x)
            x = int(tree.cparent[x])
        else:
            above = ()
        for y in reversed(path):  # outermost first: each node's chain is its parent's, then itself
            if tree.kind[y] == K["op"]:
                above = above + (t.name(y),)
            memo[y] = above
        return memo[path[0]] if path else above


def launched_by_op(t: Trace, nodes: np.ndarray) -> np.ndarray:
    """Whether ``attribution(t, n)["ops"]`` is non-empty for each GPU node: an op lies on its
    containment parents before a module, a step or the root. Whole arrays, one level at a
    time: the text summary counts the linked kernels of a step of thousands, shows 40."""
    tree = t.tree
    out = np.zeros(nodes.size, dtype=bool)
    at = np.arange(nodes.size)
    x = tree.cparent[nodes]
    for _ in range(len(tree.cparent) + 1):  # containment parents end at the root (Tree.ancestors)
        kind = tree.kind[np.maximum(x, 0)]
        stop = (x <= 0) | (kind == K["module"]) | (kind == K["step"])
        hit = ~stop & (kind == K["op"])
        out[at[hit]] = True
        up = ~(stop | hit)
        if not up.any():
            break
        at, x = at[up], tree.cparent[x[up]]
    return out


TEXT_STEP_ROWS = 200
"""The text summary lists this many steps, then says how many more there are (``--json`` has
every one): 250,000 lines would take longer to print than the trace takes to load."""


def summary_dict(t: Trace, top: int = 15, op_kinds: tuple | None = None, step_rows: int | None = None,
                 attribute: bool = True) -> dict:
    """The summary as data; ``op_kinds`` keeps only those kinds in ``ops`` (before ``top`` applies);
    ``step_rows`` keeps only the first steps in ``per_step`` (``steps`` still counts them all).
    ``attribute=False`` leaves the first step's kernels without their module and ops (each
    with its ``node``): the text finds them for the rows it shows (``_first_step_lines``)."""
    if step_rows is not None and t.n_steps > step_rows:
        steps = [step_dict(t, s) for s in t.steps[:step_rows]]
    else:
        steps = [step_dict(t, s, b) for s, b in zip(t.steps, t.windows.breakdowns())]  # all steps in one pass
    classes: dict = {}
    kernels = []
    table = t.kernel_table
    # each instance classed with its own launching op; the class and library of a row are its
    # biggest class's (Trace.row_info), found for every row at once (per row: ~50 µs)
    for a, (klass, library, by_class, counts) in zip(table, t.table_classes([a.nodes for a in table])):
        for k, n in sorted(counts.items()):
            c = classes.setdefault(str(k), {"count": 0, "total_us": 0.0})
            c["count"] += int(n)
            c["total_us"] += by_class[str(k)]
        row = {"name": a.name, "count": a.count, "total_us": a.device_total_us, "mean_us": a.mean_device_us,
               "class": klass, "library": library}
        if len(by_class) > 1:  # a name with mixed classes says so: µs per class, biggest first
            row["classes_us"] = by_class
        kernels.append(row)
    ops = [{"name": a.name, "kind": a.kind, "count": a.count, "cpu_total_us": a.cpu_total_us,
            "cpu_self_us": a.cpu_self_us, "device_total_us": a.device_total_us,
            "device_scope_us": a.device_scope_us}
           for a in t.op_table if op_kinds is None or a.kind in op_kinds]  # default: every key_averages() row
    first_step = []
    if t.steps:
        gpu = t.step_gpu_nodes(t.steps[0])
        gpu = gpu[t.tree.kind[gpu] == K["kernel"]]  # memcpy/memset are in the kernel table and classes, not this list
        scopes = Attributions(t)
        for g, klass in zip(gpu.tolist(), t.classes_of(gpu).tolist()):  # kernel_info(g).klass, classed once per trace
            first_step.append({"name": t.name(g), "class": klass, "device_us": t.tree.dur[g] * US,
                               **(scopes.of(g) if attribute else {"node": g})})
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


STEP_JSON_NAMES = {"busy_ns": "gpu_busy_us", "idle_ns": "gpu_idle_us"}
"""Breakdown keys whose ``per_step`` name is not the rule's (``x_ns`` -> ``x_us``): the first
schema's names, kept."""

STEP_JSON_HIDDEN = ("compute_ns", "comm_ns")
"""Breakdown figures ``per_step`` leaves out (the ranks report uses them; ``comm_exposed_us`` and
``comm_overlapped_us`` split ``comm_ns`` there)."""


def step_dict(t: Trace, step: int, b: dict | None = None) -> dict:
    """One step's breakdown over its window (``windows.Windows.breakdown``; ``b``: given), every
    ``*_ns`` figure as ``*_us`` (nested objects too), in the breakdown's order
    (``model/window_figures.COLUMNS``)."""
    b = t.step_breakdown(step) if b is None else b
    out = {"name": t.name(step)}
    for key, v in b.items():
        if key in STEP_JSON_HIDDEN:
            continue
        if key.endswith("_ns"):
            key = STEP_JSON_NAMES.get(key, key[:-3] + "_us")
            v = {k: x * US for k, x in v.items()} if isinstance(v, dict) else v * US
        out[key] = v
    return honest(t, step, out)


def print_summary(t: Trace, as_json: bool = False, top: int = 15, fmt: str | None = None,
                  table: str | None = None, python: bool = False) -> None:
    fmt = fmt or ("json" if as_json else "text")
    text = fmt == "text"
    kinds = PYTHON_OP_KINDS if python else TEXT_OP_KINDS  # the same rows in every format
    d = summary_dict(t, top=top, op_kinds=kinds, step_rows=TEXT_STEP_ROWS if text else None, attribute=not text)
    shown_ops = sum(1 for a in t.op_table if a.kind in kinds)
    if fmt != "text":  # csv: the ops table unless --table names another
        emit_report(d, fmt, table=table, first="ops", title=f"tracetui summary: {t.path.name}")
        if fmt == "json" and top:  # the cap said on stderr (tracetui/report/caps.py)
            from tracetui.report.caps import note_truncated
            note_truncated([(k, len(d[k]), n) for k, n in (("kernels", len(t.kernel_table)), ("ops", shown_ops))
                            if len(d[k]) < n])
        return
    write_line(f"{visible(t.path.name)}: {d['events']:,} events, {d['steps']} step(s), device: {visible(t.device_label)}")
    prov = d["provenance"]
    if prov and prov.get("recorder") == "record":  # tracetui record: a user's program
        write_line(f"  recorded by tracetui record: torch {prov.get('torch')} on {prov.get('device')}"
             f" (rank {prov.get('rank')} of {prov.get('world_size')}, host {prov.get('host')})")
    elif prov:
        write_line(f"  recorded by tracetui gen: {prov.get('workload')}/{prov.get('impl')} {prov.get('dtype')} "
             f"torch {prov.get('torch')} on {prov.get('device')}")
    for r in d["load"]["repairs"]:
        write_line(f"  ! {r}")
    write_line(f"  steps: {d['step_marker']['description']}")
    for line in marker_lines(d):
        write_line(line)
    write_line(f"  CPU self time: {d['self_time_rule']['label']} — {d['self_time_rule']['reason']}")
    _per_step_lines(t, d)
    print_phases(d["phases"])
    if d["first_step_kernels"]:
        _first_step_lines(t, d["first_step_kernels"], hidden_note(d, first=True))
    if d["kernel_classes"]:
        write_line("\nkernel classes: " + ", ".join(f"{c} {v['count']}× {v['total_us']:.1f} µs"
                                              for c, v in sorted(d["kernel_classes"].items(), key=lambda x: -x[1]["total_us"])))
    if d["kernels"]:
        write_line("\ntop kernels by device time" + hidden_note(d))
        write_line(f"  {'count':>6s} {'total µs':>10s} {'mean µs':>10s}  name")
        names = column([visible(k["name"]) for k in d["kernels"]], used=2 + 6 + 11 + 11 + 2, short=short_name)
        for k, name in zip(d["kernels"], names):
            write_line(f"  {k['count']:6d} {k['total_us']:10.1f} {k['mean_us']:10.2f}  {name}")
            if k.get("classes_us"):  # its instances differ in class (launching ops): say how
                write_line("    mixed classes: " + ", ".join(f"{c} {v:.1f} µs" for c, v in k["classes_us"].items()))
    # device µs: key_averages()'s (what the op's own thread's ops launched); under op µs: all GPU work
    # launched inside the op, also outside any ATen op (graph replays, NCCL, a user's Triton kernel)
    _op_lines(t, d)
    diag = diagnostic_lines(d["diagnostics"])
    if diag:
        write_line("\ndiagnostics (nothing is dropped silently):")
        for label, v, meaning in diag:
            write_line(f"  {label}: {v} — {meaning}" if meaning else f"  {label}: {v}")

def _per_step_lines(t: Trace, d: dict) -> None:
    """The per-step table of the text summary: GPU columns only where the trace has a GPU."""
    if d["per_step"] and not t.has_gpu:  # CPU only: no GPU to be busy or idle, no launches
        write_line("\nper step (CPU only: the step's host interval, µs)")
        w = max(16, *(len(visible(s["name"])) for s in d["per_step"]))  # a step's name is never cut
        write_line(f"  {'step':{w}s} {'window':>10s}  threads")
        for s in d["per_step"]:
            write_line(f"  {visible(s['name']):{w}s} {s['window_us']:10.1f}  {s['threads']:7d}")
    elif d["per_step"]:
        write_line("\nper step (window: host start → the later of host end and its last GPU work's end; all threads and streams; µs)")
        w = max(16, *(len(visible(s["name"])) for s in d["per_step"]))  # a step's name is never cut
        write_line(f"  {'step':{w}s} {'window':>9s}      busy  other work       idle (host/kernel/other wait)   launch CPU  sync CPU  kernels  verdict")
        for s in d["per_step"]:
            write_line(step_line(s, w))
    if d["per_step"]:
        if d["steps"] > len(d["per_step"]):
            write_line(f"  … {d['steps'] - len(d['per_step']):,} more steps (summary --json lists every one)")
        s = d["per_step"][0]
        write_line(f"  {visible(s['name'])}: {s['verdict']} — {s['verdict_reason']}")
        classes = s["busy_by_class_us"] or {}
        if classes:
            write_line("  busy by class: " + ", ".join(f"{c} {v:.1f}" for c, v in sorted(classes.items(), key=lambda x: -x[1]))
                 + (f"; communication exposed {s['comm_exposed_us']:.1f}, overlapped {s['comm_overlapped_us']:.1f}"
                    if s["comm_exposed_us"] or s["comm_overlapped_us"] else ""))

def _op_lines(t: Trace, d: dict) -> None:
    """The op table of the text summary, names last; device columns only where the trace has a GPU."""
    gpu = t.has_gpu  # a CPU-only trace has no device columns
    write_line("\ntop ops (µs: CPU total, CPU self" + (", device as key_averages() counts it, and all GPU work "
               "under the op)" if gpu else ")"))
    write_line(f"  {'count':>6s} {'CPU µs':>10s} {'self µs':>10s}" + (f" {'device µs':>10s} {'under op':>10s}" if gpu else "")
               + "  name")
    names = column([visible(o["name"]) for o in d["ops"]], used=2 + 6 + (4 if gpu else 2) * 11 + 2)
    for o, name in zip(d["ops"], names):
        dev = f" {o['device_total_us']:10.1f} {o['device_scope_us']:10.1f}" if gpu else ""
        write_line(f"  {o['count']:6d} {o['cpu_total_us']:10.1f} {o['cpu_self_us']:10.1f}{dev}  {name}")


FIRST_STEP_ROWS = 40
"""The text lists this many of the first step's kernels: all of them in launch order when they fit,
else the longest, ranked by device time (HTA's test trace: 2,101 kernels whose first 40 in launch
order were all unlinked warm-up adds, though 74% of the step's kernels link to an op)."""


def _first_step_lines(t: Trace, ks: list[dict], note: str = "") -> None:
    """The first step's kernels with the ops that launched them. A kernel no op launched before the
    step's first linked kernel says so (warm-up or another step's work), not left as an anonymous row."""
    lazy = "ops" not in ks[0]  # summary_dict(attribute=False): only the rows shown are attributed
    if lazy:
        has_op = launched_by_op(t, np.array([k["node"] for k in ks], dtype=np.int64)).tolist()
    else:
        has_op = [bool(k["ops"]) for k in ks]
    first_linked = next((i for i, k in enumerate(has_op) if k), len(ks))
    rows = list(enumerate(ks))
    linked = sum(has_op)
    step = visible(t.name(t.steps[0]))
    if len(ks) <= FIRST_STEP_ROWS:
        write_line(f"\nkernels in {step} (first step), in launch order, with the ops that launched them{note}:")
    else:
        rows = sorted(rows, key=lambda r: -r[1]["device_us"])[:FIRST_STEP_ROWS]
        write_line(f"\nkernels in {step} (first step): the {FIRST_STEP_ROWS} longest of {len(ks):,}, by device time "
                   f"({linked:,} of {len(ks):,} launched by an ATen op), with the ops that launched them{note}:")
    if lazy:
        scopes = Attributions(t)
        rows = [(i, {**k, **scopes.of(k["node"])}) for i, k in rows]
    names = column([visible(k["name"]) for _, k in rows], used=2 + 13 + 1 + 9 + 5, short=short_name)
    for (i, k), name in zip(rows, names):
        if k["ops"]:
            src = visible(" > ".join(k["ops"]))
        else:
            src = "(no ATen op: unlinked, before the step's first linked kernel)" if i < first_linked \
                else "(no ATen op)"
        write_line(f"  {k['class']:13s} {k['device_us']:9.1f} µs  {name}"
                   f"  <- {src}{' in ' + visible(k['module']) if k['module'] else ''}")
    if len(ks) > len(rows):
        write_line(f"  … {len(ks) - len(rows):,} more (summary --json lists every one, in launch order)")
