"""``tracetui memory``: peaks per device and step, what held them, the per-op table; and the
memory part of a diff."""
from __future__ import annotations

from tracetui.model.trace import Trace
from tracetui.report.output import US, emit_report, write_line
from tracetui.shorten import column
from tracetui.textsafe import visible


def _signed(n: int) -> str:
    from tracetui.model.memory import fmt_bytes
    return ("+" if n >= 0 else "-") + fmt_bytes(abs(n))


def emit_memory_diff(mem: dict, emit) -> None:
    """The memory diff as text (``compare.memory.memory_compare``'s dict): each step's peak per
    device A → B and what held it, per-op self allocations, the allocations no longer made."""
    from tracetui.model.memory import fmt_bytes
    emit("\nmemory: peak per device and step, A → B (k-th step of A against the k-th of B), and what held it"
         " (rows add up to the peak; largest changes first)")
    scopes = mem.get("modules") or {}
    if len(scopes.get("recorded_by", [])) == 1:
        emit(f"  holders by op alone: only {scopes['recorded_by'][0]} records nn.Module scopes (with_modules)")
    last = None
    for s in mem["steps"]:
        step = visible(s["a_step"]) if s["a_step"] == s["b_step"] else f"{visible(s['a_step'])} / {visible(s['b_step'])}"
        same = (s["device"], s["a_peak_bytes"], s["b_peak_bytes"], s["holders"])
        if last is not None and same == last[0]:  # steps alike: said once
            emit(f"  {step} {s['device']}: as {last[1]}")
            continue
        last = (same, step)
        emit(f"  {step} {s['device']}: peak {fmt_bytes(s['a_peak_bytes'])} → {fmt_bytes(s['b_peak_bytes'])}"
             f" ({_signed(s['change_bytes'])})")
        wheres = [visible(r["module"]) + ("" if r["op"] == "-" else f" · {visible(r['op'])}") for r in s["holders"]]
        for r, where in zip(s["holders"], column(wheres, 4 + 12 + 3 + 12 + 1 + 13 + 2)):
            emit(f"    {fmt_bytes(r['a_bytes']):>12} → {fmt_bytes(r['b_bytes']):>12} {_signed(r['change_bytes']):>13}  {where}")
    if mem["ops"]:
        emit(f"  self allocations per op{' per step' if mem['per_step'] else ''} (count, bytes), A → B, largest change first:")
        for o, name in zip(mem["ops"], column([visible(o["op"]) for o in mem["ops"]], 2 + 6 + 1 + 7 + 3 + 7 + 1 + 12 + 3 + 12 + 2)):
            emit(f"  {o['device']:>6} {o['a_allocs']:>7,.0f} → {o['b_allocs']:<7,.0f} {fmt_bytes(o['a_bytes']):>12} → "
                 f"{fmt_bytes(o['b_bytes']):>12}  {name}")
    if mem["no_longer_allocated"]:
        emit(f"  no longer allocated in B{' (per step)' if mem['per_step'] else ''}: ops of A that allocate and never do in B")
        for o in mem["no_longer_allocated"]:  # whole names: the op and the kernel that took it over
            why = f"  (fused into {visible(o['fused_into'])})" if o["fused_into"] else ""
            emit(f"  {o['device']:>6} {fmt_bytes(o['a_bytes']):>12} in {o['a_allocs']:,.0f} allocation(s)  "
                 f"{visible(o['op'])}{why}")


MEMORY_DIFF_COLUMNS = {
    "steps": ("device", "a_step", "b_step", "a_peak_bytes", "b_peak_bytes", "change_bytes", "a_peak_us", "b_peak_us"),
    "holders": ("device", "a_step", "b_step", "module", "op", "a_bytes", "b_bytes", "change_bytes", "a_count", "b_count"),
    "ops": ("device", "op", "a_allocs", "b_allocs", "a_bytes", "b_bytes", "change_bytes"),
    "no_longer_allocated": ("device", "op", "a_bytes", "a_allocs", "fused_into"),
    "peaks": ("device", "a_bytes", "b_bytes", "change_bytes"),
}
"""The memory diff's csv/md tables and their columns (written even when a table is empty)."""


def print_memory_diff(a: Trace, b: Trace, top: int = 10, fmt: str = "text", table: str | None = None) -> None:
    """``tracetui memory A B``: the memory diff (``compare.memory``), with the kernel diff's
    fusions to say which fused kernel removed an intermediate. JSON sizes are integer bytes."""
    from tracetui.compare.diff import diff_traces
    from tracetui.compare.memory import capped, memory_compare
    from tracetui.report.export import report_tables
    full = memory_compare(a, b, top=0, fusions=diff_traces(a, b).fusions)
    mem = capped(full, top) if full is not None else None
    missing = [str(t.path) for t in (a, b) if not len(t.store.memory)]
    if mem is None and fmt == "text":
        write_line(f"no [memory] events in {visible(', '.join(missing))}: record with "
                   "torch.profiler.profile(profile_memory=True)")
        return
    if mem is None:  # the same keys, empty: a script reads one schema
        mem = {"per_step": False, "modules": {"compared": False, "recorded_by": []}, "devices": [], "steps": [],
               "ops": [], "no_longer_allocated": [], "peaks": []}
    doc = {"a": str(a.path), "b": str(b.path), "no_memory_events": missing, **mem}
    if fmt == "json":
        emit_report(doc, fmt)
        if top and full is not None:  # the cap said on stderr (tracetui/report/caps.py)
            from tracetui.report.caps import note_truncated, walk_caps
            note_truncated(walk_caps(mem, full))
        return
    if fmt != "text":
        flat = {"a": doc["a"], "b": doc["b"], "per_step": mem["per_step"],
                "steps": [{k: v for k, v in s.items() if k != "holders"} for s in mem["steps"]],
                "holders": [{"device": s["device"], "a_step": s["a_step"], "b_step": s["b_step"], **r}
                            for s in mem["steps"] for r in s["holders"]],
                "ops": mem["ops"], "no_longer_allocated": mem["no_longer_allocated"], "peaks": mem["peaks"]}
        tabs = report_tables(flat, columns=MEMORY_DIFF_COLUMNS)
        emit_report(flat, fmt, table=table, first="steps", tables=tabs, title=f"tracetui memory: {a.path.name} → {b.path.name}")
        return
    write_line(f"A: {visible(str(a.path))}\nB: {visible(str(b.path))}")
    emit_memory_diff(mem, write_line)


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
    write_line(f"{t.path.name}: {j['instants']:,} memory instants")
    if not j["instants"]:
        write_line("no [memory] events: record with torch.profiler.profile(profile_memory=True)")
        return
    for d in j["devices"]:
        write_line(f"\n{d['device']}: peak {b(d['peak_bytes'])} at {at(d['peak_us'])}"
             f" (reserved there {fmt_bytes(d['peak_reserved_bytes'])}, most reserved {fmt_bytes(d['max_reserved_bytes'])})")
        write_line(f"  {d['allocations']:,} allocations: {d['paired']:,} freed in the trace, {d['never_freed']:,} never freed "
             f"({fmt_bytes(d['never_freed_bytes'])}); {d['unmatched_frees']:,} frees of memory allocated before it")
        write_line(f"  held at the peak: {d['live_at_peak']:,} allocations made in the trace, "
             f"{fmt_bytes(d['held_before_bytes'])} allocated before it")
        for by in ("op", "module", "step"):
            rows = d["holders"][by]
            if rows and not (len(rows) == 1 and rows[0][by] == "-"):
                write_line(f"    by {by}:")
                for r in rows:
                    write_line(f"      {fmt_bytes(r['bytes']):>12} {r['count']:>6}  {r[by]}")
        if d["never_freed_blocks"]:
            write_line("  never freed (largest):")
            for r in d["never_freed_blocks"]:
                write_line(f"      {fmt_bytes(r['bytes']):>12}  {r['op']}  ·  {r['module']}  ·  {r['step']}  at {at(r['ts_us'])}")
    if j["steps"]:
        write_line("\nper step (peak inside the step's host interval; top holder by op):")
        w = max([16] + [len(s["name"]) for s in j["steps"]])  # a step's name is never cut
        for s in j["steps"]:
            top_op = s["holders"]["op"][0] if s["holders"]["op"] else None
            held = f"  top: {top_op['op']} {fmt_bytes(top_op['bytes'])}" if top_op else ""
            write_line(f"  {s['name']:{w}s} {s['device']:>5} {fmt_bytes(s['peak_bytes']):>12}{held}")
    write_line("\nper op (TensorBoard plugin definitions; self = not counting child ops):")
    write_line(f"  {'device':>6} {'calls':>7} {'allocs':>7} {'alloc size':>11} {'self allocs':>11} {'self size':>11} "
         f"{'increase':>11} {'self incr.':>11}  name")
    for o in j["ops"]:
        write_line(f"  {o['device']:>6} {o['calls']:>7,} {o['allocation_count']:>7,} {fmt_bytes(o['allocation_bytes']):>11} "
             f"{o['self_allocation_count']:>11,} {fmt_bytes(o['self_allocation_bytes']):>11} "
             f"{fmt_bytes(o['size_increase_bytes']):>11} {fmt_bytes(o['self_size_increase_bytes']):>11}  {o['name']}")
