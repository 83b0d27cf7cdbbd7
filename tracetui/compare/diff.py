"""Align two traces step by step and say what changed: same / changed / fused / unfused /
removed / added.

Unit of comparison: one step's window (every thread, every stream: forward, backward on the
autograd thread, optimizer), its kernels in launch order, each timed as the mean over the steps
that launched the same sequence; on CPU-only traces the leaf compute ops and Inductor's C++
kernels (``items.py``). The stages, one module each:

1. **Matching** (``fusion.match``): fusion by work (a kernel of B that does the work of GEMMs B
   lost takes them), anchors aligned by dynamic programming (``pairing.py``), the kernels between
   them paired by name or class and op, then fused kernels claim the kernels they replaced.
2. **Rows** (``_rows``): every A and B kernel in exactly one row, in aligned order; a row's delta
   is what it adds to B's device time (a fused row: its kernel minus what it replaced; a claimed
   row: 0), so the deltas sum to the step's device-time delta and the launches saved to the
   difference in kernel counts.
3. **Identical kernels** (``pairing.pair_identical``): a kernel removed and the same kernel added
   (same name, direction and op family) are one ``same``/``changed`` row.
4. **Unfusions** (``_unfusions``): the mirror of step 1 and 3's fusion rules, run from B to A, for
   a kernel of A that B runs as several (fused → compile).
5. **Reasons** (``reasons.py``): why an added or removed kernel has no counterpart, from a rule
   table; kernels no rule explains are counted as unexplained, never hidden.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tracetui.compare.fusion import Match, absorbed_ops, match
from tracetui.compare.items import ANCHOR_CLASSES, Item, _items, _vocab, gemm_flops  # noqa: F401 (API)
from tracetui.compare.ops import COMPILE_PREOPS, _cpu_changes, _op_changes  # noqa: F401 (API)
from tracetui.compare.pairing import _same_or_changed, name_diff, pair_identical  # noqa: F401 (API)
from tracetui.compare.perstep import _side
from tracetui.compare.reasons import explain
from tracetui.compare.rows import Fusion, Row
from tracetui.model.names import inductor_ops
from tracetui.model.trace import Trace

_absorbed_ops = absorbed_ops  # the old name (changes.py, reports)


@dataclass
class DiffResult:
    a: Trace
    b: Trace
    rows: list[Row]
    fusions: list[Fusion]
    removed_ops: list[dict]
    added_ops: list[dict]
    chains: list[dict]
    mem_rows: list[Row] = field(default_factory=list)
    cpu_changes: list[dict] = field(default_factory=list)
    unfusions: list[Fusion] = field(default_factory=list)

    def per_step(self, t: Trace) -> dict:
        return _side(t)


def diff_traces(a: Trace, b: Trace) -> DiffResult:
    """The aligned, explained rows of one step of ``a`` against one of ``b`` (module docstring)."""
    ia, ib = _items(a), _items(b)
    _decode_names(ia, ib, _vocab(a) | _vocab(b))
    m = match(ia, ib)
    rows = pair_identical(_rows(m))
    unfusions: list[Fusion] = []
    layers = _layers(m)
    if _worth_mirroring(rows):
        rev = match(ib, ia)
        rows, unfusions = _unfusions(rows, rev)
        layers = {**_layers(rev), **layers}  # A's kernels: from the reverse match
    explain(rows, ia, ib, layers)
    removed_ops, added_ops = _op_changes(a, b)
    chains = [{"kernel": r.name, "a": r.a.chain, "b": r.b.chain}
              for r in rows if r.a is not None and r.b is not None and r.a.chain != r.b.chain]
    return DiffResult(a, b, rows, m.fusions, removed_ops, added_ops, chains, cpu_changes=_cpu_changes(a, b),
                      unfusions=unfusions)


def _decode_names(ia: list[Item], ib: list[Item], vocab: set) -> None:
    """Both traces' op names split each side's Inductor kernel names (nll_loss_forward, not
    nll_loss): the decoding must not depend on which side is A."""
    for it in ia + ib:
        if it.ind_ops and not it.exact:
            it.ind_ops = tuple(inductor_ops(it.name, vocab)[0])


def _rows(m: Match) -> list[Row]:
    """Every item in one row, gaps and anchors in aligned order."""
    anchor_rows = {}
    for p, q in m.paired:
        r = _same_or_changed(m.ia[p], m.ib[q])
        f = m.fusion_of_b.get(id(m.ib[q]))
        if f is not None and f.replaces:
            r.replaces = list(f.replaces)
            r.how = "template"
            r.detail += f"; absorbed {', '.join(absorbed_ops(f))}"
        anchor_rows[(p, q)] = r
    rows: list[Row] = []
    for k, order in enumerate(m.rows_of_gap):
        for x, y in order:
            rows.append(_row(x, y, m))
        if k < len(m.paired):
            rows.append(anchor_rows[m.paired[k]])
    return rows


def _row(x: Item | None, y: Item | None, m: Match) -> Row:
    if x is not None and y is not None:
        return _same_or_changed(x, y)
    if x is not None:
        f = m.claimed.get(id(x))
        if f is not None:
            verb = "fused into" if len(f.replaces) > 1 else "replaced by"
            return Row("removed", x, None, f"{verb} {f.kernel.name}", fused_into=f.kernel.name)
        return Row("removed", x, None)
    f = m.fusion_of_b.get(id(y))
    if f is not None and f.replaces and f.how != "template":
        n = len(f.replaces)
        if n == 1:  # one kernel for one: a replacement (another implementation), not a fusion
            return Row("replaced", None, y, f"replaces {absorbed_ops(f)[0]} one for one",
                       replaces=list(f.replaces), how=f.how, evidence=f.evidence)
        return Row("fused", None, y, f"replaces {n} kernels ({', '.join(absorbed_ops(f))})",
                   replaces=list(f.replaces), how=f.how, evidence=f.evidence)
    return Row("added", None, y)


def _layers(m: Match) -> dict:
    """id(B item) -> its layer where its scope does not say it (compiled backward kernels run
    outside any module): the layer of the A kernels it replaced or is paired with, else of the
    two A anchors around its gap when they agree."""
    out: dict = {}
    for f in m.fusions:
        blocks = {x.block for x in f.replaces} - {None}
        if len(blocks) == 1:
            out[id(f.kernel)] = blocks.pop()
    for q_id, x in m.pair_of.items():
        if x.block is not None:
            out.setdefault(q_id, x.block)
    bounds = [None] + [m.ia[p] for p, _ in m.paired] + [None]
    for g, (_, gb) in enumerate(m.gaps):
        lo, hi = bounds[g], bounds[g + 1]
        if lo is not None and hi is not None and lo.block is not None and lo.block == hi.block:
            for y in gb:
                out.setdefault(id(y), lo.block)
    for p, q in m.paired:
        if m.ia[p].block is not None:
            out.setdefault(id(m.ib[q]), m.ia[p].block)
    # a gap between two layers: in program order, each kernel is of the layer of the last kernel
    # before it (the anchor that opens the gap included) whose layer is known
    for g, (_, gb) in enumerate(m.gaps):
        cur = bounds[g].block if bounds[g] is not None else None
        for y in gb:
            known = out.get(id(y), y.block)
            if known is not None:
                cur = known
            elif cur is not None:
                out[id(y)] = cur
    return out


def _worth_mirroring(rows: list[Row]) -> bool:
    """Whether B may run one of A's fused kernels as several: an A kernel left removed, or paired
    by a different name where it could be a fused kernel (generated, or launched by no ATen op)."""
    names_b = {r.b.name for r in rows if r.b is not None}
    flops_b = {round(r.b.flops) for r in rows if r.b is not None and r.b.flops}

    def fusable(x: Item) -> bool:  # a kernel B does not launch, that may do several kernels' work
        if x.name in names_b or x.library.startswith("ATen"):
            return False
        return x.generated or not x.aten or (x.klass == "gemm" and x.flops is not None
                                             and round(x.flops) not in flops_b)
    for r in rows:
        if r.status == "removed" and not r.claimed and fusable(r.a):
            return True
        if r.status == "changed" and r.a.name != r.b.name and fusable(r.a):
            return True
    return False


def _unfusions(rows: list[Row], rev: Match) -> tuple[list[Row], list[Fusion]]:
    """Apply the fusions of the reverse match (a kernel of A doing the work of several of B) where
    the forward rows left those kernels unmatched, or paired the A kernel with one of them: the A
    kernel becomes an ``unfused`` row with its parts, each part's row claimed."""
    at = {}
    for i, r in enumerate(rows):
        for it in (r.a, r.b):
            if it is not None:
                at[id(it)] = i
    taken, out = set(), []
    for f in rev.fusions:
        k, parts = f.kernel, f.replaces      # k in A, parts in B
        if f.gemm is not None or not parts:
            continue
        rk = rows[at[id(k)]]
        if rk.replaces or rk.claimed or (rk.b is not None and rk.b not in parts) or rk.status in ("fused", "replaced"):
            continue
        def free(i: int) -> bool:
            r = rows[i]
            return i not in taken and not (r.replaces or r.claimed or r.status in ("fused", "replaced")
                                           or (r.a is not None and r.a is not k))
        # the parts the forward rows left free (one the forward pairing already explains stays)
        keep = [y for y in parts if free(at[id(y)])]
        if not keep or not free(at[id(k)]):
            continue
        if len(keep) < len(parts):
            f = Fusion(k, keep, f.how, None, f.evidence)
        taken |= {at[id(y)] for y in keep} | {at[id(k)]}
        out.append(f)
    if not out:
        return rows, []
    new: list[Row] = []
    for i, r in enumerate(rows):
        if i not in taken:
            new.append(r)
    for f in out:
        n = len(f.replaces)
        if n == 1:  # one kernel for one, seen from B: a replacement, not a fusion undone
            head = Row("replaced", f.kernel, None, f"replaced one for one by {absorbed_ops(f)[0]}",
                       parts=list(f.replaces), how=f.how, evidence=f.evidence)
        else:
            head = Row("unfused", f.kernel, None, f"runs as {n} kernels ({', '.join(absorbed_ops(f))})",
                       parts=list(f.replaces), how=f.how, evidence=f.evidence)
        what = "part of" if n > 1 else "replaces"
        claimed = [Row("added", None, y, f"{what} {f.kernel.name}", unfused_from=f.kernel.name) for y in f.replaces]
        where = min((j for j, r in enumerate(new) if (r.a or r.b).pos > f.kernel.pos and r.a is not None),
                    default=len(new))
        new[where:where] = [head] + claimed
    return new, out

