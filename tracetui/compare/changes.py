"""What a diff means, biggest first: rows folded into changes, totals that reconcile, the JSON.

A *change* is every row of one kind with the same names on both sides (one fused kernel per
layer is one change, "12× per step, one per block"), with its summed delta per step. Kinds, in
the order the reports show them, each with what it answers:
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from tracetui.compare.diff import DiffResult
from tracetui.compare.fusion import absorbed_ops as _absorbed_ops
from tracetui.compare.items import ANCHOR_CLASSES
from tracetui.compare.ops import cpu_self_total_us
from tracetui.compare.rows import Row
from tracetui.model.names import shorten_cpp

KINDS = (
    ("fusion", "fusion", "a kernel of B that does the work of several of A (Inductor, a hand-written kernel)"),
    ("replacement", "replacement", "one kernel of B doing the work of one kernel of A (another implementation: "
                                   "one launch for one, so not a fusion)"),
    ("unfusion", "fusion undone", "a kernel of A that B runs as several kernels (the mirror of a fusion)"),
    ("implementation", "GEMM/attention implementation", "the same GEMM, attention, conv or collective "
                                                         "run by another kernel (library, tile, Triton template)"),
    ("added", "kernels added", "kernels of B with no counterpart in A, and why"),
    ("removed", "kernels removed", "kernels of A with no counterpart in B that no fused kernel took over"),
    ("timing", "same work, other time", "paired kernels (same name, or same op and class) whose time changed"),
    ("cpu", "CPU self time", "host events (ops, annotations, runtime calls, every thread) whose self time per step "
                             "changed; the rows add up to the section's total"),
)
"""Change kinds: (key, label, what it covers)."""
KIND_LABEL = {k: label for k, label, _ in KINDS}
KIND_ORDER = {k: i for i, (k, _, _) in enumerate(KINDS)}


@lru_cache(maxsize=4096)
def short(name: str) -> str:
    return shorten_cpp(name) if "<" in name or "(" in name else name


@dataclass
class Change:
    kind: str
    title: str
    delta_us: float          # per step, all instances together (device µs; CPU µs for kind "cpu")
    count: int               # instances per step
    fold: str = ""           # "one per block", "in 3 blocks", ""
    rows: list = field(default_factory=list)   # indices into DiffResult.rows
    launches_saved: int = 0
    detail: str = ""
    a_us: float = 0.0
    b_us: float = 0.0

    @property
    def repeat(self) -> str:
        if self.count <= 1:
            return ""
        return f"{self.count}× per step" + (f", {self.fold}" if self.fold else "")


CHANGED_KINDS: tuple[tuple[str, str, object], ...] = (
    ("timing", "the same kernel on both sides, nothing absorbed: only its time moved (a same-name "
               "NCCL kernel 3x slower is not a new implementation)",
     lambda r: not r.replaces and r.a is not None and r.b is not None and r.a.name == r.b.name),
    ("implementation", "it absorbed other kernels, or an anchor (GEMM, attention, conv, communication) "
                       "changed kernel: another algorithm or library for the same work",
     lambda r: bool(r.replaces) or (r.b or r.a).klass in ANCHOR_CLASSES
     or (r.a is not None and r.a.klass in ANCHOR_CLASSES)),
    ("timing", "anything else paired as changed: a non-anchor kernel renamed, same work", lambda r: True),
)
"""What a ``changed`` row is, first rule that matches: (kind, reason, predicate)."""


def _kind(r: Row) -> str | None:
    if r.claimed:
        return None  # counted in its fused (or unfused) row
    if r.status == "fused":
        return "fusion"
    if r.status == "replaced":
        return "replacement"
    if r.status == "unfused":
        return "unfusion"
    if r.status in ("added", "removed"):
        return r.status
    if r.status == "changed":
        return next(kind for kind, _why, when in CHANGED_KINDS if when(r))
    return None


def _key_title(r: Row, kind: str) -> tuple:
    if kind == "fusion":
        ops = _absorbed_ops_row(r)
        return (kind, r.b.name, tuple(x.name for x in r.replaces)), f"{' + '.join(ops)} → {short(r.b.name)}"
    if kind == "replacement":
        x, y = (r.a, r.parts[0]) if r.b is None else (r.replaces[0], r.b)
        return (kind, x.name, y.name), f"{short(x.name)} → {short(y.name)}"
    if kind == "unfusion":
        ops = _absorbed_ops_row(r)
        return (kind, r.a.name, tuple(y.name for y in r.parts)), f"{short(r.a.name)} → {' + '.join(ops)}"
    if kind == "implementation":
        extra = f" (absorbs {' + '.join(_absorbed_ops_row(r))})" if r.replaces else ""
        names = short(r.a.name) if r.a.name == r.b.name else f"{short(r.a.name)} → {short(r.b.name)}"
        return (kind, r.a.name, r.b.name), names + extra
    if kind == "added":
        return (kind, r.b.name, r.reason), f"+ {short(r.b.name)}"
    if kind == "removed":
        return (kind, r.a.name, r.reason), f"- {short(r.a.name)}"
    return (kind, r.a.name, r.b.name), f"{short(r.a.name)}" + (f" → {short(r.b.name)}" if r.b.name != r.a.name else "")


def _absorbed_ops_row(r: Row) -> list[str]:
    class _F:  # what _absorbed_ops reads
        kernel, replaces = (r.a, r.parts) if r.b is None else (r.b, r.replaces)
    return _absorbed_ops(_F, counted=True)


def _block_of(r: Row) -> str | None:
    for it in ([r.a] if r.a else []) + list(r.replaces) + ([r.b] if r.b else []) + list(r.parts):
        if it is not None and it.block:
            return it.block
    return None


def changes(d: DiffResult) -> list[Change]:
    """Every change of the diff (device rows folded by kind and names, then CPU self-time changes),
    sorted by kind, then by size of the delta per step."""
    groups: dict = {}
    for i, r in enumerate(d.rows):
        kind = _kind(r)
        if kind is None:
            continue
        key, title = _key_title(r, kind)
        c = groups.get(key)
        if c is None:
            c = groups[key] = Change(kind, title, 0.0, 0, detail=r.reason or r.detail
                                     + (f"; evidence: {r.evidence}" if r.evidence else ""))
            c._blocks = []
        c.delta_us += r.delta_ns / 1e3
        c.count += 1
        c.rows.append(i)
        c.launches_saved += r.launches_saved
        c.a_us += ((r.a.dur_ns if r.a else 0) + sum(x.dur_ns for x in r.replaces)) / 1e3
        c.b_us += ((r.b.dur_ns if r.b else 0) + sum(y.dur_ns for y in r.parts)) / 1e3
        c._blocks.append(_block_of(r))
    out = list(groups.values())
    for c in out:
        blocks = [b for b in c._blocks if b]
        if c.count > 1 and len(blocks) == c.count and len(set(blocks)) == c.count:
            c.fold = "one per block"
        elif c.count > 1 and len(set(blocks)) > 1:
            c.fold = f"in {len(set(blocks))} blocks"
        del c._blocks
    for x in d.cpu_changes:
        out.append(Change("cpu", x["name"] + ("  [compile pre-op]" if x["compile_preop"] else ""), x["delta_us"], 1,
                          a_us=x["a_self_us"], b_us=x["b_self_us"]))
    out.sort(key=lambda c: (KIND_ORDER[c.kind], -abs(c.delta_us)))
    return out


def top_changes(cs: list[Change], n: int) -> list[Change]:
    """The ``n`` biggest device changes by |delta| (any kind but CPU)."""
    dev = sorted((c for c in cs if c.kind != "cpu"), key=lambda c: -abs(c.delta_us))
    return dev[:n] if n else dev


def totals(d: DiffResult) -> dict:
    """Per-step figures that reconcile: the row deltas sum to the device-time delta, the launches
    saved to the difference in kernel counts; unexplained rows counted."""
    A, B = d.per_step(d.a), d.per_step(d.b)
    rows_delta = sum(r.delta_ns for r in d.rows) / 1e3
    un_added = sum(1 for r in d.rows if r.status == "added" and not r.explained)
    un_removed = sum(1 for r in d.rows if r.status == "removed" and not r.explained)
    b_rows = [r for r in d.rows if r.b is not None]
    return {
        "device_us_a": A["device_us_per_step"], "device_us_b": B["device_us_per_step"],
        "device_delta_us": B["device_us_per_step"] - A["device_us_per_step"], "rows_delta_us": rows_delta,
        "kernels_a": A["kernels_per_step"], "kernels_b": B["kernels_per_step"],
        "launches_saved": sum(r.launches_saved for r in d.rows),
        "b_kernels_explained": sum(1 for r in b_rows if r.explained), "b_kernels": len(b_rows),
        "unexplained": un_added + un_removed, "unexplained_added": un_added, "unexplained_removed": un_removed,
        "cpu_delta_us": (None if A["cpu_us_per_step"] is None or B["cpu_us_per_step"] is None  # no step markers
                         else B["cpu_us_per_step"] - A["cpu_us_per_step"]),
        "cpu_self_us_a": cpu_self_total_us(d.a), "cpu_self_us_b": cpu_self_total_us(d.b),
        "cpu_self_delta_us": cpu_self_total_us(d.b) - cpu_self_total_us(d.a),
        "weight_repack_us_b": sum(r.b.dur_ns for r in b_rows if r.rule == "weight repack") / 1e3,
        "weight_repack_us_a": sum(r.a.dur_ns for r in d.rows if r.a is not None and r.b is None
                                  and r.rule == "weight repack") / 1e3,
    }


def change_dict(c: Change) -> dict:
    return {"kind": c.kind, "label": KIND_LABEL[c.kind], "title": c.title, "delta_us": c.delta_us, "count": c.count,
            "repeat": c.repeat, "a_us": c.a_us, "b_us": c.b_us, "launches_saved": c.launches_saved,
            "detail": c.detail, "rows": c.rows}


def _item_us(i) -> float | None:
    return i.dur_ns / 1e3 if i else None


def _several(f) -> bool:
    """A fusion proper: its kernel does the work of two or more kernels (a template's GEMM counts)."""
    return len(f.replaces) + (f.gemm is not None) > 1


def _replacement(f, forward: bool) -> dict:
    """One kernel for one: A's kernel and B's, their times per step, and what showed it is the same work."""
    x, y = (f.replaces[0], f.kernel) if forward else (f.kernel, f.replaces[0])
    return {"a_kernel": x.name, "b_kernel": y.name, "a_us": x.dur_ns / 1e3, "b_us": y.dur_ns / 1e3,
            "delta_us": (y.dur_ns - x.dur_ns) / 1e3, "matched_by": f.how, "evidence": f.evidence}


def diff_dict(d: DiffResult, top: int = 0) -> dict:
    """The JSON report (schema in README). ``top`` caps the changes list (0: all)."""
    cs = changes(d)
    return {
        "a": d.per_step(d.a), "b": d.per_step(d.b), "totals": totals(d),
        "changes": [change_dict(c) for c in (top_changes(cs, top) + [c for c in cs if c.kind == "cpu"][:top]
                                             if top else cs)],
        "kernels": [{"name": r.name, "status": r.status, "a_us": _item_us(r.a), "b_us": _item_us(r.b),
                     "a_name": r.a.name if r.a else None, "detail": r.detail, "reason": r.reason,
                     "delta_us": r.delta_ns / 1e3, "launches_saved": r.launches_saved,
                     "fused_into": r.fused_into, "replaces": [x.name for x in r.replaces],
                     "unfused_from": r.unfused_from, "parts": [y.name for y in r.parts],
                     "evidence": r.evidence, "rule": r.rule, "refers": [y.name for y in r.refers],
                     "class": (r.b or r.a).klass, "block_a": r.a.block if r.a else None,
                     "backward": (r.a or r.b).backward,
                     "op_a": r.a.op if r.a else None, "op_b": r.b.op if r.b else None}
                    for r in d.rows],
        "replaced": [_replacement(f, True) for f in d.fusions if not _several(f)]
        + [_replacement(f, False) for f in d.unfusions if not _several(f)],
        "fused": [{"kernel": f.kernel.name, "replaces": [x.name for x in f.replaces],
                   "ops": sorted({x.op for x in f.replaces if x.op}), "saved_us": f.saved_ns / 1e3,
                   "a_us": (sum(x.dur_ns for x in f.replaces) + (f.gemm.dur_ns if f.gemm else 0)) / 1e3,
                   "b_us": f.kernel.dur_ns / 1e3, "gemm": f.gemm.name if f.gemm else None,
                   "launches_saved": len(f.replaces) - (0 if f.gemm else 1),
                   "intermediate_bytes": f.intermediate_bytes, "hbm_traffic_saved_bytes": 2 * f.intermediate_bytes,
                   "matched_by": f.how, "evidence": f.evidence, "module_a": sorted({x.module for x in f.replaces if x.module}),
                   "blocks_a": sorted({x.block for x in f.replaces if x.block})}
                  for f in d.fusions if _several(f)],
        "unfused": [{"kernel": f.kernel.name, "parts": [y.name for y in f.replaces], "matched_by": f.how,
                     "evidence": f.evidence, "a_us": f.kernel.dur_ns / 1e3,
                     "b_us": sum(y.dur_ns for y in f.replaces) / 1e3} for f in d.unfusions if _several(f)],
        "removed_ops": d.removed_ops, "added_ops": d.added_ops, "chains": d.chains,
        "cpu_changes": d.cpu_changes,
    }
