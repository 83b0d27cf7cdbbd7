"""``tracetui diff A B``: totals that reconcile, the biggest changes, fusion, the aligned kernels."""
from __future__ import annotations

from tracetui.report.host_step import host_pair, per_step
from tracetui.report.memory import emit_memory_diff
from tracetui.report.output import write_json, emit_report, write_line, short_name, shown
from tracetui.shorten import column, fit_arrow, name_room
from tracetui.textsafe import visible


def print_diff(d, as_json: bool = False, write=None, top: int = 10, rows: bool = True,
               fmt: str | None = None, table: str | None = None, head: list | None = None,
               extra: dict | None = None) -> None:
    """Print the diff report (or hand each line to ``write``, as the app does): totals that
    reconcile, the biggest changes by kind (``top`` per kind; 0: all), then fusion details and the
    full aligned list (``rows``). ``fmt`` json/csv/md writes the data instead (``table`` picks one).
    ``head``: lines the text opens with (the verdict); ``extra``: keys added to the JSON."""
    fmt = fmt or ("json" if as_json else "text")
    sink = write or write_line

    def emit(line: str) -> None:  # the app shows these lines too: the same guard for both
        sink(shown(line))
    from tracetui.compare.changes import diff_dict
    from tracetui.compare.memory import capped, memory_compare
    j = diff_dict(d)
    full = memory_compare(d.a, d.b, top=0, fusions=d.fusions)  # only when both traces have [memory] instants
    mem = capped(full, top) if full is not None else None
    if full is not None:
        j["memory"] = full  # uncut: the JSON's cap note compares against it
    if fmt != "text":
        out = diff_dict(d, top=top) if top else j
        if mem is not None:
            out["memory"] = mem
        if extra and fmt == "json":
            out.update(extra)
        if fmt == "json":
            write_json(out)
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
    fusion_lines(j, top, emit)
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
        emit("\nkernels per step (aligned; Δ = what the row adds to B)")
        emit(f"  {'A µs':>9s} {'B µs':>9s} {'Δ µs':>9s}  {'status':8s}  kernel  (why)")
        names = column([visible(k["name"]) for k in j["kernels"]], used=2 + 30 + 12, short=short_name)
        for k, name in zip(j["kernels"], names):
            au = f"{k['a_us']:9.1f}" if k["a_us"] is not None else " " * 9
            bu = f"{k['b_us']:9.1f}" if k["b_us"] is not None else " " * 9
            why = k["reason"] or k["detail"] or ("unexplained" if k["status"] in ("added", "removed") else "")
            extra = f"  ({visible(why)})" if why else ""
            emit(f"  {au} {bu} {k['delta_us']:+9.1f}  {k['status']:8s}  {name}{extra}")

    if mem is not None:
        emit_memory_diff(mem, emit)



def _name(name: str, used: int = 2) -> str:
    """One kernel's name in a text line: whole into a pipe or file, else fitted to the terminal."""
    return column([visible(name)], used, short=short_name)[0]


def fusion_lines(j: dict, top: int, emit) -> None:
    """The fusion part of the diff text: each fused kernel with what it replaced, and each undone."""
    if j["fused"]:
        emit("\nfusion (each instance; replaced kernels of A, in launch order):")
        for f in j["fused"][: top * 3 if top else None]:
            emit(f"  {_name(f['kernel'])} replaces {len(f['replaces'])} kernel(s) "
                 f"(ops {', '.join(f['ops'])}; matched by {f['matched_by']}"
                 + (f"; block {', '.join(f['blocks_a'])}" if f["blocks_a"] else "") + "):")
            if f.get("evidence"):
                emit(f"    evidence: {visible(f['evidence'])}")
            if f["gemm"]:
                emit(f"    = {_name(f['gemm'], 6)}  (the GEMM it replaced)")
            for r, name in zip(f["replaces"], column([visible(r) for r in f["replaces"]], 6, short=short_name)):
                emit(f"    - {name}")
            gain = f"saves {f['saved_us']:.1f} µs" if f["saved_us"] >= 0 else f"costs {-f['saved_us']:.1f} µs more"
            emit(f"    {gain} and saves {f['launches_saved']} launch(es) per step"
                 + (f"; intermediate no longer in HBM: {f['intermediate_bytes'] / 1e6:.1f} MB "
                    f"({f['hbm_traffic_saved_bytes'] / 1e6:.1f} MB of traffic)" if f["intermediate_bytes"] else ""))
        if top and len(j["fused"]) > top * 3:
            emit(f"  … {len(j['fused']) - top * 3} more (--top 0 lists all)")
    if j.get("unfused"):
        emit("\nfusion undone (a kernel of A that B runs as several, in launch order):")
        for f in j["unfused"][: top * 3 if top else None]:
            emit(f"  {_name(f['kernel'])} runs as {len(f['parts'])} kernel(s) (matched by "
                 f"{f['matched_by']}): {f['a_us']:.1f} → {f['b_us']:.1f} µs per step")
            if f["evidence"]:
                emit(f"    evidence: {visible(f['evidence'])}")
            for name in column([visible(p) for p in f["parts"]], 6, short=short_name):
                emit(f"    + {name}")


def host_step_text(a: dict, b: dict) -> str:
    """"1,287.7 → 1,070.6 µs (the step markers' wall time)", or "-" and why when a side has no
    step markers (``host_step.host_pair``: its ``cpu_us_per_step`` is None)."""
    return host_pair(a, b, unit=" µs (the step markers' wall time)")


def launches_text(saved: int) -> str:
    """Launches saved per step, or, where B launches more, how many more ('launches saved -127' read
    as a typo)."""
    return f"launches saved {saved}" if saved >= 0 else f"{-saved} more launches"


def _count(n: float | None) -> str:
    """A count per step: whole where it is, else one decimal (a mean over steps: '959.3', not '959.333');
    "-" for None (no step markers)."""
    if n is None:
        return per_step(n)
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def diff_header(j: dict) -> list[str]:
    """The per-step totals of a diff, reconciled: rows sum to the delta, launches to the counts."""
    a, b, t = j["a"], j["b"], j["totals"]
    alike = ""
    if a["steps_alike"] < a["steps"] or b["steps_alike"] < b["steps"]:
        alike = f" (steps alike: A {a['steps_alike']}/{a['steps']}, B {b['steps_alike']}/{b['steps']})"
    gpu = bool(a["device"] or b["device"] or a.get("gpu") or b.get("gpu"))
    dev = "device" if gpu else "compute (CPU ops)"
    saved = f" ({launches_text(t['launches_saved'])})" if gpu else ""  # CPU ops launch nothing
    if not a["steps"] or not b["steps"]:  # _side counts such a trace as one step
        alike += " (a trace without step markers counts whole, as one step)"
    out = [f"per step{alike}: {dev} {t['device_us_a']:,.1f} → {t['device_us_b']:,.1f} µs "
           f"({t['device_delta_us']:+,.1f}; rows sum to {t['rows_delta_us']:+,.1f}), "
           f"{'kernels' if gpu else 'compute ops'} {t['kernels_a']} → {t['kernels_b']}{saved}, "
           f"host time {host_step_text(a, b)}"]
    if a["memcpy_memset_per_step"] or b["memcpy_memset_per_step"]:  # None: no step markers ("-")
        out.append(f"  memcpy/memset (not in the rows): {_count(a['memcpy_memset_per_step'])} → "
                   f"{_count(b['memcpy_memset_per_step'])} per step, {per_step(a['memcpy_memset_us_per_step'], '.1f')}"
                   f" → {per_step(b['memcpy_memset_us_per_step'], '.1f')} µs")
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
        total = sum(c["delta_us"] for c in group)
        if kind == "cpu":  # not the headline's host time: self time summed over every host thread
            a_tot, b_tot = sum(c["a_us"] for c in group), sum(c["b_us"] for c in group)
            out.append(f"\n{group[0]['label']}: {total:+,.1f} µs per step ({a_tot:,.1f} → {b_tot:,.1f} µs of the "
                       "names that changed; self time summed over every host thread; the rows add up to it)")
        else:
            out.append(f"\n{group[0]['label']}: {total:+,.1f} µs per step")
        for c in group[: top or None]:
            rep = f"  [{c['repeat']}]" if c["repeat"] else ""
            why = f"  ({c['detail']})" if c["detail"] and kind in ("added", "removed", "implementation") else ""
            if kind in ("added", "removed") and not c["detail"]:
                why = "  (unexplained)"
            room = name_room(14 + len(rep) + min(len(why), 40))
            out.append(f"  {c['delta_us']:+10.1f}  {fit_arrow(visible(c['title']), room)}{rep}{visible(why)}")
        if top and len(group) > top:
            rest = sum(c["delta_us"] for c in group[top:])
            out.append(f"  {rest:+10.1f}  … {len(group) - top} more")
    return out
