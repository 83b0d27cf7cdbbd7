"""Why a kernel has no counterpart in the other trace: rule tables, each rule with its reason and
the evidence it needs, and the claim a reason makes checked before it is given.

A rule that names another kernel (the first part of a split reduction, the GEMM a weight repack
feeds) names one that the evidence ties to it: same layer, same direction, the kind of kernel the
reason says. Where no rule's evidence holds, the row stays unexplained and says so.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, NamedTuple

from tracetui.compare.items import _LAYOUT_OPS, _CONST_OPS, _REDUCE_OPS, Item, _dims
from tracetui.compare.rows import Row
from tracetui.model.names import INDUCTOR_RE


class Rule(NamedTuple):
    key: str
    reason: str
    evidence: str            # what must hold in the trace for the rule to apply
    test: Callable


@dataclass
class _Why:
    """What the rules read about one kernel."""
    item: Item
    layout: bool = False     # its ops are only layout ops (copy, cat, permute ...)
    const: bool = False      # its ops only make constants / random numbers
    next_anchor: str | None = None
    split_of: Item | None = None   # the first part of the split reduction it finishes
    op_part_of: Item | None = None  # the fused kernel that took the eager op it computes a part of
    sibling: str | None = None     # the op whose call also launched another kernel of this side
    repack_for: Item | None = None  # the GEMM-work kernel whose weight it copies
    weight: tuple = ()
    grad_copy: bool = False  # AccumulateGrad copying a gradient into .grad


REASONS = (
    Rule("memset", "memset (cuBLAS workspace / split-K or a zeroed buffer)", "a memset",
         lambda r: r.item.klass == "memset"),
    Rule("memcpy", "memory copy", "a memcpy", lambda r: r.item.klass == "memcpy"),
    Rule("weight repack", "weight repack: copies a weight into the layout the fused GEMM reads, every step",
         "a copy whose shape is a weight ([N, K] or [K, N]) of the next GEMM-work kernel of its scope "
         "and direction", lambda r: r.repack_for is not None),
    Rule("grad copy", "gradient copy into .grad (AccumulateGrad: the gradient has another layout)",
         "a copy launched under AccumulateGrad", lambda r: r.grad_copy),
    Rule("split", "part of a split reduction",
         "an Inductor reduction kernel sharing an op with a fused reduction kernel of B of the same "
         "layer and direction (the nearest, before it first)", lambda r: r.split_of is not None),
    Rule("op split", "another kernel of an op Inductor split in parts",
         "an Inductor kernel listing an op (not a layout op) whose eager kernel a fused kernel of B of "
         "the same layer and direction replaced, before it", lambda r: r.op_part_of is not None),
    Rule("same call", "another kernel of the same op call (ATen runs it in passes)",
         "another kernel launched by the same op call", lambda r: r.sibling is not None),
    Rule("extern", "ATen kernel the compiled graph calls as an extern op",
         "an ATen kernel launched inside a compiled graph (by an ATen op, not the graph itself)",
         lambda r: r.item.compiled and not r.item.inductor and r.item.aten),
    Rule("attention layout", "layout copy for the attention kernel that follows",
         "only layout ops, before an attention kernel", lambda r: r.layout and r.next_anchor == "attention"),
    Rule("gemm layout", "layout copy for the GEMM that follows", "only layout ops, before a GEMM or conv",
         lambda r: r.layout and r.next_anchor in ("gemm", "conv")),
    Rule("layout", "layout copy (a materialised view)", "only layout ops", lambda r: r.layout),
    Rule("constants", "index/constant/random tensor now computed by a kernel",
         "only constant/random ops (and index arithmetic)", lambda r: r.const),
)
"""Why a kernel of B has no counterpart in A (first match wins); a kernel none fits is counted
as unexplained."""

REMOVED_REASONS = (
    Rule("memset", "memset/memcpy no longer needed", "a memset or memcpy",
         lambda r: r.item.klass in ("memset", "memcpy")),
    Rule("split", "part of a split reduction (B runs the reduction unsplit)",
         "as for an added split part, against A's unfused kernels", lambda r: r.split_of is not None),
    Rule("op split", "another kernel of an op Inductor split in parts (B runs the op whole)",
         "as for an added op part, against A's unfused kernels", lambda r: r.op_part_of is not None),
    Rule("extern", "ATen kernel the compiled graph called as an extern op",
         "an ATen kernel launched inside A's compiled graph (by an ATen op)",
         lambda r: r.item.compiled and not r.item.inductor and r.item.aten),
    Rule("weight repack", "weight repack no longer needed", "as for an added weight repack",
         lambda r: r.repack_for is not None),
    Rule("grad copy", "gradient copy into .grad no longer needed", "a copy launched under AccumulateGrad",
         lambda r: r.grad_copy),
    Rule("layout", "layout copy no longer launched", "only layout ops", lambda r: r.layout),
    Rule("constants", "constant/fill no longer launched", "only constant ops", lambda r: r.const),
)
"""Why a kernel of A has no counterpart in B, when no fused kernel claimed it."""


def ops_of(it: Item) -> set:
    return set(it.ind_ops) if it.inductor else set(it.op_short())


def is_reduction(it: Item) -> bool:
    """An Inductor reduction kernel: ``triton_red_``/``triton_per_``, or a C++ kernel (which
    names no kind) classed reduction or listing a reduction op."""
    m = INDUCTOR_RE.match(it.name)
    if not m:
        return False
    if m.group(1):
        return m.group(1) in ("red", "per")
    return it.klass == "reduction" or any(_REDUCE_OPS.fullmatch(o) for o in it.ind_ops)


def explain(rows: list[Row], ia: list[Item], ib: list[Item], layer: dict | None = None) -> None:
    """Give added and removed rows their reason (``REASONS``, ``REMOVED_REASONS``), or leave them
    unexplained. ``layer`` maps id(item) to its layer where its own scope does not say it
    (compiled backward kernels have none: the diff infers it from what they pair with). A
    removed kernel gets the mirror of the added rules, against the unfused rows."""
    layer = layer or {}
    lay = lambda it: layer.get(id(it), it.block)  # noqa: E731
    fused = {"b": [(r.b, r.replaces, lay(r.b)) for r in rows if r.status in ("fused", "replaced") and r.b is not None],
             "a": [(r.a, r.parts, lay(r.a)) for r in rows if r.status in ("unfused", "replaced") and r.b is None]}
    nxt = {"a": _next_anchor(ia), "b": _next_anchor(ib)}
    reductions = {k: [(f, f_lay) for f, _, f_lay in v if is_reduction(f)] for k, v in fused.items()}  # once, not per row
    calls = {"a": Counter(x.op_node for x in ia if x.op_node is not None),
             "b": Counter(y.op_node for y in ib if y.op_node is not None)}
    for r in rows:
        if r.claimed or r.status not in ("added", "removed"):
            continue
        added = r.status == "added"
        it, k = (r.b, "b") if added else (r.a, "a")
        side = ib if added else ia
        why = _why(it, side, nxt[k][it.pos], added)
        firsts = reductions[k]
        why.split_of = _first_part(it, lay(it), firsts, side)
        if why.split_of is None:
            why.op_part_of = _op_part(it, lay(it), fused[k])
        if it.op_node is not None and calls[k][it.op_node] > 1 and it.aten and not it.inductor:
            why.sibling = it.op  # an ATen op run in passes; a compiled graph's op is not one call
        for rule in (REASONS if added else REMOVED_REASONS):
            if rule.test(why):
                r.rule = rule.key
                r.reason, r.refers = _say(rule, why, it)
                break


def _why(it: Item, side: list[Item], next_anchor, added: bool) -> _Why:
    # an Inductor kernel is read by the ops its name lists on either side, so the removed rules
    # mirror the added ones (a removed ``triton_poi_fused_arange_2`` is a constant kernel too)
    wide = added or it.inductor
    ops = ops_of(it) if wide else set(it.op_short()[:1])
    layout = bool(ops) and ops <= _LAYOUT_OPS
    const = bool(ops) and (bool(ops & _CONST_OPS) and ops <= (_CONST_OPS | _LAYOUT_OPS | {"add", "mul", "lt", "gt",
                                                                                          "le", "ge"})
                           if wide else ops <= _CONST_OPS)
    why = _Why(it, layout=layout, const=const, next_anchor=next_anchor)
    first = it.op_short()[:1]
    if first and first[0] in _LAYOUT_OPS and not it.inductor:
        why.grad_copy = any("AccumulateGrad" in c for c in it.chain)
        if not why.grad_copy:
            why.repack_for, why.weight = _repack_target(it, side)
    return why


def _say(rule: Rule, why: _Why, it: Item) -> tuple[str, list]:
    """The reason's text, with the kernel it names, and that kernel."""
    if rule.key == "split":
        return f"{rule.reason} (other part: {why.split_of.name})", [why.split_of]
    if rule.key == "op split":
        return f"{rule.reason} (first part: {why.op_part_of.name})", [why.op_part_of]
    if rule.key == "extern" and why.item.op:
        return f"{rule.reason} ({why.item.op})", []
    if rule.key == "weight repack":
        w = "x".join(map(str, why.weight))
        return f"{rule.reason} ({w}, for {why.repack_for.name})", [why.repack_for]
    if rule.key == "same call":
        return f"{rule.reason} ({why.sibling})", []
    if rule.key == "extern":
        return f"{rule.reason} ({it.op})", []
    return rule.reason, []


def _first_part(it: Item, its_layer, firsts: list[tuple], ib: list[Item]) -> Item | None:
    """The fused reduction kernel of B whose reduction ``it`` shares, if the evidence says so:
    ``it`` is an Inductor reduction; the other part is another kernel, a fused reduction of the
    same known layer and direction, with no anchor (GEMM, attention ...) between them, listing
    the same reduction ops; or the reduction kernel right before it with those ops. The nearest
    before it, else after."""
    if its_layer is None or not is_reduction(it):
        return None
    ops = {o for o in it.ind_ops if _REDUCE_OPS.fullmatch(o)}
    hits = [f for f, f_layer in firsts if f.name != it.name and f.backward == it.backward
            and f_layer == its_layer and ops and ops <= set(f.ind_ops)
            and not any(x.anchor for x in ib[min(f.pos, it.pos) + 1:max(f.pos, it.pos)])]
    prev = ib[it.pos - 1] if it.pos > 0 else None
    if prev is not None and prev.inductor and is_reduction(prev) and prev.name != it.name and ops \
            and ops <= set(prev.ind_ops) and prev.backward == it.backward:
        hits.append(prev)  # the kernel right before it: Inductor's red + per of one reduction
    before = [f for f in hits if f.pos < it.pos]
    if before:
        return max(before, key=lambda f: f.pos)
    return min(hits, key=lambda f: f.pos) if hits else None


def _op_part(it: Item, its_layer, fused: list[tuple]) -> Item | None:
    """The fused kernel of B, same known layer and direction, before ``it``, that replaced an
    eager kernel of an op ``it`` lists (Inductor lowers one op to several kernels:
    ``native_layer_norm_backward`` as a reduction and a pointwise kernel), with no anchor
    between them. The nearest such."""
    if its_layer is None or not it.inductor:
        return None
    ops = set(it.ind_ops) - _LAYOUT_OPS
    best = None
    for f, replaced, lay in fused:
        if f.pos < it.pos and f.name != it.name and f.backward == it.backward and lay == its_layer and any(
                ops & set(x.op_short()[:1]) for x in replaced) and not _anchor_between(f, it):
            best = f if best is None or f.pos > best.pos else best
    return best


def _anchor_between(f: Item, it: Item) -> bool:
    """Whether a GEMM/attention/conv/communication kernel ran between two kernels of one side."""
    side = getattr(it.trace, "_diff_items", None) or []
    return any(x.anchor for x in side[min(f.pos, it.pos) + 1:max(f.pos, it.pos)])


def _repack_target(it: Item, side: list[Item]) -> tuple[Item | None, tuple]:
    """The GEMM-work kernel whose weight this copy writes: the next kernel of its scope and
    direction with GEMM shapes, one of whose weights ([N, K]) has a shape the copy moves."""
    if it.trace is None or it.op_node is None or not it.scope:
        return None, ()
    shapes = {tuple(d) for d in _dims(it.trace, it.op_node) if len(d) == 2}
    if not shapes:
        return None, ()
    for y in side[it.pos + 1:]:
        if y.backward != it.backward or not y.scope or not (y.in_scope(it.scope) or it.in_scope(y.scope)):
            continue
        if y.mkn:
            for _, k, n in y.mkn:
                if (n, k) in shapes or (k, n) in shapes:
                    return y, (n, k)
            return None, ()
    return None, ()


def _next_anchor(items: list[Item]) -> list[str | None]:
    out: list[str | None] = [None] * len(items)
    nxt = None
    for i in range(len(items) - 1, -1, -1):
        out[i] = nxt
        if items[i].anchor:
            nxt = items[i].klass
    return out
