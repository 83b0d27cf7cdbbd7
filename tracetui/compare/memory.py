"""The memory diff: what changed in memory from trace A to trace B (both with ``[memory]`` events).

Per step and per device (the k-th step of A against the k-th of B; the whole trace when either
has no steps):

- **peak**: each side's highest ``Total Allocated`` in the step's host interval, counting the
  level carried into it (``memory_stats.Peaks.peak``), and its change;
- **what holds memory at each peak**: the allocations live there, made in the step, grouped by
  nn.Module scope and ATen op; and one row for everything allocated before the step began and
  still live at the peak (weights, optimizer state, activations kept, memory from before the
  trace: the peak less the step's own live allocations). The rows of a side add up to its peak.
  A vs B per (module, op), the largest changes first; per op alone when only one side records
  module scopes (``with_stack``/``with_modules`` frames): the other's allocations would all sit
  under "-", and the same allocations under two labels read as -64/+32/+32 KiB of change;
- **per op**: self allocations (count and bytes, per step; child ops not counted, so the rows add
  up) A vs B;
- **no longer allocated**: ops that allocate in A and not at all in B, with the fused kernel of
  B that took the op's kernels over when the kernel diff says so (an intermediate a fusion removed).

Everything is data (dicts of ints and strings); ``report/`` prints it. Imports model/ only.
"""
from __future__ import annotations

import numpy as np

from tracetui.model.memory import TOP_DEFAULT

BEFORE_STEP = "(allocated before the step)"
"""The holder row of memory live at the peak that the step did not allocate."""


def memory_compare(a, b, top: int = TOP_DEFAULT, fusions: list | None = None) -> dict | None:
    """The memory diff of two loaded traces (module docstring); None unless both have
    ``[memory]`` events. ``fusions``: the kernel diff's ``DiffResult.fusions`` (optional), to say
    which fused kernel removed an intermediate. ``top`` caps each list (0: all)."""
    if not len(a.store.memory) or not len(b.store.memory):
        return None
    ma, mb = a.memory, b.memory
    devices = [d for d in ma.devices if d in mb.devices]
    scoped = [side for side, m in (("A", ma), ("B", mb)) if bool((m.module >= 0).any())]
    by_module = len(scoped) == 2
    steps = []
    for label in devices:
        da, db = ma.device_of(label), mb.device_of(label)
        for (na, wa), (nb, wb) in zip(_windows(a), _windows(b)):
            pa, pb = _side(ma, da, wa, by_module), _side(mb, db, wb, by_module)
            if pa is None or pb is None:
                continue
            steps.append({"device": label, "a_step": na, "b_step": nb, "a_peak_bytes": pa["peak"],
                          "b_peak_bytes": pb["peak"], "change_bytes": pb["peak"] - pa["peak"],
                          "a_peak_us": pa["ts"] / 1e3, "b_peak_us": pb["ts"] / 1e3,
                          "holders": _holder_changes(pa["rows"], pb["rows"])})
    per = a.n_steps > 0 and b.n_steps > 0
    ops = _op_changes(a, b, ma, mb, per)
    gone = _no_longer(ops, fusions or [])
    full = {"per_step": per, "modules": {"compared": by_module, "recorded_by": scoped},
            "devices": devices, "steps": steps, "ops": ops,
            "no_longer_allocated": gone, "peaks": _overall(ma, mb, devices)}
    return capped(full, top)


def capped(mem: dict, top: int) -> dict:
    """``mem`` (``memory_compare(top=0)``) with each step's holders, the ops and what is no
    longer allocated cut to ``top`` rows (0: all): what ``memory_compare(top=top)`` returns, so a
    caller can hold both and say what the cap cut (report/caps.py) without a second compare."""
    if not top:
        return mem
    return {**mem, "steps": [{**s, "holders": _cut(s["holders"], top)} for s in mem["steps"]],
            "ops": _cut(mem["ops"], top), "no_longer_allocated": _cut(mem["no_longer_allocated"], top)}


def _cut(rows: list, top: int) -> list:
    return rows[:top] if top else rows


def _windows(t) -> list[tuple[str, tuple | None]]:
    """(name, (lo, hi) ns) per step, in order; the whole trace as one window without steps."""
    if not t.steps:
        return [("whole trace", None)]
    out = []
    for s in t.steps:
        w = t.step_window(s)
        out.append((t.name(s), (int(w.start), int(w.end))))
    return out


def _side(mem, d: int, win: tuple | None, by_module: bool = True) -> dict | None:
    """One side's peak in a window and its holder rows: {(module, op): (bytes, count)} (module "-"
    unless ``by_module``), with the memory allocated before the window as its own row; the rows
    sum to the peak."""
    lo, hi = win if win is not None else (None, None)
    p = mem.peak(d, lo, hi)
    if p is None:
        return None
    live = p.live
    own = live[mem.ts[live] >= lo] if lo is not None else live
    rows: dict = {}
    for i in own.tolist():
        key = (mem.module_label(i) if by_module else "-", mem.label(mem.op[i]))
        nb, n = rows.get(key, (0, 0))
        rows[key] = (nb + int(mem.nbytes[i]), n + 1)
    before = p.allocated - int(mem.nbytes[own].sum())
    rows[(BEFORE_STEP, "-")] = (before, int(live.size - own.size))
    return {"peak": p.allocated, "ts": p.ts, "rows": rows}


def _holder_changes(ra: dict, rb: dict) -> list[dict]:
    """A vs B per (module, op) holder, the largest change first (ties: the bigger side first)."""
    out = []
    for key in set(ra) | set(rb):
        (ab, an), (bb, bn) = ra.get(key, (0, 0)), rb.get(key, (0, 0))
        out.append({"module": key[0], "op": key[1], "a_bytes": ab, "b_bytes": bb, "change_bytes": bb - ab,
                    "a_count": an, "b_count": bn})
    out.sort(key=lambda r: (-abs(r["change_bytes"]), -max(r["a_bytes"], r["b_bytes"]), r["module"], r["op"]))
    return out


def _op_changes(a, b, ma, mb, per: bool) -> list[dict]:
    """Self allocations (count, bytes) per (device, op) per step, A vs B, the largest byte change
    first; rows equal on both sides are left out."""
    def table(t, mem) -> dict:
        div = t.n_steps if per else 1
        return {(s.device, s.name): (s.self_alloc_count / div, s.self_alloc_bytes / div) for s in mem.op_stats()
                if s.self_alloc_count}
    ta, tb = table(a, ma), table(b, mb)
    rows = []
    for key in set(ta) | set(tb):
        (ac, ab), (bc, bb) = ta.get(key, (0, 0)), tb.get(key, (0, 0))
        if (ac, ab) != (bc, bb):
            rows.append({"device": key[0], "op": key[1], "a_allocs": ac, "b_allocs": bc, "a_bytes": round(ab),
                         "b_bytes": round(bb), "change_bytes": round(bb - ab)})
    rows.sort(key=lambda r: (-abs(r["change_bytes"]), r["device"], r["op"]))
    return rows


def _no_longer(ops: list[dict], fusions: list) -> list[dict]:
    """Ops that allocate in A and not in B, with the fused kernel that took their kernels over."""
    into: dict = {}
    for f in fusions:
        if len(f.replaces) + (f.gemm is not None) > 1:  # a fusion proper (one for one is a replacement)
            for x in f.replaces:
                if x.op:
                    into.setdefault(x.op, f.kernel.name)
    out = [{"device": r["device"], "op": r["op"], "a_bytes": r["a_bytes"], "a_allocs": r["a_allocs"],
            "fused_into": into.get(r["op"])}
           for r in ops if r["a_bytes"] > 0 and r["b_bytes"] == 0]
    out.sort(key=lambda r: (r["fused_into"] is None, -r["a_bytes"], r["op"]))
    return out


def _overall(ma, mb, devices: list[str]) -> list[dict]:
    """Each shared device's peak over the whole trace, A vs B."""
    out = []
    for label in devices:
        pa, pb = ma.peak(ma.device_of(label)), mb.peak(mb.device_of(label))
        out.append({"device": label, "a_bytes": pa.allocated, "b_bytes": pb.allocated,
                    "change_bytes": pb.allocated - pa.allocated})
    return out


def holders_total(entry: dict, side: str) -> int:
    """The sum of one side's holder rows of a step entry (equals its peak when nothing was cut)."""
    return int(np.sum([r[f"{side}_bytes"] for r in entry["holders"]]))
