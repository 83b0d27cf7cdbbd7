"""Align two traces and classify what changed: same / changed / removed / added / fused.

Unit of comparison, per step (averaged over steps): the GPU kernels of each step in launch order;
on CPU-only traces, the leaf compute ops and Inductor's C++ kernels. Alignment is a sequence
alignment on names within the step (not by index); a B kernel that replaces several A kernels is
*fused*: for Inductor kernels from the ops their name lists (matched to the ATen ops that launched
the A kernels in the same step), for other kernels from position (the A kernels in the gap it fills).
"""
from __future__ import annotations

import math

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .events import K
from .names import INDUCTOR_RE, inductor_ops
from .trace import Trace

SAME_TOLERANCE = 0.15
"""Matched kernels within 15% (or 2 µs) of each other are 'same'; beyond that, 'changed' (time)."""
SAME_ABS_NS = 2000

COMPILE_PREOPS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode",
                  "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph", "CompiledFunction")
"""CPU-side events torch.compile adds around a compiled region (the 'compile pays pre-ops' story)."""

_VIEW_OPS = {"aten::view", "aten::t", "aten::transpose", "aten::as_strided", "aten::reshape", "aten::expand",
             "aten::_unsafe_view", "aten::permute", "aten::select", "aten::slice", "aten::squeeze",
             "aten::unsqueeze", "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resolve_conj",
             "aten::detach", "aten::alias", "aten::contiguous", "aten::lift_fresh"}


@dataclass
class Item:
    """One unit of work in a step: a kernel (or, CPU-only, a leaf op / C++ kernel)."""
    node: int
    name: str
    klass: str
    dur_ns: float            # averaged over steps
    op: str | None           # launching ATen op (innermost), e.g. aten::mm
    chain: list[str]         # ATen ops from the outermost down to the launching one
    module: str | None
    out_bytes: float | None  # bytes of the launching op's output, where shapes say it
    module_path: tuple = ()  # nn.Module scopes from the outermost down


@dataclass
class Row:
    status: str              # same | changed | removed | added | fused
    a: Item | None
    b: Item | None
    detail: str = ""
    fused_into: str | None = None

    @property
    def name(self) -> str:
        return (self.b or self.a).name


@dataclass
class Fusion:
    kernel: Item
    replaces: list[Item]
    how: str                 # "name" (Inductor op list) or "position" (gap between matched kernels)

    @property
    def saved_ns(self) -> float:
        return sum(i.dur_ns for i in self.replaces) - self.kernel.dur_ns

    @property
    def intermediate_bytes(self) -> float:
        """Bytes of the intermediates that no longer exist: every replaced output but the last.

        Each was written to HBM and read back, so the traffic saved is twice this.
        """
        return float(sum(i.out_bytes or 0 for i in self.replaces[:-1]))


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

    def per_step(self, t: Trace) -> dict:
        steps = max(t.n_steps, 1)
        items = _items(t)
        return {"file": str(t.path), "device": t.device_name, "steps": t.n_steps,
                "kernels_per_step": len(items), "device_us_per_step": sum(i.dur_ns for i in items) / 1e3,
                "cpu_us_per_step": float(sum(t.tree.dur[s] for s in t.steps) / steps / 1e3) if t.steps else 0.0}


def _scopes(t: Trace) -> list[int]:
    """The repeated units to average over: ProfilerSteps, else the root."""
    return t.steps or [0]


def _out_bytes(t: Trace, op: int | None) -> float | None:
    """Bytes of the op's output, estimated from its input shapes; None when they do not say
    (no shapes, too few for the op, or fields of other types: args are data from the file)."""
    if op is None:
        return None
    args = t.args(op)
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else []
    from .perf import DTYPE_BYTES
    shapes = [d for d in dims if isinstance(d, list) and d and all(type(x) is int and x >= 0 for x in d)]
    if not shapes:
        return None
    elem = DTYPE_BYTES.get(types[0], 2) if types and isinstance(types[0], str) else 2
    name = t.name(op).split("::")[-1]
    try:
        if name in ("mm", "addmm", "matmul", "linear", "bmm"):
            if len(shapes) < 2:
                return None
            a, b = (shapes[-2], shapes[-1]) if name == "addmm" else (shapes[0], shapes[1])
            n = b[0] if name == "linear" else b[-1]
            return float(math.prod(a[:-1]) * n * elem)
        return float(max(math.prod(s) for s in shapes) * elem)
    except OverflowError:  # shapes no tensor has
        return None


def _step_units(t: Trace, scope: int) -> list[int]:
    """Work units of one step, in launch order."""
    tree = t.tree
    if t.has_gpu:
        g = t.step_gpu_nodes(scope) if scope else t.gpu_descendants(scope)  # a step: its whole window
        return [int(x) for x in g if tree.kind[x] == K["kernel"]]
    # CPU only: leaf compute ops (no op children) and Inductor C++ kernels, by start time
    sub = np.nonzero((t.roll.step_of == scope) if scope else np.ones(len(tree.kind), bool))[0]
    ops = sub[tree.kind[sub] == K["op"]]
    out = []
    for o in ops.tolist():
        name = t.name(o)
        if "cpp_fused" in name or "triton_" in name:
            out.append(o)
            continue
        if name in _VIEW_OPS or not name.startswith("aten::"):
            continue
        if any(tree.kind[c] == K["op"] and t.name(int(c)) not in _VIEW_OPS for c in tree.children(o)):
            continue  # not a leaf: its children do the work
        if _inside_kernel(t, o):
            continue
        out.append(o)
    return sorted(out, key=lambda n: tree.start[n])


def _inside_kernel(t: Trace, o: int) -> bool:
    p = int(t.tree.cparent[o])
    while p > 0:
        if "cpp_fused" in t.name(p):
            return True
        p = int(t.tree.cparent[p])
    return False


def _items(t: Trace) -> list[Item]:
    cached = getattr(t, "_diff_items", None)
    if cached is not None:
        return cached
    scopes = _scopes(t)
    per = [_step_units(t, s) for s in scopes]
    base = per[0]
    names0 = [t.name(n) for n in base]
    same_shape = [p for p in per if [t.name(n) for n in p] == names0]
    durs = np.mean([[t.tree.dur[n] for n in p] for p in same_shape], axis=0) if base else []
    items = []
    for j, n in enumerate(base):
        kind = t.kind(n)
        if kind == "op":  # CPU-only unit: the op is its own launcher
            op = n
            klass = "triton" if "fused" in t.name(n) else "op"
        else:
            op = t.launching_op(n)
            klass = t.kernel_info(n).klass
        mod = t.scope_module(n)
        mpath = tuple(t.name(p) for p in t.tree.path(n) if t.tree.kind[p] == K["module"])
        items.append(Item(node=n, name=t.name(n), klass=klass, dur_ns=float(durs[j]),
                          op=t.name(op) if op is not None else None, chain=t.op_chain(n, stop=(K["module"], K["step"], K["annotation"])) + ([t.name(n)] if kind == "op" else []),
                          module=t.name(mod)[len("nn.Module: "):] if mod else None, out_bytes=_out_bytes(t, op),
                          module_path=mpath))
    t._diff_items = items
    return items


def name_diff(a: str, b: str) -> str:
    """The tokens of two kernel names that differ (``_tn_`` vs ``_nn_``, tile, dtype...)."""
    ta, tb = re.split(r"[_<>,:() ]+", a), re.split(r"[_<>,:() ]+", b)
    sm = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
    parts = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            parts.append(f"{'_'.join(ta[i1:i2]) or '∅'} → {'_'.join(tb[j1:j2]) or '∅'}")
    return "; ".join(parts)


def _same_or_changed(a: Item, b: Item) -> Row:
    d = abs(a.dur_ns - b.dur_ns)
    if a.name == b.name and (d <= SAME_ABS_NS or d <= SAME_TOLERANCE * max(a.dur_ns, 1)):
        return Row("same", a, b)
    if a.name == b.name:
        return Row("changed", a, b, f"time {a.dur_ns / 1e3:.1f} → {b.dur_ns / 1e3:.1f} µs")
    return Row("changed", a, b, name_diff(a.name, b.name))


def diff_traces(a: Trace, b: Trace) -> DiffResult:
    ia, ib = _items(a), _items(b)
    sm = difflib.SequenceMatcher(a=[i.name for i in ia], b=[i.name for i in ib], autojunk=False)
    rows: list[Row] = []
    gaps: list[tuple[list[Item], list[Item]]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            rows.extend(_same_or_changed(x, y) for x, y in zip(ia[i1:i2], ib[j1:j2]))
        else:
            gaps.append((ia[i1:i2], ib[j1:j2]))
            rows.append(Row("gap", None, None, detail=str(len(gaps) - 1)))
    vocab = {i.op.split("::")[-1] for i in ia if i.op} | {n.split("::")[-1] for n in a.tree.names if n.startswith("aten::")}
    claimed: set[int] = set()
    fusions: list[Fusion] = []
    # 1) Inductor kernels: by the ops in their names, anywhere in the step
    for ga, gb in gaps:
        for kb in gb:
            ops, _ = inductor_ops(kb.name, vocab)
            if not ops:  # not an Inductor kernel (whatever its class: pointwise, reduction, norm, gemm template)
                continue
            opset = set(ops)
            rep = [x for x in ia if id(x) not in claimed and x.op and x.op.split("::")[-1] in opset
                   and x.klass not in ("gemm",) and not _matched(rows, x)]
            if rep:
                claimed.update(id(x) for x in rep)
                fusions.append(Fusion(kb, rep, "name"))
    # 2) other new kernels (hand-written Triton, Liger-style): by scope when modules are recorded
    #    (the unmatched A kernels inside the new kernel's nn.Module), else by position in the gap
    matched_a = {id(r.a) for r in rows if r.a is not None}
    for ga, gb in gaps:
        for kb in gb:
            # a GEMM launched by an op is a library GEMM, not a fusion; a user kernel (no op) may fuse
            if any(f.kernel is kb for f in fusions) or kb.klass in ("memset", "memcpy") \
                    or (kb.klass == "gemm" and kb.op is not None) \
                    or INDUCTOR_RE.match(kb.name):  # an Inductor name is authoritative: no guessing
                continue
            if kb.module_path:
                rep = [x for x in ia if id(x) not in claimed and id(x) not in matched_a
                       and x.module_path[:len(kb.module_path)] == kb.module_path]
                how = "scope"
            else:
                rep = [x for x in ga if id(x) not in claimed] if len([y for y in gb if y.klass not in
                                                                      ("memset", "memcpy")]) == 1 else []
                how = "position"
            if len(rep) >= 2:
                claimed.update(id(x) for x in rep)
                fusions.append(Fusion(kb, rep, how))
    fused_b = {id(f.kernel): f for f in fusions}
    into = {id(x): f.kernel.name for f in fusions for x in f.replaces}
    out: list[Row] = []
    for r in rows:
        if r.status != "gap":
            out.append(r)
            continue
        ga, gb = gaps[int(r.detail)]
        # a new kernel doing an old one's job in the same place: 'changed' (name differs)
        la = [x for x in ga if id(x) not in into]
        lb = [y for y in gb if id(y) not in fused_b]
        pairs = []
        for y in lb:
            cand = next((x for x in la if x.klass == y.klass and x.op == y.op and x not in [p[0] for p in pairs]), None)
            if cand is not None:
                pairs.append((cand, y))
        paired_a = {id(p[0]) for p in pairs}
        paired_b = {id(p[1]) for p in pairs}
        for x in ga:
            if id(x) in into:
                out.append(Row("removed", x, None, f"fused into {into[id(x)]}", fused_into=into[id(x)]))
            elif id(x) not in paired_a:
                out.append(Row("removed", x, None))
        for x, y in pairs:
            out.append(_same_or_changed(x, y))
        for y in gb:
            if id(y) in fused_b:
                f = fused_b[id(y)]
                out.append(Row("fused", None, y, f"replaces {len(f.replaces)} kernels"))
            elif id(y) not in paired_b:
                out.append(Row("added", None, y))
    removed_ops, added_ops = _op_changes(a, b)
    chains = []
    for r in out:
        if r.a is not None and r.b is not None and r.a.chain != r.b.chain:
            chains.append({"kernel": r.name, "a": r.a.chain, "b": r.b.chain})
    return DiffResult(a, b, out, fusions, removed_ops, added_ops, chains)


def _matched(rows: list[Row], x: Item) -> bool:
    return any(r.a is x for r in rows if r.status in ("same", "changed"))


def _op_counts(t: Trace) -> tuple[Counter, Counter]:
    """Per-step count and CPU time of every op/annotation name (steps themselves excluded)."""
    steps = max(len(t.steps), 1)
    tree = t.tree
    sel = np.nonzero(np.isin(tree.kind, [K["op"], K["annotation"]]) & (t.roll.step_of >= 0 if t.steps else True))[0]
    cnt, cpu = Counter(), Counter()
    for n in sel.tolist():
        name = t.name(n)
        name = re.sub(r"## Call CompiledFxGraph \w+ ##", "## Call CompiledFxGraph <hash> ##", name)
        cnt[name] += 1
        cpu[name] += int(tree.dur[n])
    return (Counter({k: v / steps for k, v in cnt.items()}), Counter({k: v / steps for k, v in cpu.items()}))


def _op_changes(a: Trace, b: Trace) -> tuple[list[dict], list[dict]]:
    ca, ta = _op_counts(a)
    cb, tb = _op_counts(b)
    removed, added = [], []
    for name in sorted(set(ca) | set(cb)):
        x, y = ca.get(name, 0), cb.get(name, 0)
        if x > y:
            removed.append({"name": name, "a_per_step": x, "b_per_step": y, "a_cpu_us": ta[name] / 1e3,
                            "b_cpu_us": tb.get(name, 0) / 1e3})
        elif y > x:
            added.append({"name": name, "a_per_step": x, "b_per_step": y, "a_cpu_us": ta.get(name, 0) / 1e3,
                          "b_cpu_us": tb[name] / 1e3,
                          "compile_preop": any(name.startswith(p) for p in COMPILE_PREOPS)})
    key = lambda d: -max(d["a_cpu_us"], d["b_cpu_us"])
    return sorted(removed, key=key), sorted(added, key=key)


def diff_dict(d: DiffResult) -> dict:
    """The JSON report (schema in README)."""
    def item_us(i):
        return i.dur_ns / 1e3 if i else None
    return {
        "a": d.per_step(d.a), "b": d.per_step(d.b),
        "kernels": [{"name": r.name, "status": r.status, "a_us": item_us(r.a), "b_us": item_us(r.b),
                     "a_name": r.a.name if r.a else None, "detail": r.detail,
                     "op_a": r.a.op if r.a else None, "op_b": r.b.op if r.b else None}
                    for r in d.rows],
        "fused": [{"kernel": f.kernel.name, "replaces": [x.name for x in f.replaces],
                   "ops": sorted({x.op for x in f.replaces if x.op}), "saved_us": f.saved_ns / 1e3,
                   "a_us": sum(x.dur_ns for x in f.replaces) / 1e3, "b_us": f.kernel.dur_ns / 1e3,
                   "launches_saved": len(f.replaces) - 1, "intermediate_bytes": f.intermediate_bytes,
                   "hbm_traffic_saved_bytes": 2 * f.intermediate_bytes,
                   "matched_by": f.how, "module_a": sorted({x.module for x in f.replaces if x.module})}
                  for f in d.fusions],
        "removed_ops": d.removed_ops, "added_ops": d.added_ops, "chains": d.chains,
    }
