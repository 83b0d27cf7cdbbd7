"""Fusion opportunities on one trace: chains of memory-bound kernels a compiler could fuse.

A *chain* is a run of pointwise, normalisation and reduction kernels of one step, on one stream,
inside one module scope, that no anchor (GEMM, attention, conv, communication) consuming its
result interrupts. Fusing it keeps every intermediate (each kernel's output but the last) out of
HBM: that output is written once and read back once, so the saving is 2 × its bytes at the
bandwidth the trace's own memory-bound kernels reached. Bytes come from the launching op's
recorded ``Input Dims`` and ``Input type`` (``record_shapes=True``).

Pure: no Textual; the CLI (``tracetui opportunities``), the app's view and the tests share it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from tracetui.model.graphs import GRAPH_LAUNCH
from tracetui.read.events import K

FUSIBLE = frozenset({"pointwise", "norm", "reduction"})
"""Kernel classes a fusion can merge: memory-bound work whose intermediates live in HBM."""

ANCHORS = frozenset({"gemm", "attention", "conv", "communication"})
"""Kernel classes a chain runs between: work a pointwise fusion does not absorb."""

DTYPE_BYTES = (
    (r"(?i)^(?:c10::)?(?:BFloat16|Half)$", 2, "16-bit float"),
    (r"(?i)^(?:float|c10::Float)$", 4, "float32"),
    (r"(?i)^double$", 8, "float64"),
    (r"(?i)^(?:long int|int64_t|long)$", 8, "int64"),
    (r"(?i)^(?:int|int32_t)$", 4, "int32"),
    (r"(?i)^(?:short|int16_t)$", 2, "int16"),
    (r"(?i)^(?:bool|unsigned char|signed char|c10::qu?int8|c10::Float8_\w+|int8_t|uint8_t)$", 1, "1-byte types"),
)
"""``Input type`` -> element bytes, each with what it names. A type no row names makes the op's
bytes unknown (its chain is still listed, with no projection)."""
_DTYPES = tuple((re.compile(r), n) for r, n, _ in DTYPE_BYTES)

REDUCING = re.compile(r"^aten::(?:sum|mean|amax|amin|max|min|prod|norm|var|std|var_mean|std_mean|logsumexp|"
                      r"argmax|argmin|any|all)(?:\.|$)")
"""Ops whose output is smaller than their input (reductions over ``dim``); the others of a chain
write what they read (pointwise: the broadcast of their inputs; norm, softmax: their input)."""

NOMINAL_GBPS = (
    (r"H200", 4800.0, "H200 datasheet HBM3e"),
    # "H100, later SXM or HBM3", from the first H100 of a line only: H100.* from every H100 was quadratic
    (r"(?m)^(?>.*?H100).*(?:SXM|HBM3)", 3350.0, "H100 SXM datasheet HBM3"),
    (r"H100", 2000.0, "H100 PCIe datasheet HBM2e"),
    (r"A100", 2039.0, "A100 80GB SXM datasheet"),
    (r"B200", 8000.0, "B200 datasheet HBM3e"),
    (r"MI300", 5300.0, "MI300X datasheet"),
    (r"MI250", 3277.0, "MI250X datasheet HBM2e"),
    (r"", 2000.0, "assumed: a device the table does not know"),
)
"""Device name -> nominal HBM bandwidth (GB/s), used only when the trace has too few memory-bound
kernels to measure its own; the output then says "nominal"."""

MIN_BW_KERNELS = 2
"""Memory-bound kernels needed (each ≥ ``MIN_BW_BYTES`` moved) to measure the bandwidth."""
MIN_BW_BYTES = 1 << 20
MAX_OVER_NOMINAL = 1.2
"""A measured bandwidth above this many times a known device's nominal figure (or above
``UNKNOWN_CEILING_GBPS`` for a device the table does not know) is not believed: the kernels'
recorded times are off (a synthetic or rewritten trace), and the nominal figure is used, said so."""
UNKNOWN_CEILING_GBPS = 10000.0
BW_QUANTILE = 0.9
"""The measured bandwidth is this quantile of the memory-bound kernels' achieved GB/s: what the
card reached on this trace's own copies and pointwise kernels, not one lucky outlier."""


@dataclass
class Kernel:
    node: int
    name: str
    klass: str
    op: str | None
    stream: tuple
    scope: tuple        # nn.Module path (outermost first), the forward op's for backward kernels
    backward: bool
    dur_ns: int
    out_bytes: float | None
    in_bytes: float | None
    out_numel: int | None = None


@dataclass
class Chain:
    kernels: list[Kernel]
    steps: int = 1
    dur_ns: float = 0.0        # the chain's kernel time per step (mean over steps alike)
    scope: tuple = ()
    intermediate_bytes: float | None = None
    saving_us: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ops(self) -> list[str]:
        return [k.op or "(no op)" for k in self.kernels]


def _elem_bytes(ty: str) -> int | None:
    for rx, n in _DTYPES:
        if rx.match(ty):
            return n
    return None


KERNEL_DTYPES = (("c10::BFloat16", 2), ("c10::Half", 2), ("float", 4), ("double", 8))
"""A TensorList's element type is not recorded; the kernel's template arguments often name it."""


def _hint_bytes(kernel_name: str) -> int | None:
    for token, n in KERNEL_DTYPES:
        if re.search(rf"\b{re.escape(token)}\b", kernel_name):
            return n
    return None


def tensor_inputs(args: dict, kernel_name: str = "") -> list[tuple[int, int]]:
    """(numel, element bytes) of each tensor input an op recorded: ``Input Dims`` beside a typed
    ``Input type``; a ``TensorList`` counts each of its tensors, typed from the kernel's name.
    Scalars and lists of numbers have no dims or no tensor type and are left out."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    out = []
    for d, ty in zip(dims, types):
        if not isinstance(d, list) or not isinstance(ty, str) or not ty:
            continue
        if ty == "TensorList":
            eb = _hint_bytes(kernel_name)
            if eb is not None:
                out.extend((math.prod(x) if x else 1, eb) for x in d
                           if isinstance(x, list) and all(isinstance(v, int) for v in x))
            continue
        eb = _elem_bytes(ty)
        if eb is not None and all(isinstance(x, int) for x in d):
            out.append((math.prod(d) if d else 1, eb))
    return out


def _reduced(args: dict, shape: list) -> int:
    """How many elements a reduction folds into one: the ``dim`` it recorded (``[0]``), else the last."""
    conc = args.get("Concrete Inputs") or []
    m = re.fullmatch(r"\[?\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*\]?", str(conc[1])) if len(conc) > 1 else None
    if not shape:
        return 1
    if m:
        dims = {int(x) % len(shape) for x in m.group(1).split(",")}
        return max(1, math.prod(shape[i] for i in dims))
    return max(1, shape[-1])


def op_bytes(op: str | None, args: dict, kernel_name: str = "") -> tuple[float | None, float | None, int | None]:
    """(bytes written, bytes read, elements written) by the op's kernel, from its recorded inputs:
    it reads every tensor input; it writes the broadcast of them (pointwise, norm), their
    concatenation (cat), or a reduction's output."""
    ins = tensor_inputs(args, kernel_name)
    if not op or not ins:
        return None, None, None
    read = float(sum(n * b for n, b in ins))
    numel, eb = max(ins)
    if op.startswith(("aten::cat", "aten::stack")):
        numel = sum(n for n, _ in ins)
    elif REDUCING.match(op):
        dims = args.get("Input Dims") or []
        first = next((d for d in dims if isinstance(d, list) and d and all(isinstance(x, int) for x in d)), [])
        numel = max(1, numel // _reduced(args, first))
    return float(numel * eb), read, int(numel)


def _scope_of(t, n: int, op: int | None) -> tuple[tuple, bool]:
    """nn.Module scopes above kernel ``n`` (outermost first), and whether it ran in backward (a
    backward op takes its forward op's scopes through the ``Sequence number`` link)."""
    tree = t.tree
    p = op if op is not None else int(tree.cparent[n])
    backward = False
    while p is not None and p > 0:
        if p in tree.fwd_of:
            backward, n = True, tree.fwd_of[p]
            break
        p = int(tree.cparent[p])
    return tuple(t.name(x)[len("nn.Module: "):] for x in tree.path(n) if tree.kind[x] == K["module"]), backward


def step_kernels(t, step: int) -> list[Kernel]:
    """The kernels of one step in launch order, with class, op, stream, scope and bytes."""
    nodes = t.step_gpu_nodes(step)
    nodes = nodes[t.tree.kind[nodes] == K["kernel"]]
    classes = t.classes_of(nodes)
    out = []
    for n, klass in zip(nodes.tolist(), classes.tolist()):
        op = t.launching_op(n)
        op_name = t.name(op) if op is not None else None
        rt = int(t.tree.cparent[n])
        replayed = rt > 0 and GRAPH_LAUNCH.search(t.name(rt)) is not None
        # a graph replay's op is the region around the graph launch: its inputs are not the kernel's
        w, r, numel = op_bytes(op_name, t.args(op), t.name(n)) if op is not None and not replayed else (None, None, None)
        scope, bwd = _scope_of(t, n, op)
        key = t.store.track_keys[int(t.store.track[int(t.tree.ev[n])])] if t.tree.ev[n] >= 0 else ()
        out.append(Kernel(n, t.name(n), klass, op_name, tuple(key), scope, bwd, int(t.tree.dur[n]), w, r, numel))
    return out


def _shared_scope(a: tuple, b: tuple) -> tuple:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return a[:i]


def _joins(scope: tuple, k: Kernel, backward: bool) -> tuple | None:
    """The chain's scope once ``k`` joins it, or None: one module scope, never only the model's
    root (two blocks' kernels meet there), unless both already sit directly in that scope."""
    if k.backward != backward:
        return None
    shared = _shared_scope(scope, k.scope)
    if shared == scope == k.scope or len(shared) >= 2:
        return shared
    return None


def _consumes(t, anchor: Kernel, out_numel: set) -> bool:
    """Whether an anchor could read the chain's result: one of its inputs has the numel of an
    output the chain wrote (``gelu(gate) * up``: the up GEMM reads x, not gelu's output, so the
    chain runs on around it, as Inductor fuses it)."""
    op = t.launching_op(anchor.node)
    if op is None:
        return True  # nothing recorded: assume it does
    return any(n in out_numel for n, _ in tensor_inputs(t.args(op), anchor.name))


def chains_of_step(t, step: int) -> list[Chain]:
    """The step's chains, per stream: a run of fusible kernels in one scope and direction that no
    anchor consuming its result, no other kernel (a copy, an unknown) and no change of scope ends;
    chains of two kernels or more."""
    ks = step_kernels(t, step)
    pos = {k.node: i for i, k in enumerate(ks)}
    out: list[Chain] = []
    for stream in dict.fromkeys(k.stream for k in ks):
        cur: list[Kernel] = []
        scope: tuple = ()

        def close() -> None:
            if len(cur) >= 2:
                out.append(Chain(list(cur), scope=scope, extra={"position": pos[cur[0].node]}))
            cur.clear()
        for k in (k for k in ks if k.stream == stream):
            if k.klass in ANCHORS:
                if cur and _consumes(t, k, {x.out_numel for x in cur}):
                    close()
                continue
            if k.klass not in FUSIBLE:
                close()
                continue
            joined = _joins(scope, k, cur[0].backward) if cur else None
            if joined is None:
                close()
                scope = k.scope
            else:
                scope = joined
            cur.append(k)
        close()
    return out


# ---------------------------------------------------------------- bandwidth and projection

def nominal_bandwidth(device: str | None) -> tuple[float, str, bool]:
    """(GB/s, what it is, whether the table knows the device) from ``NOMINAL_GBPS``."""
    for rx, gbps, what in NOMINAL_GBPS:
        if re.search(rx, device or ""):
            return gbps, what, bool(rx)
    raise AssertionError("NOMINAL_GBPS ends with a catch-all")


def measured_bandwidth(t, kernels: list[Kernel]) -> dict:
    """The HBM bandwidth (GB/s) this trace's memory-bound kernels reached: the ``BW_QUANTILE`` of
    (bytes read + written) / time over its pointwise and norm kernels (copies are pointwise)
    moving at least ``MIN_BW_BYTES``; the device's nominal figure, said as such, when too few do
    or when the measurement is beyond belief (``MAX_OVER_NOMINAL``)."""
    rates = [(k.out_bytes + k.in_bytes) / k.dur_ns for k in kernels
             if k.klass in ("pointwise", "norm") and k.out_bytes and k.in_bytes and k.dur_ns > 0
             and k.out_bytes + k.in_bytes >= MIN_BW_BYTES]
    nominal, what, known = nominal_bandwidth(t.device_name)
    if len(rates) < MIN_BW_KERNELS:
        return {"gbps": nominal, "source": "nominal", "kernels": len(rates),
                "how": f"{what}: only {len(rates)} kernels to measure from"}
    gbps = float(np.quantile(rates, BW_QUANTILE))
    ceiling = nominal * MAX_OVER_NOMINAL if known else UNKNOWN_CEILING_GBPS
    if gbps > ceiling:
        return {"gbps": nominal, "source": "nominal", "kernels": len(rates),
                "how": f"{what}: the kernels' times give {gbps:,.0f} GB/s, above {ceiling:,.0f}: not believed"}
    return {"gbps": gbps, "source": "measured", "kernels": len(rates),
            "how": f"p{int(BW_QUANTILE * 100)} of {len(rates)} pointwise/copy/norm kernels' "
                   "(read + written) bytes / time"}


def _project(c: Chain, gbps: float) -> None:
    """A chain's bytes and projected saving. Its intermediates (every output but the last) are
    written and read back once each; a fused kernel moves the chain's other bytes (what it reads
    from outside, what it leaves) at ``gbps``. Saving = the chain's time − that kernel's time:
    the traffic saved, plus the launches and the under-bandwidth time of the small kernels.
    ``traffic_us`` is the traffic alone (2 × intermediates / bandwidth), a floor; no saving is
    more than the chain's own time (bytes over-counted, e.g. an output written sparsely)."""
    mids = [k.out_bytes for k in c.kernels[:-1]]
    c.extra["bytes_complete"] = all(m is not None for m in mids) and all(
        k.in_bytes is not None for k in c.kernels)
    if not any(mids):
        return
    c.intermediate_bytes = float(sum(m for m in mids if m))
    c.extra["traffic_us"] = 2 * c.intermediate_bytes / gbps / 1e3
    took = c.dur_ns / 1e3
    if not c.extra["bytes_complete"]:
        c.saving_us = min(took, c.extra["traffic_us"])  # the floor: what the known intermediates alone cost
        return
    moved = sum(k.in_bytes + k.out_bytes for k in c.kernels) - 2 * c.intermediate_bytes
    c.extra["fused_us"] = max(moved, 0.0) / gbps / 1e3
    c.saving_us = min(took, max(took - c.extra["fused_us"], c.extra["traffic_us"]))  # never more than it takes


def _key(c: Chain) -> tuple:
    return (c.kernels[0].backward, c.scope, tuple(k.name for k in c.kernels))


def opportunities(t) -> dict:
    """Every chain of the trace's steps, folded over steps (the n-th chain of a step with the same
    scope and kernel names is one chain), with its bytes and projected saving, biggest first."""
    steps = t.steps or []
    if not t.has_gpu or not steps:
        return {"chains": [], "bandwidth": None, "steps": len(steps), "device_us_per_step": 0.0,
                "projected_us_per_step": 0.0,
                "note": "no GPU kernels" if not t.has_gpu else "no steps: opportunities are per step"}
    every = step_kernels(t, steps[0])
    bw = measured_bandwidth(t, every)
    folded: dict = {}
    for s in steps:
        seen: dict = {}
        for c in chains_of_step(t, s):
            k = _key(c)
            seen[k] = seen.get(k, -1) + 1
            slot = folded.setdefault((k, seen[k]), Chain(c.kernels, steps=0, scope=c.scope, extra=dict(c.extra)))
            slot.steps += 1
            slot.dur_ns += sum(x.dur_ns for x in c.kernels)
    out = list(folded.values())
    for c in out:
        c.dur_ns /= c.steps
        _project(c, bw["gbps"])
    out.sort(key=lambda c: (-(c.saving_us if c.saving_us is not None else -1.0), -c.dur_ns))
    return {"chains": [chain_dict(c, i + 1) for i, c in enumerate(out)], "bandwidth": bw, "steps": len(steps),
            "device_us_per_step": sum(x.dur_ns for x in every) / 1e3,
            "projected_us_per_step": float(sum(c.saving_us or 0.0 for c in out))}


def chain_dict(c: Chain, rank: int) -> dict:
    """One chain as the JSON reports it."""
    return {"rank": rank, "module": ".".join(c.scope) or "(no module scope)", "scope": list(c.scope),
            "backward": c.kernels[0].backward, "stream": "/".join(str(x) for x in c.kernels[0].stream[1:]),
            "modules": sorted({m for k in c.kernels for m in k.scope}),
            "ops": c.ops, "kernels": [k.name for k in c.kernels], "kernel_classes": [k.klass for k in c.kernels],
            "position": c.extra.get("position"), "first_node": c.kernels[0].node, "steps_seen": c.steps, "us_per_step": c.dur_ns / 1e3,
            "intermediate_bytes": c.intermediate_bytes, "bytes_complete": c.extra.get("bytes_complete", False),
            "hbm_traffic_saved_bytes": 2 * c.intermediate_bytes if c.intermediate_bytes is not None else None,
            "fused_kernel_us": c.extra.get("fused_us"), "traffic_saving_us": c.extra.get("traffic_us"),
            "projected_saving_us": c.saving_us}
