"""One rank's collectives: where each ran, what it moved, and the keys that match it across ranks.

A collective is read from the most precise record a trace holds, in this order:

1. the communication kernels on the GPU (NCCL/RCCL): their start and end are the collective's own,
   and their metadata comes from the kernel's args or, failing that, from the launching
   ``record_param_comms`` op or the ``nccl:*`` annotation above the launch;
2. the backend's CPU annotations (``gloo:all_reduce`` on gloo's worker threads, ``nccl:*`` when
   the GPU side was not recorded): their start and end are when the backend worked on it.

Matching keys (``ranks.py`` uses them across ranks): ``Process Group Name`` + ``Seq`` (or the
kernel's ``seq_num``, ``SEQ_NUM``), or
``Comms Id``, where present; otherwise the order within the process group (for gloo: the order
of the ``gloo:*`` annotations of the whole process, all worker threads merged by start time).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracetui.read.events import K
from tracetui.model.windows import COMM_CLASSES

COLLECTIVE_KINDS = (
    (re.compile(r"(?i)all_?reduce"), "all_reduce",
     "nccl-tests: busbw = algbw * 2(n-1)/n (reduce-scatter then all-gather)"),
    (re.compile(r"(?i)all_?gather"), "all_gather",
     "nccl-tests: busbw = algbw * (n-1)/n; size is the gathered output"),
    (re.compile(r"(?i)reduce_?scatter"), "reduce_scatter",
     "nccl-tests: busbw = algbw * (n-1)/n; size is the full input"),
    (re.compile(r"(?i)all_?to_?all"), "all_to_all", "nccl-tests: busbw = algbw * (n-1)/n"),
    (re.compile(r"(?i)broadcast"), "broadcast", "nccl-tests: busbw = algbw (each byte crosses one link)"),
    (re.compile(r"(?i)barrier"), "barrier", "moves no payload: no bandwidth"),
    (re.compile(r"(?i)sendrecv|send_recv"), "send_recv",
     "NCCL's SendRecv kernel (p2p, or an all-to-all whose annotation was not recorded): busbw = algbw"),
    (re.compile(r"(?i)(^|[:_])(send|recv)"), "p2p", "point to point: busbw = algbw"),
    (re.compile(r"(?i)reduce"), "reduce", "nccl-tests: busbw = algbw"),
    (re.compile(r"(?i)gather|scatter"), "gather_scatter", "rooted gather/scatter: busbw = algbw"),
)
"""Collective name (Collective name arg, annotation or kernel name) -> canonical kind; first match
wins (all_reduce before reduce). The reason names the bus-bandwidth rule (``busbw_factor``)."""

BUSBW = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send_recv": lambda n: 1.0, "p2p": lambda n: 1.0,
    "gather_scatter": lambda n: 1.0,
}
"""Bus-bandwidth factor of each kind for ``n`` ranks (nccl-tests' PERFORMANCE.md); barrier: none."""

DTYPE_BYTES = {
    "float": 4, "float32": 4, "float64": 8, "double": 8, "half": 2, "float16": 2, "c10::half": 2,
    "bfloat16": 2, "c10::bfloat16": 2, "long": 8, "long int": 8, "int64": 8, "int": 4, "int32": 4,
    "short": 2, "int16": 2, "signed char": 1, "unsigned char": 1, "char": 1, "int8": 1, "uint8": 1,
    "bool": 1, "byte": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1, "complexfloat": 8, "c10::complex<float>": 8, "complexdouble": 16,
}
"""Element size by dtype as torch's profiler spells it (``Input type``) or as record_param_comms
does (``dtype``: ``Float``, ``BFloat16``): compared lower-cased."""

BACKEND_ANNOTATION = re.compile(r"^(?P<backend>gloo|nccl|ucc|mpi|xccl|hccl|rccl):(?P<op>\w+)")
"""CPU annotations the process-group backends write around each collective."""

ALGORITHM = re.compile(r"_(?P<algo>RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)"
                       r"(?:_(?P<proto>LL128|LL|SIMPLE))?")
"""NCCL encodes the algorithm and protocol in its kernel names (ncclKernel_AllReduce_RING_LL_Sum_float,
ncclDevKernel_AllGather_RING_LL)."""

def collective_kind(name: str) -> str:
    """The canonical kind of a collective name (``COLLECTIVE_KINDS``), ``other`` if none fits."""
    m = BACKEND_ANNOTATION.match(name)
    s = m["op"] if m else name
    for rx, kind, _ in COLLECTIVE_KINDS:
        if rx.search(s):
            return kind
    return "other"


def busbw_factor(kind: str, n: int) -> float | None:
    f = BUSBW.get(kind)
    return f(n) if f is not None and n >= 1 else None


def dtype_bytes(dtype) -> int | None:
    return DTYPE_BYTES.get(str(dtype).strip().lower()) if dtype else None


INT64 = 1 << 63


def _int(v, default=-1) -> int:
    """An int64 field of a record (``Seq``, ``Group size``, element counts), else ``default``: a
    value past int64 (a trace's ``Seq`` of 2**70) reads as unknown, not as a number no column holds."""
    try:
        out = int(v)
    except (TypeError, ValueError, OverflowError):
        return default
    return out if -INT64 <= out < INT64 else default


def _nelems(dims) -> int | None:
    """Elements of the first tensor in an ``Input Dims`` entry ([[a, b]] or [[[a]]] for lists)."""
    if not isinstance(dims, list) or not dims:
        return None
    d = dims[0]
    while isinstance(d, list) and d and isinstance(d[0], list):
        d = d[0]
    if not isinstance(d, list):
        return None
    n = 1
    for x in d:
        if not isinstance(x, (int, float)) or (isinstance(x, float) and not abs(x) < 2.0 ** 63):
            return None  # not a number, or inf / nan / past int64
        n *= int(x)
        if abs(n) >= 1 << 63:
            return None
    return n


SEQ_NUM = "seq_num"
"""The GPU kernel's copy of its collective's per-process-group sequence number (kineto#1296,
pytorch#177148): read as ``Seq`` where the kernel's own args lack ``Seq``, so a kernel whose
launching op was not recorded still matches by sequence number, not by its place in the order."""


@dataclass
class Meta:
    """What one record says about its collective (any field may be unknown)."""
    name: str = ""
    dtype: str | None = None
    msg_bytes: int | None = None
    group: str = ""
    seq: int = -1
    comms_id: str = ""
    group_size: int = -1


def meta_of(args: dict, fallback_name: str, world: int) -> Meta:
    """Collective metadata from record_param_comms-style args, else from annotation shapes."""
    name = str(args.get("Collective name") or fallback_name)
    kind = collective_kind(name)
    dtype = args.get("dtype")
    if dtype is None:
        it = args.get("Input type")
        if isinstance(it, list) and it:
            dtype = it[0] if isinstance(it[0], str) else None
    size = dtype_bytes(dtype)
    gsize = _int(args.get("Group size"))
    n = gsize if gsize > 0 else world
    msg = None
    if size is not None:
        i_n, o_n = _int(args.get("In msg nelems"), -1), _int(args.get("Out msg nelems"), -1)
        if i_n < 0 and o_n < 0:
            i_n = _nelems(args.get("Input Dims"))
            i_n = -1 if i_n is None else i_n
            o_n = i_n * n if (kind == "all_gather" and i_n >= 0 and n > 0) else i_n
        nel = max(i_n, o_n)
        msg = nel * size if 0 <= nel * size < INT64 else None
    group = args.get("Process Group Name")
    cid = args.get("Comms Id")
    seq = _int(args.get("Seq"))
    if seq < 0:  # kineto#1296: the GPU kernel carries NCCL's sequence number as ``seq_num``
        seq = _int(args.get(SEQ_NUM))
    return Meta(name=name, dtype=str(dtype) if dtype else None, msg_bytes=msg,
                group="" if group is None else str(group), seq=seq,
                comms_id="" if cid in (None, "") else str(cid), group_size=gsize)


def _merge(a: Meta, b: Meta) -> Meta:
    """``a``'s known fields, the rest from ``b`` (kernel args first, then its launching op)."""
    out = Meta(**a.__dict__)
    for k, v in b.__dict__.items():
        if getattr(out, k) in (None, "", -1):
            setattr(out, k, v)
    return out


C10D_OP = re.compile(r"^c10d::")
"""The ops the process group's Python API calls (``c10d::_reduce_scatter_base_``, ``c10d::allreduce_``):
on the calling thread, each before the backend's annotation of the work it queued."""


def _shapes(dims) -> list:
    """Every tensor shape in an ``Input Dims`` entry, lists of tensors flattened."""
    out = []
    for d in dims if isinstance(dims, list) else []:
        if isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            out += _shapes(d)
        elif isinstance(d, list) and d:
            out.append(d)
    return out


RUNS_AS = {
    ("all_reduce", "reduce_scatter"):
        "gloo runs reduce_scatter_tensor (c10d::_reduce_scatter_base_) as gloo:all_reduce of the whole input",
}
"""(annotation kind, c10d op kind) pairs where the backend runs the user's collective as another:
an annotation without recorded shapes may still pair with such an op (record_shapes off)."""

PENDING_OPS = 256
"""``c10d::`` ops waiting for their annotation that ``_called_ops`` keeps (the oldest beyond it
are dropped: an op whose work was never recorded must not make the pairing quadratic)."""


def _called_ops(trace, annotations: list) -> dict:
    """For each backend annotation whose calling ``c10d::`` op names another kind of collective,
    that op's name. gloo records a ``reduce_scatter_tensor`` as ``gloo:all_reduce`` (it reduces
    the whole input, then keeps its chunk); the ``c10d::_reduce_scatter_base_`` op that queued it
    says what the user ran. Each annotation takes the earliest unclaimed op started before it
    whose input shapes include the annotation's (the backend's queue is first in, first out)."""
    if not annotations:
        return {}
    t = trace.tree
    names = t.names
    ops = [i for i in np.nonzero(t.kind == K["op"])[0].tolist() if C10D_OP.match(names[t.name_id[i]])]
    if not ops:
        return {}
    ops.sort(key=lambda i: int(t.start[i]))
    pending: list = []  # (op, its kind, its input shapes), oldest first
    nxt = 0
    out = {}
    for a in sorted(annotations, key=lambda i: int(t.start[i])):
        while nxt < len(ops) and int(t.start[ops[nxt]]) <= int(t.start[a]):
            i = ops[nxt]
            pending.append((i, collective_kind(names[t.name_id[i]]), _shapes(trace.args(i).get("Input Dims"))))
            nxt += 1
        del pending[:-PENDING_OPS]
        want = _shapes(trace.args(a).get("Input Dims"))
        a_kind = collective_kind(names[t.name_id[a]])
        for k, (i, op_kind, shapes) in enumerate(pending):
            if (want and all(w in shapes for w in want)) or \
                    (not want and (op_kind == a_kind or (a_kind, op_kind) in RUNS_AS)):
                del pending[k]
                if op_kind not in (a_kind, "other"):
                    out[a] = names[t.name_id[i]]
                break
    return out


COLUMNS = ("name", "kind", "raw_name", "source", "group", "seq", "comms_id", "dtype", "msg_bytes",
           "group_size", "algorithm", "start_ns", "end_ns", "launch_ns", "stream")
"""Columns of a rank's collectives table (lists of equal length)."""


def rank_collectives(trace, world: int = 0) -> dict:
    """The collectives of one loaded rank as columns (``COLUMNS``), in start order.

    ``world`` is the job's size, used for the message size of an all-gather whose record gives
    only its input and no group size.
    """
    t = trace.tree
    rows: list[tuple] = []
    gpu = trace._gpu_nodes
    comm = np.zeros(0, dtype=np.int64)
    if gpu.size:
        cls = trace.gpu_classes
        comm = gpu[np.isin(cls, list(COMM_CLASSES))]
    if comm.size:
        for i in comm.tolist():
            kname = trace.name(i)
            m = meta_of(trace.args(i), "", world)
            p, launch = int(t.cparent[i]), int(t.start[i])
            if p > 0:
                launch = int(t.start[p])
            while p > 0 and (not m.name or m.group == "" or m.msg_bytes is None):
                pn = trace.name(p)
                if pn == "record_param_comms" or BACKEND_ANNOTATION.match(pn):
                    m = _merge(m, meta_of(trace.args(p), pn, world))
                p = int(t.cparent[p])
            if not m.name:
                m.name = kname
            a = ALGORITHM.search(kname)
            algo = (a["algo"] + ("_" + a["proto"] if a["proto"] else "")) if a else None
            stream = t.store.track_keys[t.store.track[t.ev[i]]][-1] if t.ev[i] >= 0 else -1
            rows.append((m, kname, "kernel", algo, int(t.start[i]), int(t.start[i] + t.dur[i]), launch,
                         _int(stream)))
    else:
        ann = np.nonzero(t.kind == K["annotation"])[0]
        names = t.names
        hit = [i for i in ann.tolist() if BACKEND_ANNOTATION.match(names[t.name_id[i]])]
        called = _called_ops(trace, hit)
        for i in hit:
            nm = trace.name(i)
            m = meta_of(trace.args(i), nm, world)
            if i in called:  # the user's collective, run by the backend as another (a reduce-scatter as an all-reduce)
                m.name = called[i]
            rows.append((m, nm, "annotation", None, int(t.start[i]), int(t.start[i] + t.dur[i]),
                         int(t.start[i]), -1))
    rows.sort(key=lambda r: (r[4], r[5]))
    out = {c: [] for c in COLUMNS}
    for m, raw, source, algo, s, e, launch, stream in rows:
        bm = BACKEND_ANNOTATION.match(m.name)
        out["name"].append(m.name)
        out["kind"].append(collective_kind(bm["op"] if bm else m.name))
        out["raw_name"].append(raw)
        out["source"].append(source)
        out["group"].append(m.group)
        out["seq"].append(m.seq)
        out["comms_id"].append(m.comms_id)
        out["dtype"].append(m.dtype)
        out["msg_bytes"].append(m.msg_bytes if m.msg_bytes is not None else -1)
        out["group_size"].append(m.group_size)
        out["algorithm"].append(algo)
        out["start_ns"].append(s)
        out["end_ns"].append(e)
        out["launch_ns"].append(launch)
        out["stream"].append(stream)
    return out
