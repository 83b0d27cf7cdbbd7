"""Which kernels of B replaced which of A: the matching a diff's rows are built from.

Steps, each a function below (``match`` runs them in order):

1. **Fusion by work** (``work_groups``). A kernel of B with a new name that does GEMM work
   (evidence: its launching ATen GEMM op, an autograd Function / custom op / Inductor template
   whose recorded shapes hold weights, or, with no shapes, being the only new kernel of a scope
   whose GEMMs B lost) takes A's GEMMs that B has no counterpart for, in its scope and
   direction: those whose FLOPs sum to its own where it has FLOPs, else all of them. This is the
   same rule for an Inductor template, a hand-written Triton kernel, a CUTLASS kernel behind a
   custom op, or one wide cuBLAS GEMM on an interleaved gradient; and it holds whatever rung is
   on the other side, because the lost GEMMs come from aligning the rest first. "Its scope" is
   the innermost module both traces have (``shared_scope``): a fused form's own module
   (``GateUpProj``) is new, and what it replaced ran in the module around it.
2. **Anchors** (``pairing._align_anchors``) without the GEMMs step 1 placed, then **gaps**.
3. **Inductor kernels** claim the eager kernels whose launching ops their names list
   (``claim_by_name``, ``claim_neighbours``), **template GEMMs** the prologue/epilogue kernels
   (``claim_templates``), and a kernel launched by no ATen op (hand-written, a Function, a custom
   op; or one that did GEMM work in step 1) the kernels of its scope and direction
   (``claim_by_scope``).
"""
from __future__ import annotations

import bisect
import itertools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tracetui.compare.align import assign_monotone
from tracetui.compare.items import _LAYOUT_OPS, Item, op_is
from tracetui.compare.pairing import SAME_WORK_RTOL, _align_anchors, _gap_pairs
from tracetui.compare.rows import Fusion

MAX_WORK_PARTS = 6
"""At most this many GEMMs of A in one kernel of B (a dual GEMM is 2, a grouped QKV 3)."""
MAX_WORK_POOL = 12
"""Subsets are searched among at most this many lost GEMMs, nearest first (bounds the search)."""


@dataclass
class Match:
    """Step 1-3's result for A (``ia``) and B (``ib``)."""
    ia: list
    ib: list
    anchors: list = field(default_factory=list)      # (pos in A | None, pos in B | None)
    gaps: list = field(default_factory=list)         # (A items, B items) between paired anchors
    rows_of_gap: list = field(default_factory=list)  # per gap: (x | None, y | None) in order
    pair_of: dict = field(default_factory=dict)      # id(B item) -> A item paired with it
    claimed: dict = field(default_factory=dict)      # id(A item) -> Fusion
    fusion_of_b: dict = field(default_factory=dict)  # id(B item) -> Fusion
    fusions: list = field(default_factory=list)
    scopes_a: set = field(default_factory=set)      # A's module scopes and those above them

    @property
    def paired(self) -> list:
        if getattr(self, "_paired_of", None) is not self.anchors:
            self._paired = [(p, q) for p, q in self.anchors if p is not None and q is not None]
            self._paired_of = self.anchors
        return self._paired

    def free(self, x: Item) -> bool:
        return id(x) not in self.claimed and id(x) not in self._paired_a

    def claim(self, kernel: Item, xs: list, how: str, gemm: Item | None = None, evidence: str = "") -> None:
        f = self.fusion_of_b.get(id(kernel))
        if f is not None and evidence and evidence not in f.evidence:  # each clause once
            have = f.evidence.split("; ") if f.evidence else []
            f.evidence = "; ".join(have + [c for c in evidence.split("; ") if c not in have])
        if f is None:
            f = Fusion(kernel, [], how, gemm, evidence)
            self.fusion_of_b[id(kernel)] = f
            self.fusions.append(f)
        for x in xs:
            self.claimed[id(x)] = f
            f.replaces.append(x)
        f.replaces.sort(key=lambda x: x.pos)


def match(ia: list[Item], ib: list[Item]) -> Match:
    """Steps 1-3 (module docstring)."""
    m = Match(ia, ib, scopes_a=scope_prefixes(ia))
    work = work_groups(ia, ib, m.scopes_a)
    for y, xs, evidence in work:
        m.claim(y, xs, "work", evidence=evidence)
    placed = {id(y) for y, _, _ in work} | {id(x) for _, xs, _ in work for x in xs}
    m.anchors = _align_anchors([x for x in ia if x.anchor and id(x) not in placed],
                               [y for y in ib if y.anchor and id(y) not in placed])
    bounds = [(-1, -1)] + m.paired + [(len(ia), len(ib))]
    m.gaps = [(ia[p0 + 1:p1], ib[q0 + 1:q1]) for (p0, q0), (p1, q1) in zip(bounds[:-1], bounds[1:])]
    for ga, gb in m.gaps:
        order = []
        for i, j in _gap_pairs(ga, gb, placed):
            x, y = (ga[i] if i is not None else None), (gb[j] if j is not None else None)
            if x is not None and y is not None:
                m.pair_of[id(y)] = x
            order.append((x, y))
        m.rows_of_gap.append(order)
    m._paired_a = {id(x) for x in m.pair_of.values()}
    claim_by_name(m)
    claim_neighbours(m)
    claim_templates(m)
    claim_by_scope(m)
    m.fusions = [f for f in m.fusions if f.replaces]
    return m


# ---------------------------------------------------------------- 1. fusion by work

def scope_prefixes(items: list[Item]) -> set:
    """Every nn.Module scope of ``items`` and each scope above it (where a kernel may have run)."""
    return {x.scope[:k] for x in items for k in range(1, len(x.scope) + 1)}


def shared_scope(y: Item, scopes_a: set) -> tuple:
    """The innermost scope of ``y`` that the other trace also has. A fused form often brings a
    module of its own (``GateUpProj`` packing gate and up); the kernels it replaced ran in the
    nearest enclosing module both traces have (``GeGLU``), never in the new module itself."""
    for k in range(len(y.scope), 0, -1):
        if y.scope[:k] in scopes_a:
            return y.scope[:k]
    return ()


def _scope_note(y: Item, scope: tuple) -> str:
    """How a scope reads in an evidence line: the new modules of B said as such."""
    where = "/".join(scope)
    new = y.scope[len(scope):]
    return f"{where} ({'/'.join(new)} is new in B)" if new else where


def _may_do_work(y: Item, names_a: set, flops_a: set) -> bool:
    """A kernel of B that may do the work of several GEMMs of A: GEMM evidence, or no ATen op
    behind it (a user kernel, a Function, a custom op; not Inductor's pointwise code); and
    FLOPs no single GEMM of A has (whatever its name: cuBLAS may run a dual GEMM on the packed
    weight with the tile it ran each GEMM with), or, without FLOPs, a name A does not launch."""
    if y.klass in ("memset", "memcpy") or y.library.startswith("ATen"):
        return False
    if not (y.work or (not y.aten and not (y.inductor and not y.template))):
        return False
    if y.flops is not None:  # within SAME_WORK_RTOL: compile's padding of a dimension is the same GEMM
        return not any(bwd == y.backward and abs(f - y.flops) <= SAME_WORK_RTOL * f for f, bwd in flops_a)
    # an Inductor template whose shapes do not say its FLOPs is left to the alignment: generated
    # code always records its shapes, so "no FLOPs" there is no evidence of several GEMMs
    return not y.inductor and (y.name, y.backward) not in names_a


def work_groups(ia: list[Item], ib: list[Item], scopes_a: set | None = None) -> list[tuple[Item, list, str]]:
    """Step 1: (kernel of B, the GEMMs of A it took over, the evidence), per kernel of B that
    does the work of GEMMs B has no counterpart for."""
    names_a = {(x.name, x.backward) for x in ia}
    flops_a = {(x.flops, x.backward) for x in ia if x.anchor and x.flops}
    cands = [y for y in ib if _may_do_work(y, names_a, flops_a)]
    if not cands:
        return []
    # the strongest evidence first: FLOPs that add up, then scope alone
    cands.sort(key=lambda y: (y.flops is None, y.pos))
    cand_ids = {id(y) for y in cands}
    first = _align_anchors([x for x in ia if x.anchor], [y for y in ib if y.anchor and id(y) not in cand_ids])
    paired = [(p, q) for p, q in first if p is not None and q is not None]
    kept = {p for p, _ in paired}
    lost = [x for x in ia if x.anchor and x.klass == "gemm" and x.pos not in kept]
    out, taken = [], set()
    scopes_a = scope_prefixes(ia) if scopes_a is None else scopes_a
    lost_pos = [x.pos for x in lost]
    qs = [q for _, q in paired]
    for y in cands:
        lo, hi = _bracket(paired, qs, y.pos)
        near = lost[bisect.bisect_right(lost_pos, lo):bisect.bisect_left(lost_pos, hi)]
        scope = shared_scope(y, scopes_a)
        pool = [x for x in near if id(x) not in taken and x.backward == y.backward
                and (x.in_scope(scope) if scope else y.flops is not None)]
        xs, evidence = _pick(y, scope, pool, [c for c in cands if c is not y and c.backward == y.backward
                                              and c.scope == y.scope and c.flops is None])
        if xs:
            taken.update(id(x) for x in xs)
            out.append((y, xs, evidence))
    return out


def _bracket(paired: list, qs: list, q: int) -> tuple[int, int]:
    """The A positions between the anchor pairs around B position ``q`` (monotone: the GEMMs a
    kernel of B replaced lie between the same anchors in A)."""
    k = bisect.bisect_left(qs, q)
    lo = paired[k - 1][0] if k > 0 else -1
    k2 = bisect.bisect_right(qs, q)
    hi = paired[k2][0] if k2 < len(paired) else 1 << 62
    return lo, hi


def _pick(y: Item, scope: tuple, pool: list[Item], rivals: list[Item]) -> tuple[list, str]:
    """The GEMMs of ``pool`` that ``y`` replaced, and the evidence: a subset whose FLOPs sum to
    y's (fewest, closest together), or, where y has no FLOPs, all of them when y is the only new
    kernel of its scope without FLOPs (``rivals`` are the others)."""
    if not pool:
        return [], ""
    n = len(pool)
    what = f"{n} GEMM{'s' * (n != 1)}"
    if y.flops is not None:
        near = sorted(pool, key=lambda x: abs(x.pos - y.pos))[:MAX_WORK_POOL]
        known = [x for x in near if x.flops]
        for k in range(2, min(MAX_WORK_PARTS, len(known)) + 1):
            hits = [c for c in itertools.combinations(known, k)
                    if np.isclose(sum(x.flops for x in c), y.flops, rtol=1e-6)]
            if hits:
                best = min(hits, key=lambda c: max(x.pos for x in c) - min(x.pos for x in c))
                xs = sorted(best, key=lambda x: x.pos)
                ev = (f"{y.work[0] if y.work else 'its shapes'}: {y.flops / 1e9:.2f} GFLOP = the "
                      f"{len(xs)} GEMM{'s' * (len(xs) != 1)} of A it replaced")
                return xs, ev
        return [], ""
    if rivals or not scope or n < 2:
        return [], ""
    launcher = f"launched by {y.op}" if y.op else "launched by no op"
    ev = (f"scope {_scope_note(y, scope)}: A's {what} there have no counterpart in B, and this new kernel "
          f"({launcher}) is the only one there to do them")
    if y.work:
        ev += f"; {y.work[0]}"
    return sorted(pool, key=lambda x: x.pos), ev


# ---------------------------------------------------------------- 3. the other fused kernels

def claim_by_name(m: Match) -> None:
    """Inductor kernels: each gap's fused kernels share the gap's eager kernels monotonically,
    each taking those whose launching op its name lists."""
    for ga, gb in m.gaps:
        ks = [y for y in gb if y.inductor and not y.template and id(y) not in m.pair_of]
        xs = [x for x in ga if m.free(x) and not x.anchor]
        if not ks or not xs:
            continue
        hit = np.array([[bool(set(x.op_short()) & set(y.ind_ops)) for y in ks] for x in xs], dtype=bool)
        rel_x = (np.arange(len(xs)) + 0.5) / len(xs)
        rel_y = (np.arange(len(ks)) + 0.5) / len(ks)
        tie = 0.01 * np.abs(rel_x[:, None] - rel_y[None, :])
        for i, j in enumerate(assign_monotone(hit, tie)):
            if j >= 0:
                y = ks[j]
                m.claim(y, [xs[i]], "provenance" if y.exact else "name", evidence=(
                    f"Inductor's provenance record lists {', '.join(y.ind_ops)} (exact)" if y.exact
                    else f"its name lists {', '.join(y.ind_ops)}"))


def claim_neighbours(m: Match) -> None:
    """Ops an Inductor kernel lists but its gap lacks: the next gap on each side, never further
    (dependencies let Inductor move pointwise work past an independent GEMM)."""
    gaps = m.gaps
    for g, (ga, gb) in enumerate(gaps):
        for y in gb:
            if not y.inductor or y.template or id(y) in m.pair_of:
                continue
            f = m.fusion_of_b.get(id(y))
            have = set()
            for x in (f.replaces if f else []):
                have |= set(x.op_short())
            for o in [o for o in y.ind_ops if o not in have and o not in _LAYOUT_OPS]:
                for h, seq in ((g - 1, reversed(gaps[g - 1][0]) if g >= 1 else ()),
                               (g + 1, gaps[g + 1][0] if g + 1 < len(gaps) else ())):
                    hit = next((x for x in seq if m.free(x) and not x.anchor and o in x.op_short()
                                and not _wanted_there(x, gaps[h][1], m.pair_of)), None)
                    if hit is not None:
                        m.claim(y, [hit], "name", evidence=f"its name lists {', '.join(y.ind_ops)}")
                        break


def claim_templates(m: Match) -> None:
    """Template GEMMs: the prologue/epilogue ops they list claim pointwise kernels near them,
    once Inductor's pointwise kernels took theirs (a template's name can list the ops of the
    buffer it reads, which a separate pointwise kernel computed: then that kernel replaced them)."""
    gaps = m.gaps
    for k, (p, q) in enumerate(m.paired):
        y = m.ib[q]
        if not y.template:
            continue
        extra = [o for o in y.ind_ops if not op_is(o, "gemm") and o not in _LAYOUT_OPS]
        near = [k, k - 1, k + 1] if 0 <= k - 1 else [k, k + 1]  # before the GEMM, prologue, epilogue
        got = []
        for o in extra:
            for g in near:
                if not 0 <= g < len(gaps):
                    continue
                hit = next((x for x in (reversed(gaps[g][0]) if g <= k else gaps[g][0])  # nearest first
                            if m.free(x) and x not in got and not x.anchor and o in x.op_short()), None)
                if hit is not None:
                    got.append(hit)
                    break
        m.claim(y, got, "template", gemm=m.ia[p],
                evidence=f"Inductor template GEMM paired with {m.ia[p].name}; its name lists {', '.join(y.ind_ops)}")


def claim_by_scope(m: Match) -> None:
    """Other new kernels (hand-written Triton, a Function's or custom op's kernels, library
    fusions): the free kernels of A in their nn.Module scope and direction, else (no scope, the
    gap's only new kernel) the gap's."""
    gaps = m.gaps
    for g, (ga, gb) in enumerate(gaps):
        new = [y for y in gb if id(y) not in m.pair_of and not y.inductor and _may_fuse(y)
               and (id(y) not in m.fusion_of_b or m.fusion_of_b[id(y)].how == "work")]
        for y in new:
            if y.aten and id(y) in m.fusion_of_b:
                continue  # an ATen GEMM that took GEMMs over does only GEMM work
            if y.anchor and not y.generated and id(y) not in m.fusion_of_b:
                continue  # a library GEMM/conv/attention kernel with no work evidence (often no launch record) fused nothing
            pool = [x for h in (g, g - 1, g + 1) if 0 <= h < len(gaps) for x in gaps[h][0]
                    if (h == g or not x.anchor) and x.backward == y.backward]
            scope = shared_scope(y, m.scopes_a)
            if scope:
                rep = [x for x in pool if m.free(x) and x.in_scope(scope)]
                how = "scope"
            else:
                rep = [x for x in ga if m.free(x)] if len(new) == 1 else []
                how = "position"
            if len(rep) >= 2 or (rep and how == "scope") or (rep and id(y) in m.fusion_of_b):
                f = m.fusion_of_b.get(id(y))
                launcher = f"launched by {y.op} (not an ATen op)" if y.op and not y.aten else (
                    "launched by no op" if y.op is None else "generated code")
                where = f"scope {_scope_note(y, scope)}" if how == "scope" else "the gap's only new kernel"
                ev = f"{where}, {'backward' if y.backward else 'forward'}: {launcher}; A's kernels there have no counterpart"
                if f is not None:  # its GEMMs' evidence already says "no counterpart": say what it adds
                    ev = f"and A's other kernels in {where} ({'backward' if y.backward else 'forward'})"
                m.claim(y, sorted(rep, key=lambda x: x.pos), f.how if f else how, evidence=ev)


def _may_fuse(y: Item) -> bool:
    """A new kernel that may be a fusion: generated (Inductor, a user Triton kernel), launched by
    no ATen op (a Function, a custom op, none), or named fused outside ATen (ATen's own kernels
    each do one op, never several)."""
    if y.klass in ("memset", "memcpy"):
        return False
    if y.library.startswith("ATen"):
        return False  # ATen's own kernels each do one op, whoever launched them
    return y.generated or not y.aten or ("fused" in y.name.lower() and not y.anchor)


def _wanted_there(x: Item, gb: list[Item], pair_of: dict) -> bool:
    """An eager kernel that a fused kernel of its own gap could still take (leave it to that one)."""
    return any(y.inductor and id(y) not in pair_of and set(x.op_short()) & set(y.ind_ops) for y in gb)


def absorbed_ops(f, counted: bool = False) -> list[str]:
    """What each replaced kernel did, in order, once each (``counted``: "2× mm" where two did it): the op the fused kernel's name lists,
    else its launching op, else (a kernel launched outside any op) its own name."""
    def one(x: Item) -> str:
        if x.inductor and x.ind_ops:  # a fused kernel replaced: the ops its name lists
            return " + ".join(dict.fromkeys(o for o in x.ind_ops if o not in _LAYOUT_OPS)) or x.name
        ops = x.op_short()
        return next((o for o in ops if o in f.kernel.ind_ops), ops[0] if ops else x.name)
    done = [one(x) for x in f.replaces]
    if not counted:
        return list(dict.fromkeys(done))
    n = Counter(done)  # two GEMMs gone are "2× mm", not "mm"
    return [f"{n[o]}× {o}" if n[o] > 1 else o for o in dict.fromkeys(done)]
