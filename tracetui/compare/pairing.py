"""Pairing: anchors (GEMM, attention, conv, communication) by dynamic programming, the kernels of
each gap between two paired anchors, and the repair that pairs identical kernels the monotone
alignment left on both sides.
"""
from __future__ import annotations

import difflib
import re

import numpy as np

from tracetui.compare.align import FORBIDDEN, MAX_CELLS, align
from tracetui.compare.items import Item, _class_name, _dims, _short_op
from tracetui.compare.rows import Row

SAME_TOLERANCE = 0.15
"""Matched kernels within 15% (or 2 µs) of each other are 'same'; beyond that, 'changed' (time)."""
SAME_ABS_NS = 2000

ANCHOR_GAP = 2.5
"""Cost of leaving an anchor unpaired: two of them (5) beat pairing GEMMs of different sizes (6),
lose to pairing same-size GEMMs with different names (0.5) or unknown sizes (1)."""

SAME_WORK_RTOL = 1e-3
"""Two GEMMs whose FLOPs differ by at most 0.1% do the same work: torch.compile pads a dimension
to a multiple of 8-64 (GPT-2's vocabulary 50257 -> 50264 changes the LM head's FLOPs by 0.014%),
and no two distinct layers of a model differ by so little unless they are the same shape."""

GEMM_OP_FAMILY = {"mm": "mm", "bmm": "mm", "matmul": "mm", "addmm": "mm", "baddbmm": "mm", "addbmm": "mm",
                  "linear": "mm", "_addmm_activation": "mm", "_scaled_mm": "mm"}
"""GEMM ops that are one kind of work: the same cutlass sgemm under ``aten::bmm`` in one trace and
``aten::mm`` in the other is one GEMM (compilation turns bmm of batch 1 into mm, matmul into mm)."""


def op_family(it: Item) -> str | None:
    """The op a kernel does, with GEMM ops as one family and a template GEMM counted as ``mm``."""
    if it.template and it.klass == "gemm":
        return "mm"
    if it.op is None:
        return None
    s = _short_op(it.op)
    return GEMM_OP_FAMILY.get(s, s)


def name_diff(a: str, b: str) -> str:
    """The tokens of two kernel names that differ (``_tn_`` vs ``_nn_``, tile, dtype...)."""
    ta, tb = re.split(r"[_<>,:() ]+", a), re.split(r"[_<>,:() ]+", b)
    sm = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
    parts = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            x, y = '_'.join(ta[i1:i2]), '_'.join(tb[j1:j2])
            if x.isdigit() and y.isdigit():  # "0 → 1" alone says nothing: it is the name's number
                parts.append(f"name's number {x} → {y}")
            else:
                parts.append(f"{x or '∅'} → {y or '∅'}")
    return "; ".join(parts)


def _lib_label(it: Item) -> str:
    if it.template:
        return "Triton template"
    lib = it.library or "other"
    return lib if lib.startswith("Triton") else lib.split(" (")[0]


def _same_or_changed(a: Item, b: Item) -> Row:
    d = abs(a.dur_ns - b.dur_ns)
    if a.name == b.name and (d <= SAME_ABS_NS or d <= SAME_TOLERANCE * max(a.dur_ns, 1)):
        return Row("same", a, b)
    if a.name == b.name:
        return Row("changed", a, b, f"time {a.dur_ns / 1e3:.1f} → {b.dur_ns / 1e3:.1f} µs")
    if b.template and not a.template:
        return Row("changed", a, b, f"{_lib_label(a)} {a.klass.upper() if a.klass == 'gemm' else a.klass} → "
                                    f"Triton template, {(b.dur_ns - a.dur_ns) / 1e3:+.1f} µs")
    la, lb = _lib_label(a), _lib_label(b)
    lib = f"{la} → {lb}; " if la != lb else ""
    return Row("changed", a, b, lib + name_diff(a.name, b.name))


def _codes(values: list) -> np.ndarray:
    """Each value as an integer code (equal values, equal codes; None gets its own code -1)."""
    table: dict = {}
    return np.array([-1 if v is None else table.setdefault(v, len(table)) for v in values], dtype=np.int64)


def _anchor_cost(A: list[Item], B: list[Item]) -> np.ndarray:
    """Pairing costs of two anchor lists (see ``ANCHOR_GAP``)."""
    both = A + B
    na = len(A)
    cls = _codes([x.klass for x in both])
    name = _codes([x.name for x in both])
    op = _codes([op_family(x) for x in both])
    # module classes, not instance numbers (Linear_2 in one trace can be Linear_0 in the other),
    # and no wrapper modules (torch.compile's OptimizedModule)
    mod = _codes([tuple(_class_name(m) for m in x.scope) if x.scope else None for x in both])
    mkn = _codes([x.mkn for x in both])
    bwd = np.array([x.backward for x in both])
    fl = np.array([x.flops if x.flops else np.nan for x in both])
    ca, cb = cls[:na, None], cls[None, na:]
    cost = np.where(ca == cb, 0.0, FORBIDDEN)
    cost += np.where(name[:na, None] == name[None, na:], 0.0, 0.5)
    fa, fb = fl[:na, None], fl[None, na:]
    known = ~np.isnan(fa) & ~np.isnan(fb)
    with np.errstate(invalid="ignore"):
        cost += np.where(known, np.where(np.isclose(fa, fb, rtol=SAME_WORK_RTOL), 0.0, 6.0), 1.0)
    # same FLOPs, other shapes (the down projection against gate/up): a little apart
    sa, sb = mkn[:na, None], mkn[None, na:]
    cost += np.where(known & (sa >= 0) & (sb >= 0) & (sa != sb), 0.3, 0.0)
    oa, ob = op[:na, None], op[None, na:]
    cost += np.where((oa >= 0) & (ob >= 0) & (oa != ob), 0.25, 0.0)
    ma, mb = mod[:na, None], mod[None, na:]
    cost += np.where((ma >= 0) & (mb >= 0) & (ma != mb), 1.0, 0.0)
    cost += np.where(bwd[:na, None] != bwd[None, na:], FORBIDDEN, 0.0)  # never across directions
    return cost


def _align_anchors(A: list[Item], B: list[Item]) -> list[tuple[int | None, int | None]]:
    """Anchor pairs (positions in A and B) by DP; very long lists are split at matching names first."""
    if len(A) * len(B) > MAX_CELLS:
        sm = difflib.SequenceMatcher(a=[x.name for x in A], b=[x.name for x in B], autojunk=False)
        out, i0, j0 = [], 0, 0
        for blk in sm.get_matching_blocks():
            sa, sb = A[i0:blk.a], B[j0:blk.b]
            out += _align_anchors(sa, sb) if len(sa) * len(sb) <= MAX_CELLS else \
                [(x.pos, None) for x in sa] + [(None, y.pos) for y in sb]
            out += [(A[blk.a + k].pos, B[blk.b + k].pos) for k in range(blk.size)]
            i0, j0 = blk.a + blk.size, blk.b + blk.size
        return out
    pairs = align(_anchor_cost(A, B), np.full(len(A), ANCHOR_GAP), np.full(len(B), ANCHOR_GAP))
    return [(A[i].pos if i is not None else None, B[j].pos if j is not None else None) for i, j in pairs]


def _gap_pairs(ga: list[Item], gb: list[Item], barred: set = frozenset()) -> list[tuple[int | None, int | None]]:
    """Pair the kernels of one gap: same name (0), else same class and launching op (1), or two
    fused kernels (1.5); an Inductor kernel never pairs with an eager one of another name (it is
    matched as a fusion). Items in ``barred`` (ids: kernels fusion by work already placed) pair
    with nothing."""
    n, m = len(ga), len(gb)
    cost = np.full((n, m), FORBIDDEN)
    for i, x in enumerate(ga):
        if id(x) in barred:
            continue
        for j, y in enumerate(gb):
            if id(y) in barred or x.backward != y.backward:  # never across directions
                continue
            if x.klass == "reduction" and _other_tensor(x, y):  # a reduction is its work on its tensor
                continue
            if x.name == y.name:
                cost[i, j] = 0.0
            elif x.generated and y.generated:  # one fused kernel for another (Inductor -> hand-written)
                cost[i, j] = 1.5
            elif y.inductor or x.inductor:
                continue
            elif x.klass == y.klass and x.op == y.op and x.klass not in ("memset", "memcpy"):
                cost[i, j] = 1.0
    return align(cost, np.ones(n), np.ones(m))



def _other_tensor(x: Item, y: Item) -> bool:
    """Two ATen reductions whose recorded inputs differ: the same kernel name over another tensor
    (a bias gradient's sum over [8192, 3072] is not the sum over [512, 768]) is other work."""
    if x.trace is None or y.trace is None or x.op_node is None or y.op_node is None:
        return False
    da, db = _dims(x.trace, x.op_node)[:1], _dims(y.trace, y.op_node)[:1]
    return bool(da and db) and da != db


def pair_identical(rows: list[Row]) -> list[Row]:
    """Pair a removed kernel (no fused kernel took it) with an added one of the same name, direction and op
    family (``GEMM_OP_FAMILY``): the same kernel doing the same work, which the monotone alignment
    could not pair (compiled code runs backward GEMMs in another order). The pair takes the place
    of the added row."""
    def key(it: Item) -> tuple:
        return it.name, it.backward, op_family(it)
    lost: dict = {}
    for i, r in enumerate(rows):
        if r.status == "removed" and not r.claimed:
            lost.setdefault(key(r.a), []).append(i)
    if not lost:
        return rows
    drop: set = set()
    out = list(rows)
    for i, r in enumerate(rows):
        if r.status == "added" and not r.claimed and lost.get(key(r.b)):
            j = lost[key(r.b)].pop(0)
            drop.add(j)
            out[i] = _same_or_changed(rows[j].a, r.b)
    out = [r for k, r in enumerate(out) if k not in drop]
    return _pair_same_work(out)


def _pair_same_work(rows: list[Row]) -> list[Row]:
    """Pair a removed GEMM with an added one of the same op family and direction whose FLOPs agree
    within ``SAME_WORK_RTOL``: one GEMM run by another kernel (CUTLASS in eager, nvjet in the
    compiled graph, its vocabulary padded), which the monotone alignment left on both sides."""
    def gemm(it: Item) -> bool:
        return it.klass == "gemm" and bool(it.flops)
    lost = [i for i, r in enumerate(rows) if r.status == "removed" and not r.claimed and gemm(r.a)]
    if not lost:
        return rows
    drop: set = set()
    out = list(rows)
    for i, r in enumerate(rows):
        if r.status != "added" or r.claimed or not gemm(r.b):
            continue
        y = r.b
        j = next((j for j in lost if j not in drop and rows[j].a.backward == y.backward
                  and op_family(rows[j].a) == op_family(y)
                  and abs(rows[j].a.flops - y.flops) <= SAME_WORK_RTOL * rows[j].a.flops), None)
        if j is not None:
            drop.add(j)
            out[i] = _same_or_changed(rows[j].a, y)
            out[i].detail += f"; same work: {rows[j].a.flops / 1e9:.2f} → {y.flops / 1e9:.2f} GFLOP"
    return [r for k, r in enumerate(out) if k not in drop]
