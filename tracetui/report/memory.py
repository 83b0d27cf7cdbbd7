"""``tracetui memory``: peaks per device and step, what held them, the per-op table; and the
memory part of a diff."""
from __future__ import annotations

from tracetui.model.trace import Trace
from tracetui.report.output import US, emit_report, write_line
from tracetui.shorten import column
from tracetui.textsafe import visible


def emit_memory_diff(mem: dict, emit) -> None:
    from tracetui.model.memory import fmt_bytes
    emit("\nmemory (peak per device, A → B):")
    for p in mem["peaks"]:
        emit(f"  {p['device']:>6} {fmt_bytes(p['a_bytes']):>12} → {fmt_bytes(p['b_bytes']):>12}  "
             f"({'+' if p['change_bytes'] >= 0 else '-'}{fmt_bytes(abs(p['change_bytes']))})")
    if mem["ops"]:
        emit(f"  largest per-op changes in allocation size{' per step' if mem['per_step'] else ''} (A → B):")
        for o, name in zip(mem["ops"], column([visible(o["name"]) for o in mem["ops"]], 2 + 6 + 1 + 12 + 3 + 12 + 2)):
            emit(f"  {o['device']:>6} {fmt_bytes(o['a_allocation_bytes']):>12} → {fmt_bytes(o['b_allocation_bytes']):>12}  "
                 f"{name}")


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
