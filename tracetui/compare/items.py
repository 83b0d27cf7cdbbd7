"""The units a diff compares: one step's kernels (CPU-only: leaf ops and Inductor C++ kernels),
each with what the trace says about it: launching op and its chain, nn.Module scope, direction
(forward/backward), layer, GEMM size from the recorded shapes, and the evidence that it does
GEMM work (``work``), which fusion by work (``fusion.py``) reads.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from tracetui.read.events import K
from tracetui.model.names import INDUCTOR_RE, inductor_ops
from tracetui.model.taxonomy import name_class, op_class
from tracetui.model.trace import Trace

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



def op_is(op_name: str, klass: str) -> bool:
    """Whether the taxonomy's op rules give ``op_name``'s kernels ``klass``. A short name (as an
    Inductor kernel's name lists its ops: ``mm``, ``addmm``) is read as ``aten::NAME``."""
    if "::" not in op_name and not op_name[:1].isupper():
        op_name = "aten::" + op_name
    return op_class(op_name) == klass
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

WRAPPER_MODULES = re.compile(r"^(OptimizedModule|DistributedDataParallel|FullyShardedDataParallel|FSDPModule"
                             r"|DataParallel|CheckpointWrapper|ActivationWrapper)_\d+$")
"""Modules that only wrap the user's model (torch.compile's, DDP's, FSDP's, checkpointing's): a
scope is compared without them, so ``OptimizedModule_0 > GeGLU_0`` is ``GeGLU_0``."""

ATEN_NS = ("aten::", "c10d::", "_c10d_functional::", "mkldnn::", "quantized::", "prims::")
"""Namespaces of ops whose kernels each do that one op (a fused kernel is launched by anything else:
an autograd Function, a custom op, Inductor's generated code, or no op at all)."""


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
    mkn: tuple | None = None  # GEMM (M, K, N) per GEMM it runs, from the recorded shapes
    work: tuple = ()         # evidence that it does GEMM work ("launching op aten::mm", ...)
    exact: bool = False      # ind_ops come from Inductor's own provenance record, not the name
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

    @cached_property
    def inductor(self) -> bool:
        return bool(INDUCTOR_RE.match(self.name))

    @cached_property
    def scope(self) -> tuple:
        """Its nn.Module scope without wrapper modules (``WRAPPER_MODULES``)."""
        return tuple(m for m in self.module_path if not WRAPPER_MODULES.match(m))

    @property
    def aten(self) -> bool:
        """Launched by an ATen (or c10d, mkldnn ...) op: a kernel that does that one op."""
        return self.op is not None and self.op.startswith(ATEN_NS)

    def in_scope(self, outer: tuple) -> bool:
        """Whether its scope lies inside ``outer`` (a scope of the other trace)."""
        return bool(outer) and self.scope[:len(outer)] == outer

    def op_short(self) -> list[str]:
        """Short names (no namespace, no trailing ``_``) of the ops above it, innermost first."""
        return [_short_op(o) for o in reversed(self.chain)]


def _short_op(name: str) -> str:
    return name.split("::")[-1].rstrip("_")

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


def gemm_mkn(op_name: str, dims: list) -> list[tuple]:
    """(M, K, N) of the GEMM an ATen GEMM op runs, from its Input Dims ([] when they do not say)."""
    name = _short_op(op_name)
    try:
        if name in ("mm", "matmul", "_scaled_mm") and len(dims) >= 2:
            a, b = dims[0], dims[1]
        elif name in ("addmm", "_addmm_activation", "baddbmm") and len(dims) >= 3:
            a, b = dims[1], dims[2]
        elif name == "bmm" and len(dims) >= 2:
            a, b = dims[0], dims[1]
        elif name == "linear" and len(dims) >= 2:
            return [(math.prod(dims[0][:-1]), dims[0][-1], dims[1][0])]
        else:
            return []
        return [(math.prod(a[:-1]), a[-1], b[-1])]
    except (IndexError, TypeError, ValueError, OverflowError):  # shapes no tensor has
        return []


def weight_gemms(dims: list) -> list[tuple]:
    """(M, K, N) of each GEMM an op that is not ATen's runs (an autograd Function, a custom op, an
    Inductor template), read from its shapes: the first input of rank >= 2 is the activation
    [..., K] (M rows), and each other 2-D input [N, K] or [K, N] that is not itself M rows is a
    weight. ``_FusedGeGLUFn(x [64, 128, 768], w_gate [3072, 768], w_up [3072, 768])`` runs two
    GEMMs of 8192 x 768 x 3072."""
    act = next((d for d in dims if len(d) >= 2), None)
    if act is None:
        return []
    m, k = math.prod(act[:-1]), act[-1]
    out = []
    for d in dims:
        if d is act or len(d) != 2 or m in d or k <= 1:
            continue
        if d[1] == k:
            out.append((m, k, d[0]))
        elif d[0] == k:
            out.append((m, k, d[1]))
    return out


def _gemm_work(t: Trace, it: "Item", m) -> None:
    """Fill ``mkn``, ``flops`` and ``work`` (the evidence that ``it`` does GEMM work, strongest
    first): its launching ATen GEMM op, an autograd Function / custom op / Inductor template whose
    shapes hold weights, or its class from the name rules alone."""
    dims = _dims(t, it.op_node)
    mkn: list = []
    if it.op is not None and op_is(it.op, "gemm"):
        mkn = gemm_mkn(it.op, dims)
        it.work = (f"launching op {it.op}",)
    elif it.op is not None and not it.aten and (it.template or not INDUCTOR_RE.match(it.op)):
        mkn = weight_gemms(dims)
        if mkn:
            who = "Inductor template" if it.template else "autograd Function / custom op"
            it.work = (f"{who} {it.op} takes {len(mkn)} weight{'s' * (len(mkn) > 1)} "
                       f"({', '.join(f'{a}x{b}x{c}' for a, b, c in mkn)})",)
    elif it.template and m is not None and m.group(1) in ("mm", "bmm"):
        it.work = (f"Inductor {m.group(1)} template",)
    if not it.work and it.klass == "gemm":
        it.work = ("name rules (class gemm)",)
    try:  # shapes from the file: any size can be there
        flops = float(sum(a * b * c for a, b, c in mkn)) if mkn else None
    except OverflowError:
        mkn, flops = [], None
    if mkn:
        it.mkn = tuple(mkn)
        it.flops = flops
        if it.klass not in ANCHOR_CLASSES:
            it.klass = "gemm"
    elif it.klass == "gemm" and it.op is not None:
        it.flops = gemm_flops(it.op, dims)


def _shared_work(items: list[Item]) -> None:
    """A Function or custom op that launches several GEMM kernels in one call (a CUDA graph
    replayed inside ``Graphed``: the dual GEMM and the down projection) states the work of all of
    them in its shapes: no one kernel did those FLOPs, so none carries them as evidence that it
    took over several GEMMs (it would claim its own counterpart and its neighbour's)."""
    by_call: dict = {}
    for it in items:
        if it.flops is not None and it.work and not it.work[0].startswith("launching op"):
            by_call.setdefault((it.op_node, it.backward), []).append(it)
    for group in by_call.values():
        if len(group) > 1:
            for it in group:
                it.flops, it.mkn = None, ()
                it.work = (f"{it.work[0]}, shared by the {len(group)} GEMM kernels it launches",)


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
    """Ops starting inside a step's host interval on any thread of a process its window holds
    (``StepWindow.pids``)."""
    tree = t.tree
    ops = getattr(t, "_diff_ops", None)
    if ops is None:
        ops = np.nonzero(tree.kind == K["op"])[0]
        ops = ops[np.argsort(tree.start[ops], kind="stable")]
        t._diff_ops = ops
        t._diff_op_pids = t.windows.process_codes(ops)
    lo, hi = np.searchsorted(tree.start[ops], [w.start, w.end])
    sel = ops[lo:hi]
    return sel[np.isin(t._diff_op_pids[lo:hi], [t.windows.process_code(p) for p in w.pids])]


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
    if op_is(name, "gemm"):
        return "gemm"
    if op_is(name, "attention"):
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
    mod, kind, parent = K["module"], tree.kind, tree.parent
    names = []
    x, left = n, len(parent)  # up the display parents (bounded: a walk up always ends)
    while x >= 0 and left:
        if kind[x] == mod:
            names.append(t.name(int(x))[len("nn.Module: "):])
        x, left = parent[x], left - 1
    return tuple(reversed(names)), backward


def _library(t: Trace, n: int) -> str:
    """``kernel_info(n).library``, decoded once per (name, launched as a user kernel)."""
    cache = t.__dict__.setdefault("_diff_libs", {})
    user = t.launching_op(n) is None
    key = (int(t.tree.name_id[n]), user)
    if key not in cache:
        cache[key] = t.kernel_info(n).library
    return cache[key]


def _in_compiled(t: Trace, op: int | None) -> bool:
    """Whether an op ran inside a torch.compile'd graph (an ancestor is one of COMPILE_PREOPS).
    Each node's answer is kept on the trace (the ops of a step share most of their ancestors)."""
    memo = t.__dict__.setdefault("_diff_in_compiled", {})
    path = []
    p, found = op, False
    while p is not None and p > 0:
        if p in memo:
            found = memo[p]
            break
        path.append(p)
        if t.name(p).startswith(("## Call CompiledFxGraph", "CompiledFunction", "Torch-Compiled Region")):
            found = True
            break
        p = int(t.tree.cparent[p])
    for q in path:
        memo[q] = found
    return found


def _class_name(module: str) -> str:
    return re.sub(r"_\d+$", "", module)


def _typical(sig: list[tuple]) -> tuple:
    """The sequence of names the steps run most often; among equally common ones (no two steps
    alike), the one whose length is nearest the median step's, so a warm-up step with hundreds of
    extra kernels is not the one compared (earliest on a tie)."""
    counts = Counter(sig)
    top = max(counts.values())
    cands = [s for s in dict.fromkeys(sig) if counts[s] == top]
    if len(cands) == 1:
        return cands[0]
    med = float(np.median([len(s) for s in sig]))
    return min(cands, key=lambda s: abs(len(s) - med))


def _items(t: Trace) -> list[Item]:
    """The step's units in launch order, each timed as the mean over the steps that launched the
    most common sequence of names (cached on the trace)."""
    cached = getattr(t, "_diff_items", None)
    if cached is not None:
        return cached
    per = [_step_units(t, s) for s in _scopes(t)]
    sig = [tuple(t.tree.name_id[p].tolist()) if p else () for p in per]
    common = _typical(sig)
    alike = [p for p, s in zip(per, sig) if s == common]
    base = alike[0]
    durs = np.mean([t.tree.dur[p] for p in alike], axis=0) if base else []
    t._diff_alike = len(alike)
    infos = t.kernel_classes(np.asarray(base)) if t.has_gpu and base else []
    vocab = _vocab(t)
    items = [_item(t, n, j, float(durs[j]), infos[j] if t.has_gpu else None, vocab) for j, n in enumerate(base)]
    _shared_work(items)
    _assign_blocks(items)
    t._diff_items = items
    return items


def _item(t: Trace, n: int, j: int, dur: float, info, vocab: set) -> Item:
    """One unit: its op, chain, class, scope, direction and GEMM work."""
    kind = t.kind(n)
    name = t.name(n)
    if kind == "op":  # CPU-only unit: the op is its own launcher
        op = n
        klass = _cpu_class(name)
        chain = t.op_chain(n, stop=(K["module"], K["step"], K["annotation"])) + [name]
        library = "Inductor (C++)" if INDUCTOR_RE.match(name) else "ATen (CPU)"
    else:
        op = t.launching_op(n)
        klass = CLASS_MAP.get(info, "other")
        chain = t.op_chain(n, stop=(K["module"], K["step"], K["annotation"]))
        library = _library(t, n)
    if klass not in ANCHOR_CLASSES and not INDUCTOR_RE.match(name) and klass not in ("memset", "memcpy") and (
            (kind != "op" and name_class(name) == "attention") or any(op_is(c, "attention") for c in chain[-2:])):
        klass = "attention"
    ind_ops: tuple = ()
    template = False
    m = INDUCTOR_RE.match(name)
    if m:
        ind_ops = tuple(inductor_ops(name, vocab)[0])
        if m.group(1) in ("tem", "mm", "bmm"):
            template = True
            if any(op_is(o, "gemm") for o in ind_ops) or m.group(1) in ("mm", "bmm"):
                klass = "gemm"
            elif name_class(name) == "attention" or any(op_is(o, "attention") for o in ind_ops):
                klass = "attention"
    prov = provenance_ops(t.args(n)) or (provenance_ops(t.args(op)) if op is not None and op != n else ())
    mpath, backward = _module_path(t, n, op)
    if not backward and kind == "op":
        backward = any(c.endswith("Backward0") or c.endswith("Backward1") for c in chain)
    it = Item(node=n, name=name, klass=klass, dur_ns=dur, op=t.name(op) if op is not None else None, chain=chain,
              module=mpath[-1] if mpath else None, op_node=op, module_path=mpath, pos=j, backward=backward,
              ind_ops=ind_ops, template=template, library=library, compiled=_in_compiled(t, op), trace=t)
    if prov and m:
        it.ind_ops, it.exact = prov, True
    _gemm_work(t, it, m)
    return it


PROVENANCE_KEY = re.compile(r"(?i)provenance|post_grad_nodes|fused_nodes|origins")
"""Args that may carry Inductor's own record of the FX nodes a kernel fused (torch 2.13 keeps it
out of profiler traces: ``trace.provenance_tracking_level`` writes it to the generated code and
to debug artifacts only; a recording that carries it, under one of these keys, is read)."""


@lru_cache(maxsize=4096)
def _provenance_key(k: str) -> bool:
    """Whether an arg key may carry provenance (few distinct keys, asked for every kernel's args)."""
    return PROVENANCE_KEY.search(k) is not None


def _strip_overload(node: str) -> str:
    """An FX node's name less its trailing ``_default`` and ``_<n>`` parts (``mm_default_1`` -> ``mm``):
    what ``re.sub(r"(_default)?(_\\d+)*$", "", node)`` did, read from the end in linear time (that
    regex rescanned the tail from every ``_``: 20k characters of ``_1`` took seconds)."""
    end = len(node)
    while True:
        i = end
        while i and node[i - 1].isdecimal():   # what \d matches in a str pattern
            i -= 1
        if i == end or i == 0 or node[i - 1] != "_":
            break
        end = i - 1
    return node[:end - 8] if node[:end].endswith("_default") else node[:end]


def provenance_ops(args: dict) -> tuple:
    """The ops a kernel fused, from a provenance arg: FX node names (``mul_3``, ``mm_default_1``,
    ``aten.gelu.default``) as op names (``mul``, ``mm``, ``gelu``), in order, once each."""
    for k, v in args.items():
        if not _provenance_key(str(k)):
            continue
        names = v if isinstance(v, list) else re.split(r"[,\s]+", v) if isinstance(v, str) else []
        ops = []
        for x in names:
            if not isinstance(x, str) or not x:
                continue
            x = x.split(".")[1] if x.startswith(("aten.", "prims.")) and "." in x[5:] else x
            x = _strip_overload(x)
            if x and x not in ops:
                ops.append(x)
        if ops:
            return tuple(ops)
    return ()


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

