"""Align two traces step by step and say what changed: same / changed / fused / removed / added.

Unit of comparison: one step's window (every thread, every stream: forward, backward on the
autograd thread, optimizer), its kernels in launch order, each timed as the mean over the steps
that launched the same sequence; on CPU-only traces the leaf compute ops and Inductor's C++
kernels. Structure first, then fusion inside it:

1. **Anchors.** GEMMs, attention, convolution and communication survive compilation. They are
   aligned by dynamic programming (``align.py``) with costs for class, name, GEMM size (FLOPs,
   which reshapes and transposes keep), launching op, pass (forward/backward) and module scope.
   An Inductor template GEMM (``triton_tem_fused_mm…``) is a GEMM anchor: paired with the library
   GEMM it replaced, it is ``changed`` (library → Triton template).
2. **Gaps.** Between two paired anchors (one layer's worth of work), the remaining kernels are
   paired by name or by class and op (``same``/``changed``); then fused kernels claim the eager
   kernels they replaced: an Inductor kernel the ones whose launching ops its name lists
   (``inductor_ops``), shared monotonically among the gap's fused kernels; a template GEMM the
   pointwise kernels of the prologue/epilogue ops it absorbed; a hand-written kernel those in its
   ``nn.Module`` scope (else the whole gap, when it is the gap's only new kernel). Dependencies let
   Inductor move pointwise work past an independent GEMM (``gelu(gate) * up`` runs after the up
   GEMM), so ops a fused kernel lists but its own gap lacks are looked for in the next gap on each
   side, never further. Each eager kernel is claimed at most once.
3. **Totals.** Every A and B kernel is in exactly one row; a row's delta is what it adds to B's
   device time (a fused row: its kernel minus what it replaced; a claimed A row: 0), so the deltas
   sum to the step's device-time delta and the launches saved to the difference in kernel counts.
   Kernels no rule explains are counted as unexplained, never hidden.
"""
from __future__ import annotations

import math

import difflib
import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tracetui.compare.align import FORBIDDEN, MAX_CELLS, align, assign_monotone
from tracetui.read.events import K
from tracetui.model.names import INDUCTOR_RE, inductor_ops
from tracetui.model.trace import Trace

SAME_TOLERANCE = 0.15
"""Matched kernels within 15% (or 2 µs) of each other are 'same'; beyond that, 'changed' (time)."""
SAME_ABS_NS = 2000

COMPILE_PREOPS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode",
                  "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph", "CompiledFunction")
"""CPU-side events torch.compile adds around a compiled region (the 'compile pays pre-ops' story)."""

_VIEW_OPS = {"aten::view", "aten::t", "aten::transpose", "aten::as_strided", "aten::reshape", "aten::expand",
             "aten::_unsafe_view", "aten::permute", "aten::select", "aten::slice", "aten::squeeze",
             "aten::unsqueeze", "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resolve_conj",
             "aten::detach", "aten::alias", "aten::contiguous", "aten::lift_fresh", "aten::split",
             "aten::split_with_sizes", "aten::unbind", "aten::flatten", "aten::unflatten", "aten::view_as",
             "aten::chunk", "aten::narrow", "aten::_reshape_alias", "aten::expand_as", "aten::numpy_T"}
"""Ops that launch nothing: never a unit of work on CPU-only traces."""

_CPU_WORK = ("aten::", "mkldnn::", "quantized::", "c10d::", "_c10d_functional::", "inductor::", "fbgemm::")
"""Namespaces of ops that compute on CPU-only traces (``torch::autograd::AccumulateGrad`` and
other autograd nodes only call them)."""
_CPU_BOOKKEEPING = {"aten::resize_", "aten::set_", "aten::record_stream", "aten::_local_scalar_dense"}

CLASS_MAP = {"gemm": "gemm", "conv": "conv", "attention": "attention", "nccl": "communication",
             "communication": "communication", "pointwise": "pointwise", "reduction": "reduction",
             "norm": "norm", "triton": "triton", "memcpy": "memcpy", "memset": "memset", "other": "other"}
"""Kernel class (``Trace.kernel_info``, old names and the taxonomy's) -> the class the diff uses."""

ANCHOR_CLASSES = frozenset({"gemm", "attention", "conv", "communication"})
"""Work that survives compilation as its own kernel: the diff aligns on these first."""

_ATTN_NAME = re.compile(r"(?i)flash|fmha|attention|attn|sdpa|cudnn_mha")
_ATTN_OP = re.compile(r"scaled_dot_product|_flash_attention|_efficient_attention|_cudnn_attention|flex_attention")
_GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation",
             "_scaled_mm", "_linear_pointwise", "mkldnn_rnn_layer"}
_REDUCE_OPS = re.compile(r"sum|mean|norm|softmax|amax|amin|max|min|var|std|prod|nll_loss|cumsum|argmax|argmin"
                         r"|logsumexp")
_CONV_OPS = re.compile(r"conv|cudnn_convolution|mkldnn_convolution")
_COMM_OPS = re.compile(r"c10d::|nccl|all_reduce|allreduce|all_gather|reduce_scatter|broadcast|alltoall"
                       r"|record_param_comms")
_LAYOUT_OPS = {"clone", "copy", "_to_copy", "permute", "transpose", "view", "_unsafe_view", "cat", "slice",
               "select", "expand", "constant_pad_nd", "contiguous", "reshape", "as_strided", "t", "unsqueeze",
               "squeeze", "split", "split_with_sizes", "convert_element_type", "new_empty_strided", "empty"}
_CONST_OPS = {"arange", "iota", "full", "fill", "zeros", "ones", "zeros_like", "ones_like", "full_like",
              "scalar_tensor", "lift_fresh", "new_zeros", "new_ones", "rand", "randn", "bernoulli", "philox",
              "native_dropout", "rand_like", "randint", "inductor_seeds", "inductor_random", "inductor_lookup_seed"}

ANCHOR_GAP = 2.5
"""Cost of leaving an anchor unpaired: two of them (5) beat pairing GEMMs of different sizes (6),
lose to pairing same-size GEMMs with different names (0.5) or unknown sizes (1)."""

REASONS = (
    ("memset", lambda r: r.item.klass == "memset", "memset (cuBLAS workspace / split-K or a zeroed buffer)"),
    ("memcpy", lambda r: r.item.klass == "memcpy", "memory copy"),
    ("split", lambda r: r.split_of is not None, "second part of a fused reduction (Inductor split it)"),
    ("same call", lambda r: r.sibling is not None, "another kernel of the same op call (ATen runs it in passes)"),
    ("extern", lambda r: r.item.compiled and not r.item.inductor and r.item.op is not None,
     "ATen kernel the compiled graph calls as an extern op"),
    ("attention layout", lambda r: r.layout and r.next_anchor == "attention",
     "layout copy for the attention kernel that follows"),
    ("gemm layout", lambda r: r.layout and r.next_anchor in ("gemm", "conv"),
     "layout copy for the GEMM that follows"),
    ("layout", lambda r: r.layout, "layout copy (a materialised view)"),
    ("constants", lambda r: r.const, "index/constant/random tensor now computed by a kernel"),
)
"""Why a kernel of B has no counterpart in A (first match wins); a kernel none of them fits is
counted as unexplained. ``r`` is a ``_Why``: the item, whether its ops are only layout ops or only
constant/random generators, the class of the next anchor, and the kernel it shares work with."""

REMOVED_REASONS = (
    ("memset", lambda r: r.item.klass in ("memset", "memcpy"), "memset/memcpy no longer needed"),
    ("layout", lambda r: r.layout, "layout copy no longer launched"),
    ("constants", lambda r: r.const, "constant/fill no longer launched"),
)
"""Why a kernel of A has no counterpart in B, when no fused kernel claimed it."""


@dataclass
class Item:
    """One unit of work in a step: a kernel (or, CPU-only, a leaf op / C++ kernel)."""
    node: int
    name: str
    klass: str
    dur_ns: float            # averaged over the steps with the same sequence
    op: str | None           # launching ATen op (innermost), e.g. aten::mm
    chain: list[str]         # ATen ops from the outermost down to the launching one
    module: str | None
    op_node: int | None      # the launching op's node (its Input Dims give out_bytes)
    module_path: tuple = ()  # nn.Module scopes from the outermost down (backward: its forward op's)
    pos: int = 0             # index in the step's sequence
    flops: float | None = None   # GEMM M*N*K (batch included), from the launching op's Input Dims
    backward: bool = False   # launched by a backward op (autograd)
    block: str | None = None  # the repeated layer it belongs to (e.g. ``Block_3``), from its scope
    ind_ops: tuple = ()      # ops an Inductor kernel's name lists
    template: bool = False   # an Inductor template kernel (a Triton GEMM) or its kind
    library: str = ""
    compiled: bool = False   # launched inside a compiled graph (## Call CompiledFxGraph, CompiledFunction…)
    trace: object = field(default=None, repr=False, compare=False)

    @property
    def out_bytes(self) -> float | None:
        """Bytes of the launching op's output, where its shapes say it (read on demand: only
        fused kernels' replaced items need it)."""
        return _out_bytes(self.trace, self.op_node) if self.trace is not None else None

    @property
    def anchor(self) -> bool:
        # an Inductor kernel is generated code, never an anchor, unless it is a template GEMM
        return self.klass in ANCHOR_CLASSES and (self.template or not self.inductor)

    @property
    def generated(self) -> bool:
        """A fused kernel someone generated or wrote (Inductor, a user Triton kernel): one that
        may stand for several eager kernels, whatever class the taxonomy gives it."""
        return self.inductor or self.library.startswith("Triton") or self.klass == "triton"

    @property
    def inductor(self) -> bool:
        return bool(INDUCTOR_RE.match(self.name))

    def op_short(self) -> list[str]:
        """Short names (no namespace, no trailing ``_``) of the ops above it, innermost first."""
        return [_short_op(o) for o in reversed(self.chain)]


def _short_op(name: str) -> str:
    return name.split("::")[-1].rstrip("_")


@dataclass
class Row:
    """One line of the aligned list. Every A item is ``a`` of exactly one row, every B item ``b``
    of exactly one row; ``replaces`` are the A items a B kernel took over (each also has its own
    row, claimed: ``fused_into`` set, delta 0)."""
    status: str              # same | changed | removed | added | fused
    a: Item | None
    b: Item | None
    detail: str = ""
    fused_into: str | None = None
    replaces: list = field(default_factory=list)
    reason: str = ""         # added/removed: why there is no counterpart ("" = unexplained)
    how: str = ""            # fused: name | template | scope | position

    @property
    def name(self) -> str:
        return (self.b or self.a).name

    @property
    def delta_ns(self) -> float:
        """What this row adds to B's device time per step (claimed A rows: 0, their fused row counts them)."""
        if self.fused_into is not None:
            return 0.0
        a = (self.a.dur_ns if self.a else 0.0) + sum(x.dur_ns for x in self.replaces)
        return (self.b.dur_ns if self.b else 0.0) - a

    @property
    def launches_saved(self) -> int:
        if self.fused_into is not None:
            return 0
        return int(self.a is not None) + len(self.replaces) - int(self.b is not None)

    @property
    def explained(self) -> bool:
        return self.status not in ("added", "removed") or bool(self.reason) or self.fused_into is not None


@dataclass
class Fusion:
    kernel: Item
    replaces: list[Item]
    how: str                 # "name" (Inductor op list), "template", "scope", "position"
    gemm: Item | None = None  # a template GEMM: the library GEMM it replaced

    @property
    def saved_ns(self) -> float:
        return sum(i.dur_ns for i in self.replaces) + (self.gemm.dur_ns if self.gemm else 0) - self.kernel.dur_ns

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
    cpu_changes: list[dict] = field(default_factory=list)

    def per_step(self, t: Trace) -> dict:
        return _side(t)


# ---------------------------------------------------------------- items of a step

def _side(t: Trace) -> dict:
    """Per-step figures of one side: the diff's units, and the step windows' own figures."""
    cached = getattr(t, "_diff_side", None)
    if cached is not None:
        return dict(cached)
    items = _items(t)
    steps = max(t.n_steps, 1)
    cpu = float(sum(t.tree.dur[s] for s in t.steps) / steps / 1e3) if t.steps else 0.0
    mem = _mem_per_step(t)
    launches, launch_ns = _launches_per_step(t)
    out = {"file": str(t.path), "device": t.device_name, "gpu": t.has_gpu, "steps": t.n_steps,
           "steps_alike": getattr(t, "_diff_alike", 1),
           "kernels_per_step": len(items), "device_us_per_step": sum(i.dur_ns for i in items) / 1e3,
           "memcpy_memset_per_step": mem[0], "memcpy_memset_us_per_step": mem[1] / 1e3,
           "launches_per_step": launches if t.has_gpu else float(len(items)),
           "launch_cpu_us_per_step": launch_ns / 1e3, "cpu_us_per_step": cpu}
    t._diff_side = out
    return dict(out)


def _launches_per_step(t: Trace) -> tuple[float, float]:
    """Launch calls per step and their CPU time (ns), over the step windows (``runtime_role``:
    the same rule as ``step_breakdown``, without the rest of its work, which a ladder of
    thousand-step traces cannot afford per step)."""
    if not t.has_gpu or not t.steps:
        return 0.0, 0.0
    from tracetui.model.windows import runtime_role
    tree = t.tree
    roles: dict = {}
    n = d = 0
    for s in t.steps:
        rt = t.step_window(s).runtime
        if not rt.size:
            continue
        ids = tree.name_id[rt]
        for i in np.unique(ids).tolist():
            if i not in roles:
                roles[i] = runtime_role(tree.names[i]) == "launch"
        m = np.array([roles[i] for i in ids.tolist()], dtype=bool)
        n += int(m.sum())
        d += int(tree.dur[rt[m]].sum())
    return n / len(t.steps), d / len(t.steps)


def _mem_per_step(t: Trace) -> tuple[float, float]:
    if not t.has_gpu or not t.steps:
        return 0.0, 0.0
    n = d = 0
    for s in t.steps:
        g = t.step_gpu_nodes(s)
        g = g[t.tree.kind[g] != K["kernel"]]
        n += g.size
        d += int(t.tree.dur[g].sum())
    return n / len(t.steps), d / len(t.steps)


def _scopes(t: Trace) -> list[int]:
    """The repeated units to average over: ProfilerSteps, else the root."""
    return t.steps or [0]


def _dims(t: Trace, op: int | None) -> list:
    if op is None:
        return []
    dims = t.args(op).get("Input Dims")
    if not isinstance(dims, list):  # args are data from the file: any type can be there
        return []
    return [d for d in dims if isinstance(d, list) and d and all(type(x) is int and x >= 0 for x in d)]


def _out_bytes(t: Trace, op: int | None) -> float | None:
    """Bytes of the op's output, estimated from its input shapes; None when they do not say
    (no shapes, too few for the op, or fields of other types: args are data from the file)."""
    if op is None:
        return None
    args = t.args(op)
    types = args.get("Input type")
    types = types if isinstance(types, list) else []
    from tracetui.model.perf import DTYPE_BYTES
    shapes = _dims(t, op)
    if not shapes:
        return None
    elem = DTYPE_BYTES.get(types[0], 2) if types and isinstance(types[0], str) else 2
    name = t.name(op).split("::")[-1]
    try:
        if name in ("mm", "addmm", "matmul", "linear", "bmm"):
            if len(shapes) < 2:
                return None
            a, b = (shapes[-2], shapes[-1]) if name == "addmm" and len(shapes) >= 3 else (shapes[0], shapes[1])
            n = b[0] if name == "linear" else b[-1]
            return float(math.prod(a[:-1]) * n * elem)
        return float(max(math.prod(s) for s in shapes) * elem)
    except OverflowError:  # shapes no tensor has
        return None


def gemm_flops(op_name: str, dims: list) -> float | None:
    """M*N*K (times the batch) of a GEMM op from its Input Dims; reshapes and transposes keep it,
    so it names a GEMM across eager and compiled code (forward and the two backward GEMMs share it)."""
    name = _short_op(op_name)
    try:
        if name in ("mm", "matmul", "_scaled_mm") and len(dims) >= 2:
            a, b = dims[0], dims[1]
            return float(math.prod(a[:-1]) * a[-1] * b[-1])
        if name in ("addmm", "_addmm_activation") and len(dims) >= 3:
            a, b = dims[1], dims[2]
            return float(math.prod(a[:-1]) * a[-1] * b[-1])
        if name in ("bmm", "baddbmm") and len(dims) >= 2:
            a, b = (dims[1], dims[2]) if name == "baddbmm" and len(dims) >= 3 else (dims[0], dims[1])
            return float(math.prod(a) * b[-1])
        if name == "linear" and len(dims) >= 2:
            a, w = dims[0], dims[1]
            return float(math.prod(a) * w[0])
    except (IndexError, TypeError, ValueError, OverflowError):  # shapes no tensor has
        return None
    return None


def _step_units(t: Trace, scope: int) -> list[int]:
    """Work units of one step, in launch order."""
    tree = t.tree
    if t.has_gpu:
        g = t.step_gpu_nodes(scope) if scope else t._gpu_nodes[np.argsort(tree.start[t._gpu_nodes], kind="stable")]
        return [int(x) for x in g if tree.kind[x] == K["kernel"]]
    # CPU only: leaf compute ops and Inductor C++ kernels on every thread of the step's process
    if scope:
        w = t.step_window(scope)
        sub = _window_ops(t, w)
    else:
        sub = np.nonzero(tree.kind == K["op"])[0]
    out = []
    for o in sub.tolist():
        name = t.name(o)
        if "cpp_fused" in name or "triton_" in name:
            out.append(o)
            continue
        if not _is_work(name):
            continue
        if any(tree.kind[c] == K["op"] and _is_work(t.name(int(c))) for c in tree.children(o)):
            continue  # not a leaf: its children do the work
        if _inside_kernel(t, o):
            continue
        out.append(o)
    return sorted(out, key=lambda n: tree.start[n])


def _is_work(name: str) -> bool:
    """An op that computes (not a view, not allocator bookkeeping, not an autograd node)."""
    return name.startswith(_CPU_WORK) and name not in _VIEW_OPS and name not in _CPU_BOOKKEEPING


def _window_ops(t: Trace, w) -> np.ndarray:
    """Ops starting inside a step's host interval on any thread of its process."""
    tree = t.tree
    ops = getattr(t, "_diff_ops", None)
    if ops is None:
        ops = np.nonzero(tree.kind == K["op"])[0]
        ops = ops[np.argsort(tree.start[ops], kind="stable")]
        t._diff_ops = ops
        t._diff_op_pids = t.windows._pids(ops)
    lo, hi = np.searchsorted(tree.start[ops], [w.start, w.end])
    sel = ops[lo:hi]
    pids = t._diff_op_pids[lo:hi]
    return sel[np.array([p == w.pid for p in pids.tolist()], dtype=bool)] if sel.size else sel


def _inside_kernel(t: Trace, o: int) -> bool:
    p = int(t.tree.cparent[o])
    while p > 0:
        if "cpp_fused" in t.name(p):
            return True
        p = int(t.tree.cparent[p])
    return False


def _cpu_class(name: str) -> str:
    """Class of a CPU-only unit (an op, or an Inductor C++ kernel) from its name."""
    if INDUCTOR_RE.match(name):
        return "triton"
    short = _short_op(name)
    if short in _GEMM_OPS:
        return "gemm"
    if _ATTN_OP.search(name):
        return "attention"
    if _CONV_OPS.search(short):
        return "conv"
    if _COMM_OPS.search(name):
        return "communication"
    if _REDUCE_OPS.search(short):
        return "reduction"
    return "pointwise"


def _module_path(t: Trace, n: int, op: int | None) -> tuple[tuple, bool]:
    """nn.Module scopes above ``n`` (outermost first), and whether it ran in backward: a backward
    op has no scope of its own, so it takes its forward op's (``Sequence number`` link)."""
    tree = t.tree
    fwd_of = tree.fwd_of
    p = op if op is not None else int(tree.cparent[n])
    backward = False
    while p is not None and p > 0:
        if p in fwd_of:
            backward = True
            n = fwd_of[p]
            break
        p = int(tree.cparent[p])
    path = tuple(t.name(x)[len("nn.Module: "):] for x in tree.path(n) if tree.kind[x] == K["module"])
    return path, backward


def _library(t: Trace, n: int) -> str:
    """``kernel_info(n).library``, decoded once per (name, launched as a user kernel)."""
    cache = t.__dict__.setdefault("_diff_libs", {})
    user = t.launching_op(n) is None
    key = (int(t.tree.name_id[n]), user)
    if key not in cache:
        cache[key] = t.kernel_info(n).library
    return cache[key]


def _in_compiled(t: Trace, op: int | None) -> bool:
    """Whether an op ran inside a torch.compile'd graph (an ancestor is one of COMPILE_PREOPS)."""
    p = op
    while p is not None and p > 0:
        if t.name(p).startswith(("## Call CompiledFxGraph", "CompiledFunction", "Torch-Compiled Region")):
            return True
        p = int(t.tree.cparent[p])
    return False


def _class_name(module: str) -> str:
    return re.sub(r"_\d+$", "", module)


def _items(t: Trace) -> list[Item]:
    cached = getattr(t, "_diff_items", None)
    if cached is not None:
        return cached
    scopes = _scopes(t)
    per = [_step_units(t, s) for s in scopes]
    # the steps that launched the most common sequence of names are the ones averaged
    sig = [tuple(t.tree.name_id[p].tolist()) if p else () for p in per]
    common, _ = Counter(sig).most_common(1)[0]
    alike = [p for p, s in zip(per, sig) if s == common]
    base = alike[0]
    durs = np.mean([t.tree.dur[p] for p in alike], axis=0) if base else []
    t._diff_alike = len(alike)
    infos = t.kernel_classes(np.asarray(base)) if t.has_gpu and base else []
    vocab = _vocab(t)
    items = []
    for j, n in enumerate(base):
        kind = t.kind(n)
        name = t.name(n)
        if kind == "op":  # CPU-only unit: the op is its own launcher
            op = n
            klass = _cpu_class(name)
            chain = t.op_chain(n, stop=(K["module"], K["step"], K["annotation"])) + [name]
            library = "Inductor (C++)" if INDUCTOR_RE.match(name) else "ATen (CPU)"
        else:
            op = t.launching_op(n)
            klass = CLASS_MAP.get(infos[j], "other")
            chain = t.op_chain(n, stop=(K["module"], K["step"], K["annotation"]))
            library = _library(t, n)
        opname = t.name(op) if op is not None else None
        if klass not in ANCHOR_CLASSES and not INDUCTOR_RE.match(name) and klass not in ("memset", "memcpy") and (
                (kind != "op" and _ATTN_NAME.search(name)) or any(_ATTN_OP.search(c) for c in chain[-2:])):
            klass = "attention"
        ind_ops: tuple = ()
        template = False
        m = INDUCTOR_RE.match(name)
        if m:
            ind_ops = tuple(inductor_ops(name, vocab)[0])
            if m.group(1) in ("tem", "mm", "bmm"):
                template = True
                if any(o in _GEMM_OPS for o in ind_ops) or m.group(1) in ("mm", "bmm"):
                    klass = "gemm"
                elif any(_ATTN_OP.search(o) or "attention" in o for o in ind_ops):
                    klass = "attention"
        flops = None
        if klass == "gemm" and opname is not None:
            flops = gemm_flops(opname, _dims(t, op))
        mpath, backward = _module_path(t, n, op)
        if not backward and kind == "op":
            backward = any(c.endswith("Backward0") or c.endswith("Backward1") for c in chain)
        items.append(Item(node=n, name=name, klass=klass, dur_ns=float(durs[j]), op=opname, chain=chain,
                          module=mpath[-1] if mpath else None, op_node=op, module_path=mpath,
                          pos=j, flops=flops, backward=backward, ind_ops=ind_ops, template=template,
                          library=library, compiled=_in_compiled(t, op), trace=t))
    _assign_blocks(items)
    t._diff_items = items
    return items


def _assign_blocks(items: list[Item]) -> None:
    """The layer of each item: the outermost module class with several instances (``Block`` in
    ``Decoder_0 > Block_3 > MLP_3 > Linear_9``), chosen as the one most items fall under."""
    inst: dict = {}
    for it in items:
        for m in it.module_path:
            inst.setdefault(_class_name(m), set()).add(m)
    # a layer holds other modules (Block > Linear): a repeated leaf module (Linear) is not a layer
    inner = {_class_name(m) for it in items for m in it.module_path[:-1]}
    repeated = {c for c, s in inst.items() if len(s) >= 2 and c in inner}
    votes = Counter()
    for it in items:
        c = next((_class_name(m) for m in it.module_path if _class_name(m) in repeated), None)
        if c:
            votes[c] += 1
    if not votes:
        return
    layer = votes.most_common(1)[0][0]
    for it in items:
        it.block = next((m for m in it.module_path if _class_name(m) == layer), None)


def _vocab(t: Trace) -> set:
    v = getattr(t, "_diff_vocab", None)
    if v is None:
        v = {_short_op(n) for n in t.tree.names if "::" in n} | {n.split("::")[-1] for n in t.tree.names if "::" in n}
        t._diff_vocab = v
    return v


# ---------------------------------------------------------------- alignment

def name_diff(a: str, b: str) -> str:
    """The tokens of two kernel names that differ (``_tn_`` vs ``_nn_``, tile, dtype...)."""
    ta, tb = re.split(r"[_<>,:() ]+", a), re.split(r"[_<>,:() ]+", b)
    sm = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
    parts = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            parts.append(f"{'_'.join(ta[i1:i2]) or '∅'} → {'_'.join(tb[j1:j2]) or '∅'}")
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
    op = _codes([_short_op(x.op) if x.op else None for x in both])
    # module classes, not instance numbers (Linear_2 in one trace can be Linear_0 in the other)
    mod = _codes([tuple(_class_name(m) for m in x.module_path) if x.module_path else None for x in both])
    bwd = np.array([x.backward for x in both])
    fl = np.array([x.flops if x.flops else np.nan for x in both])
    ca, cb = cls[:na, None], cls[None, na:]
    cost = np.where(ca == cb, 0.0, FORBIDDEN)
    cost += np.where(name[:na, None] == name[None, na:], 0.0, 0.5)
    fa, fb = fl[:na, None], fl[None, na:]
    known = ~np.isnan(fa) & ~np.isnan(fb)
    with np.errstate(invalid="ignore"):
        cost += np.where(known, np.where(np.isclose(fa, fb, rtol=1e-6), 0.0, 6.0), 1.0)
    oa, ob = op[:na, None], op[None, na:]
    cost += np.where((oa >= 0) & (ob >= 0) & (oa != ob), 0.25, 0.0)
    ma, mb = mod[:na, None], mod[None, na:]
    cost += np.where((ma >= 0) & (mb >= 0) & (ma != mb), 1.0, 0.0)
    cost += np.where(bwd[:na, None] != bwd[None, na:], 2.0, 0.0)
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


def _gap_pairs(ga: list[Item], gb: list[Item]) -> list[tuple[int | None, int | None]]:
    """Pair the kernels of one gap: same name (0), else same class and launching op (1), or two
    fused kernels (1.5); an Inductor kernel never pairs with an eager one of another name (it is
    matched as a fusion)."""
    n, m = len(ga), len(gb)
    cost = np.full((n, m), FORBIDDEN)
    for i, x in enumerate(ga):
        for j, y in enumerate(gb):
            if x.name == y.name:
                cost[i, j] = 0.0
            elif x.generated and y.generated:  # one fused kernel for another (Inductor -> hand-written)
                cost[i, j] = 1.5
            elif y.inductor or x.inductor:
                continue
            elif x.klass == y.klass and x.op == y.op and x.klass not in ("memset", "memcpy"):
                cost[i, j] = 1.0
    return align(cost, np.ones(n), np.ones(m))


@dataclass
class _Why:
    item: Item
    layout: bool
    const: bool
    next_anchor: str | None
    split_of: Item | None = None
    sibling: str | None = None   # the op whose call also launched another kernel of this side


def _ops_of(it: Item) -> set:
    return set(it.ind_ops) if it.inductor else set(it.op_short())


def diff_traces(a: Trace, b: Trace) -> DiffResult:
    ia, ib = _items(a), _items(b)
    vocab = _vocab(a) | _vocab(b)  # A's op names split B's kernel names (nll_loss_forward, not nll_loss)
    for y in ib:
        if y.ind_ops:
            y.ind_ops = tuple(inductor_ops(y.name, vocab)[0])
    anchors = _align_anchors([x for x in ia if x.anchor], [y for y in ib if y.anchor])
    paired = [(p, q) for p, q in anchors if p is not None and q is not None]
    # gaps between consecutive paired anchors (sentinels at both ends)
    bounds = [(-1, -1)] + paired + [(len(ia), len(ib))]
    gaps = [(ia[p0 + 1:p1], ib[q0 + 1:q1]) for (p0, q0), (p1, q1) in zip(bounds[:-1], bounds[1:])]
    rows_of_gap: list[list[tuple[Item | None, Item | None]]] = []
    pair_of: dict = {}       # id(B item) -> A item paired with it (same/changed)
    claimed: dict = {}       # id(A item) -> Fusion
    fusions: list[Fusion] = []
    fusion_of_b: dict = {}
    for ga, gb in gaps:
        order = []
        for i, j in _gap_pairs(ga, gb):
            x, y = (ga[i] if i is not None else None), (gb[j] if j is not None else None)
            if x is not None and y is not None:
                pair_of[id(y)] = x
            order.append((x, y))
        rows_of_gap.append(order)
    # a fused kernel paired with a fused kernel of A is a fusion instead when the gap also holds
    # A's unpaired GEMMs of its module scope (a dual-GEMM kernel replacing two GEMMs and a GeGLU)
    for g, (ga, gb) in enumerate(gaps):
        loose = [x for x in ga if x.anchor]
        for y in gb:
            x = pair_of.get(id(y))
            if x is not None and x.name != y.name and x.generated and y.generated and y.module_path and any(
                    z.module_path[:len(y.module_path)] == y.module_path for z in loose):
                del pair_of[id(y)]
                order = rows_of_gap[g]
                k = order.index((x, y))
                order[k:k + 1] = [(x, None), (None, y)]
    paired_a = {id(x) for x in pair_of.values()}
    free = lambda x: id(x) not in claimed and id(x) not in paired_a  # noqa: E731

    def claim(kernel: Item, xs: list[Item], how: str, gemm: Item | None = None) -> None:
        f = fusion_of_b.get(id(kernel))
        if f is None:
            f = Fusion(kernel, [], how, gemm)
            fusion_of_b[id(kernel)] = f
            fusions.append(f)
        for x in xs:
            claimed[id(x)] = f
            f.replaces.append(x)
        f.replaces.sort(key=lambda x: x.pos)

    # Inductor kernels: each gap's fused kernels share the gap's eager kernels monotonically
    for g, (ga, gb) in enumerate(gaps):
        ks = [y for y in gb if y.inductor and not y.template and id(y) not in pair_of]
        xs = [x for x in ga if free(x) and not x.anchor]
        if not ks or not xs:
            continue
        match = np.array([[bool(set(x.op_short()) & set(y.ind_ops)) for y in ks] for x in xs], dtype=bool)
        rel_x = (np.arange(len(xs)) + 0.5) / len(xs)
        rel_y = (np.arange(len(ks)) + 0.5) / len(ks)
        tie = 0.01 * np.abs(rel_x[:, None] - rel_y[None, :])
        for i, j in enumerate(assign_monotone(match, tie)):
            if j >= 0:
                claim(ks[j], [xs[i]], "name")
    # ops a fused kernel lists but found nowhere in its gap: the next gap on each side
    for g, (ga, gb) in enumerate(gaps):
        for y in gb:
            if not y.inductor or y.template or id(y) in pair_of:
                continue
            f = fusion_of_b.get(id(y))
            have = set()
            for x in (f.replaces if f else []):
                have |= set(x.op_short())
            missing = [o for o in y.ind_ops if o not in have and o not in _LAYOUT_OPS]
            for o in missing:
                for h, seq in ((g - 1, reversed(gaps[g - 1][0]) if g >= 1 else ()),
                               (g + 1, gaps[g + 1][0] if g + 1 < len(gaps) else ())):
                    hit = next((x for x in seq if free(x) and not x.anchor and o in x.op_short()
                                and not _wanted_there(x, gaps[h][1], pair_of)), None)
                    if hit is not None:
                        claim(y, [hit], "name")
                        break
    # template GEMMs: the prologue/epilogue ops they list claim pointwise kernels near them, once
    # Inductor's pointwise kernels took theirs (a template's name can list the ops of the buffer
    # it reads, which a separate pointwise kernel computed: then that kernel replaced them)
    for k, (p, q) in enumerate(paired):
        y = ib[q]
        if not y.template:
            continue
        extra = [o for o in y.ind_ops if o not in _GEMM_OPS and o not in _LAYOUT_OPS]
        # the gap before the GEMM (k), then the one before that (prologue), then after (epilogue)
        near = [k, k - 1, k + 1] if 0 <= k - 1 else [k, k + 1]
        got = []
        for o in extra:
            for g in near:
                if not 0 <= g < len(gaps):
                    continue
                hit = next((x for x in (reversed(gaps[g][0]) if g <= k else gaps[g][0])  # nearest first
                            if free(x) and x not in got and not x.anchor and o in x.op_short()), None)
                if hit is not None:
                    got.append(hit)
                    break
        claim(y, got, "template", gemm=ia[p])
    # other new kernels (hand-written Triton, library fusions): by nn.Module scope, else position
    for g, (ga, gb) in enumerate(gaps):
        new = [y for y in gb if id(y) not in pair_of and id(y) not in fusion_of_b and not y.inductor
               and _may_fuse(y)]
        for y in new:
            pool = [x for h in (g, g - 1, g + 1) if 0 <= h < len(gaps) for x in gaps[h][0]
                    if h == g or not x.anchor]
            if y.module_path:
                rep = [x for x in pool if free(x) and x.module_path[:len(y.module_path)] == y.module_path]
                how = "scope"
            else:
                rep = [x for x in ga if free(x)] if len(new) == 1 else []
                how = "position"
            if len(rep) >= 2 or (rep and how == "scope"):
                claim(y, sorted(rep, key=lambda x: x.pos), how)
    # rows in aligned order
    rows: list[Row] = []
    anchor_rows = {}
    for p, q in anchors:
        if p is not None and q is not None:
            r = _same_or_changed(ia[p], ib[q])
            f = fusion_of_b.get(id(ib[q]))
            if f is not None and f.replaces:
                r.replaces = list(f.replaces)
                r.how = "template"
                r.detail += f"; absorbed {', '.join(_absorbed_ops(f))}"
            anchor_rows[(p, q)] = r
    for k, order in enumerate(rows_of_gap):
        for x, y in order:
            rows.append(_row(x, y, claimed, fusion_of_b, ia, ib))
        if k < len(paired):
            rows.append(anchor_rows[paired[k]])
    # unpaired anchors sit in gaps already (they were not paired); nothing else to place
    _explain(rows, ia, ib)
    removed_ops, added_ops = _op_changes(a, b)
    chains = []
    for r in rows:
        if r.a is not None and r.b is not None and r.a.chain != r.b.chain:
            chains.append({"kernel": r.name, "a": r.a.chain, "b": r.b.chain})
    fusions = [f for f in fusions if f.replaces]
    return DiffResult(a, b, rows, fusions, removed_ops, added_ops, chains, cpu_changes=_cpu_changes(a, b))


def _may_fuse(y: Item) -> bool:
    """A new kernel that is not Inductor's but may be a fusion: a user Triton kernel, or a kernel
    named fused outside ATen (ATen's own kernels each do one op, never several)."""
    return y.generated or ("fused" in y.name.lower() and not y.library.startswith("ATen")
                                   and not y.anchor and y.klass not in ("memset", "memcpy"))


def _wanted_there(x: Item, gb: list[Item], pair_of: dict) -> bool:
    """An eager kernel that a fused kernel of its own gap could still take (leave it to that one)."""
    return any(y.inductor and id(y) not in pair_of and set(x.op_short()) & set(y.ind_ops) for y in gb)


def _absorbed_ops(f: Fusion) -> list[str]:
    """What each replaced kernel did, in order, once each: the op the fused kernel's name lists,
    else its launching op, else (a kernel launched outside any op) its own name."""
    def one(x: Item) -> str:
        ops = x.op_short()
        return next((o for o in ops if o in f.kernel.ind_ops), ops[0] if ops else x.name)
    return list(dict.fromkeys(one(x) for x in f.replaces))


def _row(x: Item | None, y: Item | None, claimed: dict, fusion_of_b: dict, ia, ib) -> Row:
    if x is not None and y is not None:
        return _same_or_changed(x, y)
    if x is not None:
        f = claimed.get(id(x))
        if f is not None:
            return Row("removed", x, None, f"fused into {f.kernel.name}", fused_into=f.kernel.name)
        return Row("removed", x, None)
    f = fusion_of_b.get(id(y))
    if f is not None and f.replaces and f.how != "template":
        ops = _absorbed_ops(f)
        return Row("fused", None, y, f"replaces {len(f.replaces)} kernel{'s' * (len(f.replaces) != 1)} "
                                     f"({', '.join(ops)})", replaces=list(f.replaces), how=f.how)
    return Row("added", None, y)


def _explain(rows: list[Row], ia: list[Item], ib: list[Item]) -> None:
    """Give added and removed rows their reason (``REASONS``), or leave them unexplained."""
    next_anchor_b = _next_anchor(ib)
    calls_b = Counter(y.op_node for y in ib if y.op_node is not None)
    next_anchor_a = _next_anchor(ia)
    claimed_ops: dict = {}
    for r in rows:
        if r.status == "fused":
            for x in r.replaces:
                for o in x.op_short()[:1]:
                    claimed_ops.setdefault(o, r.b)
    for r in rows:
        if r.status == "added":
            it = r.b
            ops = _ops_of(it)
            why = _Why(it, layout=bool(ops) and ops <= _LAYOUT_OPS, const=bool(ops) and bool(ops & _CONST_OPS)
                       and ops <= (_CONST_OPS | _LAYOUT_OPS | {"add", "mul", "lt", "gt", "le", "ge"}),
                       next_anchor=next_anchor_b[it.pos])
            if it.inductor and any(o in claimed_ops for o in ops):
                why.split_of = next(claimed_ops[o] for o in ops if o in claimed_ops)
            if it.op_node is not None and calls_b[it.op_node] > 1 and not it.inductor:
                why.sibling = it.op
            for _, test, text in REASONS:
                if test(why):
                    r.reason = text + (f" ({why.split_of.name})" if why.split_of is not None and "split" in text else
                                       f" ({why.sibling})" if why.sibling and "same op call" in text else
                                       f" ({it.op})" if "extern" in text else "")
                    break
        elif r.status == "removed" and r.fused_into is None:
            it = r.a
            ops = set(it.op_short()[:1])
            why = _Why(it, layout=bool(ops) and ops <= _LAYOUT_OPS, const=bool(ops) and ops <= _CONST_OPS,
                       next_anchor=next_anchor_a[it.pos])
            for _, test, text in REMOVED_REASONS:
                if test(why):
                    r.reason = text
                    break


def _next_anchor(items: list[Item]) -> list[str | None]:
    out: list[str | None] = [None] * len(items)
    nxt = None
    for i in range(len(items) - 1, -1, -1):
        out[i] = nxt
        if items[i].anchor:
            nxt = items[i].klass
    return out


# ---------------------------------------------------------------- CPU side

def _op_counts(t: Trace) -> tuple[Counter, Counter]:
    """Per-step count and CPU time of every op/annotation name (steps themselves excluded)."""
    steps = max(len(t.steps), 1)
    tree = t.tree
    sel = np.nonzero(np.isin(tree.kind, [K["op"], K["annotation"]]) & (t.roll.step_of >= 0 if t.steps else True))[0]
    ids, inv = np.unique(tree.name_id[sel], return_inverse=True)
    n = np.bincount(inv.ravel(), minlength=ids.size)
    d = np.bincount(inv.ravel(), weights=tree.dur[sel], minlength=ids.size)
    cnt, cpu = Counter(), Counter()
    for i, c, x in zip(ids.tolist(), n.tolist(), d.tolist()):
        name = _norm_op(tree.names[i])
        cnt[name] += c / steps
        cpu[name] += x / steps
    return cnt, cpu


def _norm_op(name: str) -> str:
    return re.sub(r"## Call CompiledFxGraph \w+ ##", "## Call CompiledFxGraph <hash> ##", name)


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


def _self_per_step(t: Trace) -> Counter:
    """CPU self time per step of every host event name in the steps (ops, annotations, runtime calls,
    modules): self times add up to the steps' CPU time without counting a nested op twice."""
    cached = getattr(t, "_diff_self", None)
    if cached is not None:
        return cached
    tree = t.tree
    steps = max(len(t.steps), 1)
    sel = np.nonzero(np.isin(tree.kind, [K["op"], K["annotation"], K["runtime"]]) &
                     ((t.roll.step_of >= 0) if t.steps else True))[0]
    ids, inv = np.unique(tree.name_id[sel], return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=t.roll.cpu_self[sel], minlength=ids.size)
    out = Counter()
    for i, v in zip(ids.tolist(), tot.tolist()):
        out[_norm_op(tree.names[i])] += v / steps
    t._diff_self = out
    return out


def _cpu_changes(a: Trace, b: Trace) -> list[dict]:
    """Host events whose CPU self time per step changed, biggest first."""
    sa, sb = _self_per_step(a), _self_per_step(b)
    out = []
    for name in set(sa) | set(sb):
        d = sb.get(name, 0.0) - sa.get(name, 0.0)
        if abs(d) >= 1000:  # 1 µs per step
            out.append({"name": name, "a_self_us": sa.get(name, 0.0) / 1e3, "b_self_us": sb.get(name, 0.0) / 1e3,
                        "delta_us": d / 1e3, "compile_preop": any(name.startswith(p) for p in COMPILE_PREOPS)})
    return sorted(out, key=lambda d: -abs(d["delta_us"]))


def diff_dict(d: DiffResult, top: int = 0) -> dict:
    """The JSON report (``changes.diff_dict``; schema in README)."""
    from tracetui.compare.changes import diff_dict as _diff_dict
    return _diff_dict(d, top)
