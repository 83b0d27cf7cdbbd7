"""The detail pane's text for one node: names, timings, shapes, launch config, decoded kernel name,
roofline, and (for steps) GPU busy/idle. Built from the model only; every name is plain text."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from tracetui.read.events import GPU_KINDS, K
from tracetui.model.names import shorten_cpp
from tracetui.model.perf import estimate, peak_for
from tracetui.model.trace import Trace
from tracetui.model.tree import diagnostic_lines
from tracetui.textsafe import visible

from tracetui.ui.format import KIND_STYLE, fmt_us, plain

LAUNCH_LABELS = {  # Kineto's arg -> (label that fits the 14-column label field, unit after the value)
    "grid": ("grid", ""), "block": ("block", ""), "registers per thread": ("registers", " per thread"),
    "shared memory": ("shared memory", " B"), "blocks per SM": ("blocks per SM", ""),
    "warps per SM": ("warps per SM", ""), "est. achieved occupancy %": ("occupancy", " % (est.)"),
    "stream": ("stream", ""), "device": ("device", ""), "queued": ("queued", ""), "bytes": ("bytes", ""),
    "memory bandwidth (GB/s)": ("bandwidth", " GB/s"),
}
LAUNCH_KEYS = tuple(LAUNCH_LABELS)
OCCUPANCY = "est. achieved occupancy %"
"""Kineto writes 0 here where it made no estimate (cuDNN, nvjet and other kernels it cannot model):
no kernel that ran had zero occupancy, so 0 is shown as not estimated, not as "0 % (est.)"."""


def _is_zero(v) -> bool:
    try:
        return float(v) == 0
    except (TypeError, ValueError):
        return False


def _line(t: Text, label: str, value: str | Text, style: str = "") -> None:
    """One "label value" line. Plain strings are made visible here, whatever built them (arg
    keys, names decoded from a kernel's name, a step's name): Text values were built safe."""
    label = visible(label)
    if len(label) > 14:  # a long arg key on its own line, whole, rather than cut mid-word
        t.append(f"{label}\n", style="dim")
        label = ""
    t.append(f"{label:>14} ", style="dim")
    t.append(value if isinstance(value, Text) else Text(visible(value), style=style))
    t.append("\n")


ARGLESS = frozenset({"root", "thread", "step", "gpu"})
MEMORY_KINDS = frozenset({"op", "module", "annotation", "step", "python"})
"""Kinds whose detail pane says what they allocated and freed (profile_memory traces)."""
MEMORY_BLOCKS = 6
"""Largest allocations listed in a node's memory section."""


def describe(tr: Trace, node: int, full_name: bool = False) -> Text:
    kind = tr.kind(node)
    name = tr.name(node)
    glyph, style = KIND_STYLE.get(kind, ("?", ""))
    t = Text()
    t.append(f"{glyph} {kind}\n", style=style)
    shown = name if full_name or len(name) < 160 else shorten_cpp(name)
    t.append(plain(shown, "bold"))
    if shown != name:
        t.append("  (shortened: press f for the full name)", style="dim italic")
    t.append("\n")
    if kind == "step":  # first: where the step's time went is what a step is opened for
        _step_section(tr, node, t)
    t.append("\n")
    r = tr.roll
    if kind in ("kernel", "memcpy", "memset"):
        _line(t, "device time", fmt_us(tr.tree.dur[node]))
    else:
        if r.cpu_total[node]:
            _line(t, "CPU total", fmt_us(r.cpu_total[node]))
            _line(t, "CPU self", fmt_us(r.cpu_self[node]))
        dev, nk = r.device[node], int(r.kernels[node])
        if kind == "runtime":  # the rollups count GPU time on ops; a launch shows what it enqueued
            g = tr.gpu_descendants(node)
            dev, nk = int(tr.tree.dur[g].sum()), int((tr.tree.kind[g] == K["kernel"]).sum())
        _line(t, "device time", fmt_us(dev))
        _line(t, "kernels", str(nk))
        if tr.is_cpu_only(node):
            _line(t, "", "launches no GPU work (CPU-only op, e.g. a view)", "yellow")
    step = int(r.step_of[node])
    if step >= 0 and step != node:
        base = r.cpu_total[step] if kind not in ("kernel", "memcpy", "memset") else r.device[step]
        val = r.cpu_total[node] if kind not in ("kernel", "memcpy", "memset") else tr.tree.dur[node]
        if base:
            _line(t, "share of step", plain(f"{100 * val / base:.1f}% of {tr.name(step)}"))
    if tr.n_steps > 1 and kind in ("op", "module", "annotation", "kernel"):
        from tracetui.model.stats import agg_key
        a = tr.agg_by_name.get(("gpu" if kind == "kernel" else "host", agg_key(name)))
        if a is not None:
            per = a.device_total_us if kind == "kernel" else a.cpu_total_us
            _line(t, "per step avg", f"{fmt_us(per * 1e3 / tr.n_steps)} over {tr.n_steps} steps ({a.count} calls)")
    if kind == "root":
        _load_section(tr, t)
    # steps, threads and groups show no args of note: don't wait for the args pass for them
    args = tr.args(node) if tr.store.args_loaded or kind not in ARGLESS else {}
    if "Input Dims" in args:
        t.append("\ninputs\n", style="bold")
        dims, types, strides = (args.get(k) for k in ("Input Dims", "Input type", "Input Strides"))
        dims = dims if isinstance(dims, list) else [dims]  # args are data from the file: any type
        types = types if isinstance(types, list) else []
        strides = strides if isinstance(strides, list) else []
        for i, d in enumerate(dims):
            ty = types[i] if i < len(types) else ""
            st = strides[i] if i < len(strides) else ""
            t.append(plain(f"  [{i}] {ty} {d} strides {st}"))
            t.append("\n")  # outside plain(): made visible, a newline reads \x0a
    if kind in ("kernel", "memcpy", "memset"):
        _kernel_section(tr, node, args, t)
    elif kind == "op" and args.get("kernel_backend") == "triton":
        t.append("\nInductor kernel launch\n", style="bold")
        from tracetui.model.names import inductor_ops
        ops, trunc = inductor_ops(name)
        if ops:
            _line(t, "fused ops", ", ".join(ops) + (" (name truncated)" if trunc else ""))
        for k in ("kernel_file", "kernel_kwargs", "num_warps", "num_stages"):
            if k in args:
                _line(t, k, plain(str(args[k])))
    if kind in ("op", "runtime", "module", "annotation"):
        ks = tr.gpu_descendants(node)
        if ks.size:
            t.append(f"\nlaunched GPU work ({ks.size}; x jumps to them)\n", style="bold")
            for k in ks[:8].tolist():
                t.append(plain(f"  {fmt_us(tr.tree.dur[k]):>10}  {shorten_cpp(tr.name(k))[:90]}"))
                t.append("\n")
            if ks.size > 8:
                t.append(f"  … {ks.size - 8} more\n", style="dim")
    if node in tr.tree.fwd_of:
        _line(t, "forward op", plain(tr.name(tr.tree.fwd_of[node])))
    if kind in MEMORY_KINDS and tr.memory_ready and len(tr.memory):  # built in a worker, never here
        _memory_section(tr, node, t)
    other = {k: v for k, v in args.items() if k not in LAUNCH_KEYS and k not in
             ("Input Dims", "Input type", "Input Strides", "kernel_file", "kernel_kwargs", "num_warps", "num_stages")}
    if other:
        t.append("\nargs\n", style="bold")
        for k, v in list(other.items())[:20]:
            _line(t, str(k), plain(str(v)[:200]))
    t.append("\npath\n", style="bold")
    if node == 0:
        t.append("  (the trace itself: the top of the tree)\n", style="dim")
    for i, p in enumerate(tr.tree.path(node)[1:]):
        t.append("  " * i + "└ ", style="dim")
        t.append(plain(shorten_cpp(tr.name(p))[:100]))
        t.append("\n")
    return t


def _load_section(tr: Trace, t: Text) -> None:
    """What loading repaired and what the tree counted but could not place: the status line's
    'N diagnostics, M repairs', spelled out."""
    if tr.report.repairs:
        t.append("\nrepairs (the file was damaged)\n", style="bold yellow")
        for r in tr.report.repairs:
            t.append(plain(f"  ! {r}"))
            t.append("\n")
    lines = diagnostic_lines(tr.tree.diagnostics)
    t.append("\ndiagnostics\n" if lines else "\ndiagnostics: none\n", style="bold")
    examples = dict(diagnostic_examples(tr))
    for label, v, meaning in lines:
        t.append(plain(f"  {label}: {v}"))
        t.append("\n")
        if meaning:
            t.append(f"    {meaning}\n", style="dim")
        if label in examples:
            t.append("    example: ", style="dim")
            t.append(plain(shorten_cpp(tr.name(examples[label]))[:60]))
            t.append(" (D jumps to it)\n", style="dim")
    if examples:
        t.append("  D again: the example of each diagnostic in turn\n", style="dim")


def diagnostic_examples(tr: Trace) -> list[tuple[str, int]]:
    """(diagnostic label, its first example node) for each diagnostic tied to nodes, in the
    order the pane lists them; computed once per trace."""
    got = getattr(tr, "_diagnostic_examples", None)
    if got is None:
        from tracetui.model.examples import diagnostic_nodes
        nodes = diagnostic_nodes(tr)
        def first(v):  # a node the tree shows with its Python frames hidden, where there is one
            shown = v[tr.tree.kind[v] != K["python"]]
            return int(shown[0] if shown.size else v[0])
        got = [(label, first(nodes[key])) for key, (label, _, _) in
               ((k, ln) for k in nodes for ln in diagnostic_lines({k: tr.tree.diagnostics.get(k, 0)}))
               if nodes[key].size]
        order = [label for label, _, _ in diagnostic_lines(tr.tree.diagnostics)]
        got.sort(key=lambda x: order.index(x[0]) if x[0] in order else len(order))
        tr._diagnostic_examples = got
    return got


def _kernel_section(tr: Trace, node: int, args: dict, t: Text) -> None:
    info = tr.kernel_info(node)
    t.append("\nkernel\n", style="bold")
    _line(t, "library", info.library)
    _line(t, "class", info.klass)
    if info.reason:  # the taxonomy rule that gave the class (tracetui/model/taxonomy.py)
        _line(t, "why", info.reason)
    if info.variant:
        _line(t, "Inductor kind", info.variant)
    for label, v in (("tile", info.tile), ("layout", info.layout), ("dtype", info.dtype), ("arch", info.arch)):
        if v:
            _line(t, label, v)
    if info.fused_ops:
        _line(t, "fused ops", ", ".join(info.fused_ops) + (" (name truncated)" if info.truncated else ""))
    if info.hint_op:
        _line(t, "functor", info.hint_op)
    t.append("\nlaunch\n", style="bold")
    for k, (label, unit) in LAUNCH_LABELS.items():
        if k in args:
            if k == OCCUPANCY and _is_zero(args[k]):  # Kineto's placeholder: a kernel that ran had warps resident
                _line(t, label, Text("- (not estimated)", style="dim"))
                continue
            _line(t, label, plain(str(args[k]) + unit))
    launcher = tr.launcher(node)
    op = tr.launching_op(node)
    t.append("\nlaunched by (o jumps there)\n", style="bold")
    if launcher is not None:
        _line(t, "runtime call", plain(tr.name(launcher)))
    _line(t, "ATen op", plain(tr.name(op)) if op is not None else Text("none: launched outside any op", style="yellow"))
    mod = tr.scope_module(node)
    if mod is not None:
        _line(t, "module", plain(tr.name(mod)))
    if op is not None:
        op_args = tr.args(op)
        if "kernel_file" in op_args:  # Inductor records the generated source on the launching cpu_op
            _line(t, "source", plain(str(op_args["kernel_file"])))
        roof = estimate(tr.name(op), op_args, tr.tree.dur[node] / 1e9)
        if roof:
            t.append(f"\nroofline ({roof.what})\n", style="bold")
            peak = peak_for(tr.device_name)
            if roof.flops:
                _line(t, "FLOPs", f"{roof.flops / 1e9:,.2f} GFLOP → {roof.tflops:,.1f} TFLOP/s"
                      + (f" ({100 * roof.tflops / peak[0]:.0f}% of {peak[0]:.0f} peak bf16)" if peak else ""))
            if roof.bytes:
                _line(t, "bytes", f"{roof.bytes / 1e6:,.1f} MB → {roof.tbps:,.2f} TB/s"
                      + (f" ({100 * roof.tbps / peak[1]:.0f}% of {peak[1]:.2f} TB/s peak)" if peak else ""))
            if roof.flops and roof.bytes and peak:
                ai = roof.flops / roof.bytes
                ridge = peak[0] * 1e12 / (peak[1] * 1e12)
                _line(t, "bound", f"{'compute' if ai > ridge else 'memory'} ({ai:,.0f} FLOP/B vs ridge {ridge:,.0f})")


def _step_section(tr, node: int, t: Text) -> None:
    """The step's window breakdown: every thread and stream, idle split, verdict."""
    b = tr.step_breakdown(node)
    win = max(b["window_ns"], 1)
    pct = lambda ns: f"{100 * ns / win:.0f}%"  # noqa: E731
    t.append("step window (all threads and streams)\n", style="bold")
    _line(t, "window", f"{fmt_us(b['window_ns'])} (host {fmt_us(b['cpu_ns'])}, {b['threads']} thread{'s' if b['threads'] != 1 else ''})")
    if not tr.has_gpu:  # a CPU-only trace: no "GPU idle 100%: host wait" for a GPU that is not there
        _line(t, "GPU", "none in this trace (CPU only)")
        _line(t, "verdict", b["verdict"], "bold yellow")
        t.append("\n")
        return
    lab = tr.step_labels.get(node)
    if lab is not None:
        _line(t, "phase", f"{lab.text} ({lab.engine} annotation)", "cyan")
    gaps = tr.graph_gaps.by_step.get(node)
    if gaps is not None and gaps.incomplete:  # the record is not whole: no idle, busy or verdict as if it were
        _line(t, "CUDA graphs", gaps.note(), "yellow")
        _line(t, "GPU recorded", f"{fmt_us(b['device_ns'])} in {b['kernels']} kernels (not the step's whole work)")
        _line(t, "verdict", b["verdict"], "bold yellow")
        t.append("\n")
        return
    if gaps is not None:
        _line(t, "CUDA graphs", f"{gaps.launches} launch(es), kernels linked: replays attributed exactly")
    _line(t, "GPU busy", f"{fmt_us(b['busy_ns'])} ({pct(b['busy_ns'])}), {b['kernels']} kernels")
    if b["other_steps_ns"]:  # work this step did not launch: an earlier step's, or launched outside every step
        whose = "launched outside this step" if len(tr.steps) == 1 else "launched by other steps or outside any step"
        _line(t, "other work", f"{fmt_us(b['other_steps_ns'])} ({pct(b['other_steps_ns'])}): GPU work {whose}")
    sp = b["idle_split_ns"]
    _line(t, "GPU idle", f"{fmt_us(b['idle_ns'])} ({pct(b['idle_ns'])}): host wait {fmt_us(sp['host_wait'])}, "
                         f"kernel wait {fmt_us(sp['kernel_wait'])}, other {fmt_us(sp['other'])}")
    for c, v in sorted(b["busy_by_class_ns"].items(), key=lambda x: -x[1]):
        _line(t, f"  {c}", fmt_us(v))
    if b["comm_ns"]:
        _line(t, "communication", f"exposed {fmt_us(b['comm_exposed_ns'])}, overlapped {fmt_us(b['comm_overlapped_ns'])}")
    _line(t, "launch CPU", f"{fmt_us(b['launch_cpu_ns'])} in {b['launches']} launches")
    _line(t, "sync CPU", f"{fmt_us(b['sync_cpu_ns'])} in {b['syncs']} calls")
    _line(t, "verdict", b["verdict"], "bold yellow")
    t.append(plain(f"  {b['verdict_reason']}", "dim"))
    t.append("\n")


def _memory_section(tr: Trace, node: int, t: Text) -> None:
    """What the node allocated and freed per device (self: as the innermost op), and the fate of
    its largest allocations: freed when and by what, or never freed in the trace."""
    from tracetui.model.memory import fmt_bytes  # noqa: PLC0415
    mem = tr.memory
    got = mem.of_node(node)
    if not got:
        return
    t.append("\nmemory (allocated / freed; self = as the innermost op)\n", style="bold")
    for dev, f in got.items():
        _line(t, dev, f"allocated {fmt_bytes(f['alloc_bytes'])} in {f['allocs']:,}, freed "
                      f"{fmt_bytes(f['freed_bytes'])} in {f['frees']:,} (net {fmt_bytes(f['alloc_bytes'] - f['freed_bytes'])})")
        if f["self_allocs"] or f["self_frees"]:
            _line(t, "  self", f"allocated {fmt_bytes(f['self_alloc_bytes'])} in {f['self_allocs']:,}, "
                               f"freed {fmt_bytes(f['self_freed_bytes'])} in {f['self_frees']:,}")
        blocks = f["blocks"]
        blocks = blocks[np.argsort(-mem.nbytes[blocks], kind="stable")][:MEMORY_BLOCKS]
        for i in blocks.tolist():
            j = int(mem.pair[i])
            if j >= 0:
                fate = Text(f"freed after {fmt_us(int(mem.ts[j] - mem.ts[i])) if mem.ts[j] > mem.ts[i] else '0'} in ")
                fate.append(plain(mem.label(mem.op[j]) if mem.op[j] >= 0 else mem.label(mem.node[j])))
            else:
                fate = Text("never freed in the trace", style="yellow")
            line = plain(mem.label(mem.op[i])[:40])
            line.append(" · ")
            line.append(fate)
            _line(t, fmt_bytes(int(mem.nbytes[i])), line)
