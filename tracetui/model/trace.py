"""The model's front door: ``load_trace(path)`` -> ``Trace`` (events, tree, rollups, metadata)."""
from __future__ import annotations

import gc
import os
import re
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np

from tracetui.read.errors import TraceError
from tracetui.read.heap import large_arrays_on_heap
from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, KINDS, EventStore, build_store
from tracetui.read.load import LENIENT_NOTE, LoadReport, clean_meta, decode, read_bytes, resolve_input
from tracetui.read import split as _split
from tracetui.read.split import decode_index
from tracetui.model.names import KernelName, decode_kernel
from tracetui.model.selftime import SelfTimeRule, self_time_rule
from tracetui.model.stats import Agg, Rollups, aggregate, rollups
from tracetui.model.steps import StepChoice, choose_steps
from tracetui.model.taxonomy import classify
from tracetui.model.tree import Tree, build_tree
from tracetui.model.windows import StepWindow, Windows

Progress = Callable[[str, float], None]
"""Callback(stage, fraction done) used by the app's loading worker."""

OP_KINDS = frozenset({K["op"], K["annotation"], K["step"], K["runtime"], K["module"], K["python"]})


@dataclass
class Trace:
    """A loaded, linked trace. Times on nodes are ns; the JSON/CLI layer reports µs."""
    path: Path
    tree: Tree
    roll: Rollups
    meta: dict
    report: LoadReport
    timings: dict = field(default_factory=dict)
    step_choice: StepChoice | None = None
    self_time: SelfTimeRule | None = None

    # ---- identity
    @property
    def store(self) -> EventStore:
        return self.tree.store

    @property
    def device_name(self) -> str | None:
        props = self.meta.get("deviceProperties") or []
        if props and isinstance(props[0], dict) and props[0].get("name"):
            return str(props[0]["name"])
        prov = self.meta.get("tracetui") or {}
        if prov.get("device_type") == "cuda":
            return prov.get("device")
        return None

    @property
    def device_label(self) -> str:
        """The device for people: its name, or why there is none (a GPU trace may lack deviceProperties)."""
        if self.device_name:
            return self.device_name
        return "GPU (name not recorded)" if self.has_gpu else "none (CPU only)"

    @property
    def provenance(self) -> dict:
        return self.meta.get("tracetui") or {}

    @cached_property
    def steps(self) -> list[int]:
        s = np.nonzero(self.tree.kind == K["step"])[0]
        return s[np.argsort(self.tree.start[s])].tolist()

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    # ---- per-node facts
    def name(self, i: int) -> str:
        return self.tree.name(i)

    def kind(self, i: int) -> str:
        return KINDS[self.tree.kind[i]]

    def args(self, i: int) -> dict:
        e = int(self.tree.ev[i])
        return self.store.args(e) if e >= 0 else {}

    def launcher(self, i: int) -> int | None:
        """For GPU activity: what launched it (its tree parent), else None."""
        if self.tree.kind[i] not in GPU_KINDS:
            return None
        p = int(self.tree.parent[i])
        # the runtime call; an op when linked by External id only; None under a "no launch" group
        return p if p > 0 and self.tree.kind[p] in (K["runtime"], K["op"], K["annotation"]) else None

    def launching_op(self, i: int) -> int | None:
        """The innermost ATen op above a runtime call or GPU activity.

        None for GPU activity with no External id: it was launched outside any op (a user
        ``@triton.jit`` kernel), even if an annotation or module encloses the launch.
        """
        if self.tree.kind[i] in GPU_KINDS and self.tree.ev[i] >= 0 and self.store.ext[self.tree.ev[i]] <= 0:
            return None
        return self._nearest(i, self.tree.cparent, K["op"])

    def scope_module(self, i: int) -> int | None:
        """The innermost nn.Module scope above node ``i``."""
        return self._nearest(i, self.tree.parent, K["module"])

    def _nearest(self, i: int, parents: np.ndarray, kind: int) -> int | None:
        """The closest ancestor of ``i`` of ``kind`` along ``parents`` (display or containment)."""
        for p in self.tree.ancestors(i, parents):
            if p <= 0:
                return None
            if self.tree.kind[p] == kind:
                return p
        return None

    def op_chain(self, i: int, stop: tuple) -> list[str]:
        """Names of the ops above ``i``, outermost first, up to the first ancestor of a ``stop`` kind."""
        ops = []
        for p in self.tree.ancestors(i, self.tree.cparent):
            if p <= 0 or self.tree.kind[p] in stop:
                break
            if self.tree.kind[p] == K["op"]:
                ops.append(self.name(p))
        return ops[::-1]

    def gpu_descendants(self, i: int) -> np.ndarray:
        """GPU activity launched under node ``i`` (its containment subtree), in time order."""
        gpu = self._gpu_nodes
        if not gpu.size:
            return gpu
        anc = self._gpu_ancestors
        hit = np.nonzero((anc == i).any(axis=1))[0]
        out = gpu[hit]
        return out[np.argsort(self.tree.start[out])]

    @cached_property
    def _gpu_nodes(self) -> np.ndarray:
        return np.nonzero(np.isin(self.tree.kind, list(GPU_KINDS)))[0]

    @cached_property
    def _gpu_ancestors(self) -> np.ndarray:
        """Ancestor matrix [gpu node, depth] along the containment tree (small: depth ~<= 64)."""
        gpu = self._gpu_nodes
        cols = []
        cur = gpu.copy()
        for _ in range(128):
            cur = np.where(cur >= 0, self.tree.cparent[np.maximum(cur, 0)], -1)
            if not (cur >= 0).any():
                break
            cols.append(cur)
        return np.stack(cols, axis=1) if cols else np.zeros((gpu.size, 0), dtype=np.int64)

    def kernel_info(self, i: int) -> KernelName:
        """What GPU node ``i`` is: class and library from its launching op, then its name (taxonomy.py)."""
        kind = self.kind(i)
        launcher = self.launcher(i)
        op = self.launching_op(i)
        user_triton = bool(launcher is not None and self.name(launcher).startswith("cuLaunchKernel") and op is None)
        return decode_kernel(self.name(i), kind, user_triton=user_triton,
                             launching_op=self.name(op) if op is not None else None)

    def kernel_classes(self, nodes: np.ndarray) -> list[str]:
        """``kernel_info(n).klass`` of each GPU node in ``nodes``, classifying each (name, launching
        op, kind, launched as a user Triton kernel) once: the timeline colours every kernel of a step
        (100k on a large one), and ``kernel_info`` per node took ~20 µs."""
        t = self.tree
        nodes = np.asarray(nodes, dtype=np.int64)
        if not nodes.size:
            return []
        par = t.parent[nodes]
        p = np.maximum(par, 0)
        launcher = (par > 0) & np.isin(t.kind[p], [K["runtime"], K["op"], K["annotation"]])
        culaunch = launcher & self._culaunch_names[t.name_id[p]]
        # the launching op: the first op along the ancestors (innermost); None when the activity
        # has no External id or no op lies above it
        rows = np.searchsorted(self._gpu_nodes, nodes)
        anc = self._gpu_ancestors[rows]
        is_op = (anc >= 0) & (t.kind[np.maximum(anc, 0)] == K["op"])
        has_op = is_op.any(axis=1) & (self.store.ext[t.ev[nodes]] > 0)
        op_node = anc[np.arange(len(nodes)), np.argmax(is_op, axis=1)] if anc.shape[1] else np.zeros(len(nodes), np.int64)
        op_id = np.where(has_op, t.name_id[np.maximum(op_node, 0)], -1).astype(np.int64)
        user = culaunch & ~has_op
        n_names = len(t.names) + 1
        key = ((t.name_id[nodes].astype(np.int64) * n_names + op_id + 1) * 16 + t.kind[nodes]) * 2 + user
        uniq, inv = np.unique(key, return_inverse=True)
        names = self.tree.names
        cls = []
        for k in uniq.tolist():
            rest, u = divmod(k, 2)
            rest, kd = divmod(rest, 16)
            nid, oid = divmod(rest, n_names)
            cls.append(classify(names[nid], KINDS[kd], names[oid - 1] if oid else None, bool(u))[0])
        return [cls[i] for i in inv.ravel().tolist()]

    @cached_property
    def gpu_classes(self) -> np.ndarray:
        """The class of every GPU node (aligned with ``_gpu_nodes``), decoded once per trace: the
        step windows, the rank tables and the collectives all ask for them."""
        return np.array(self.kernel_classes(self._gpu_nodes), dtype=object)

    def classes_of(self, nodes: np.ndarray) -> np.ndarray:
        """``gpu_classes`` of some GPU nodes."""
        nodes = np.asarray(nodes, dtype=np.int64)
        return self.gpu_classes[np.searchsorted(self._gpu_nodes, nodes)] if nodes.size else np.zeros(0, dtype=object)

    @cached_property
    def _culaunch_names(self) -> np.ndarray:
        return np.array([n.startswith("cuLaunchKernel") for n in self.tree.names], dtype=bool)

    def is_cpu_only(self, i: int) -> bool:
        """An op that launched nothing on the GPU (a view such as aten::t), in a trace that has a GPU."""
        return bool(self.has_gpu and self.tree.kind[i] == K["op"] and self.roll.kernels[i] == 0
                    and self.roll.device[i] == 0)

    @cached_property
    def has_gpu(self) -> bool:
        return bool(self._gpu_nodes.size)

    # ---- tables
    @cached_property
    def op_table(self) -> list[Agg]:
        return aggregate(self.tree, self.roll, OP_KINDS)

    @cached_property
    def kernel_table(self) -> list[Agg]:
        return aggregate(self.tree, self.roll, GPU_KINDS)

    @cached_property
    def agg_by_name(self) -> dict:
        """(kind class, name) -> aggregate row: 'gpu' for GPU activity, 'host' for the rest."""
        out = {("host", a.name): a for a in self.op_table}
        out.update({("gpu", a.name): a for a in self.kernel_table})
        return out

    def warm(self) -> "Trace":
        """Compute the lazy tables and indexes now (the explorer does this in a worker after its first paint)."""
        self.op_table, self.kernel_table, self._gpu_ancestors, self.agg_by_name  # noqa: B018
        return self

    @cached_property
    def windows(self) -> Windows:
        """Every step as a window of its whole process (``windows.py``)."""
        return Windows(self)

    @cached_property
    def memory(self):
        """The ``[memory]`` instants as a model (memory.py); reads their args (the lazy pass)."""
        from tracetui.model.memory import build_memory  # noqa: PLC0415
        return build_memory(self)

    @property
    def memory_ready(self) -> bool:
        """Whether ``memory`` was built already (the app builds it in a worker, never on a key)."""
        return "memory" in self.__dict__

    def step_window(self, step: int) -> StepWindow:
        return self.windows.by_node[step]

    def step_gpu_nodes(self, step: int) -> np.ndarray:
        """GPU activity the step launched on any thread of its process, in time order."""
        g = self.step_window(step).gpu
        return g[np.argsort(self.tree.start[g], kind="stable")]

    def step_breakdown(self, step: int) -> dict:
        """Per-step figures over the step's window (ns): see ``Windows.breakdown``."""
        return self.windows.breakdown(self.step_window(step))

    def _step_totals_from_windows(self) -> None:
        """A step's device time and kernel count are its window's (every thread), not only what
        its own thread launched (key_averages() counts only that; the tests compare both)."""
        ws = self.windows.windows
        if not ws:
            return
        nodes = np.fromiter((w.node for w in ws), dtype=np.int64, count=len(ws))
        g, sizes = self.windows.gpu_flat.astype(np.int64), np.diff(self.windows.gpu_at)
        seg = np.repeat(np.arange(len(ws)), sizes)
        device = np.zeros(len(ws), dtype=np.int64)
        np.add.at(device, seg, self.tree.dur[g])
        self.roll.device[nodes] = device
        self.roll.kernels[nodes] = np.bincount(seg[self.tree.kind[g] == K["kernel"]], minlength=len(ws))


LOST_GPU_NOTE = ("no GPU activity survived the cut (Kineto writes runtime calls and kernels after "
                 "the CPU events): device times read 0")
"""Said of a truncated trace of a GPU run (it lists devices) whose kept part has no GPU activity."""


EARLY_GZ_MIN_BYTES = 1 << 20
"""Gzipped files from this size are gunzipped in a thread while the UI starts (zlib releases
the GIL: gunzip of 61 MB beside Python work, 0.29 s together against 0.44 s one after the other)."""


EARLY_GZ_HEAD_BYTES = 16 << 20
"""The head start of a gzipped trace's child, which forks only once the gunzip is done (about
halfway through the UI's start-up, where an uncompressed file's child forks at its beginning)."""


class _Gunzipping:
    """A gzipped trace being read and gunzipped in a thread since the CLI started; once the
    bytes are there, the same thread forks the child that decodes their tail (``split.start``).

    Same interface as ``split.Early``: ``bytes()`` waits for the file's contents (or raises the
    error reading it met), ``finish()`` joins the child's part (None: there is none), ``cancel()``
    drops both.
    """

    def __init__(self, path: Path):
        self.path, self.report = path, LoadReport()
        self._data = self._error = self._early = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._read, name="tracetui-gunzip", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._data = read_bytes(self.path, self.report)
        except BaseException as e:  # noqa: BLE001 - raised again where the load asks for the bytes
            self._error = e
            return
        if not self._cancelled:
            self._early = _split.start(self._data, self.path, self.report, head_bytes=EARLY_GZ_HEAD_BYTES)
            if self._cancelled and self._early is not None:  # cancelled while it forked
                self._early.cancel()

    def bytes(self) -> tuple:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._data, self.report

    def finish(self, progress=None):
        self._thread.join()
        return self._early.finish(progress) if self._early is not None else None

    def cancel(self) -> None:
        self._cancelled = True
        self._data = None
        if self._early is not None:
            self._early.cancel()


def start_load(path) -> "_split.Early | _Gunzipping | None":
    """Begin loading a large trace file before the UI is imported.

    An uncompressed file is read and the decode of its tail starts in a forked child; a gzipped
    one is gunzipped in a thread. Returns the handle for ``load_trace(path, early=...)``, or None
    where it would not help (a small file, no fork, an envelope it cannot place): loading then
    starts later as usual. Reading errors are left for ``load_trace`` to report.
    """
    try:
        path = resolve_input(Path(path))
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
            size = os.fstat(f.fileno()).st_size
        if gz:
            return _Gunzipping(path) if size >= EARLY_GZ_MIN_BYTES else None
        if size < _split.MIN_BYTES:
            return None
        report = LoadReport()
        data = read_bytes(path, report)
    except (TraceError, OSError):
        return None
    return _split.start(data, path, report)


def load_trace(path, progress: Progress | None = None, early: "_split.Early | _Gunzipping | None" = None,
               steps: str | None = None, torch_version: str | None = None) -> Trace:
    """Read, decode, link and roll up a trace file (or the newest trace in a folder).

    ``early`` is ``start_load``'s handle: used when it is for the same file, else discarded.
    ``steps`` is a regex naming the step markers (else ``steps.choose_steps`` decides);
    ``torch_version`` overrides the recording's version for the self-time rule.
    """
    # Loading allocates millions of small objects and no cycles; the cyclic GC would rescan
    # them all at every threshold (measured: ~30% of load time on a 270k-event trace).
    was = gc.isenabled()
    gc.disable()
    try:
        with large_arrays_on_heap():  # GB-sized traces: numpy temporaries reuse heap pages
            return _load(path, progress, early, steps, torch_version)
    finally:
        if early is not None:
            early.cancel()  # a no-op once its result was collected
        if was:
            gc.enable()


def _why_empty(store: EventStore) -> str:
    """Why a trace gave no events, naming what was left out (categories, unreadable events)."""
    left = [f"{c:,} {k}" for k, c in sorted(store.skipped.items(), key=lambda kv: -kv[1])]
    bad = sum(store.unreadable.values())
    if bad:
        fields = ", ".join(sorted(store.unreadable))
        return f"not a PyTorch profiler trace: {bad:,} event(s) with a field of the wrong type ({fields})"
    if store.times_out_of_range:
        left.insert(0, f"{store.times_out_of_range:,} with ts/dur out of range")
    if not left:
        return "trace holds no events"
    more = f" and {len(left) - 5} more" if len(left) > 5 else ""
    return f"trace holds no events tracetui uses (skipped: {', '.join(left[:5])}{more})"


def _load(path, progress: Progress | None, early: "_split.Early | _Gunzipping | None",
          steps: str | None = None, torch_version: str | None = None) -> Trace:
    say = progress or (lambda stage, frac: None)

    def decoded(frac: float) -> None:  # after each piece this process decoded (it may cancel)
        say("decoding", 0.15 + 0.6 * frac)

    path = resolve_input(Path(path))
    ahead = early is not None and early.path == path
    t0 = time.perf_counter()
    say("reading", 0.0)
    if ahead:
        data, report = early.bytes()
    else:
        report = LoadReport()
        data = read_bytes(path, report)
    t1 = time.perf_counter()
    say("decoding", 0.15)
    split = early.finish(decoded) if ahead else None
    if split is None:
        split = decode_index(data, progress=decoded)  # two processes on a large, valid file; None otherwise
    if split is not None:
        doc, store, lenient = split
        if lenient:
            report.repairs.append(LENIENT_NOTE)
        t2 = time.perf_counter()
    else:
        doc, data = decode(path, data, report)
        t2 = time.perf_counter()
        say("indexing", 0.55)
        store = build_store(doc.traceEvents, source=data)
    if not len(store) and not store.flows:
        raise TraceError(path, _why_empty(store))
    if report.truncated_bytes and doc.deviceProperties and not np.isin(store.kind, list(GPU_KINDS)).any():
        report.repairs.append(LOST_GPU_NOTE)
    meta = clean_meta(doc)
    del doc
    try:
        choice = choose_steps(store, steps)
    except re.error as e:
        raise TraceError(path, f"--steps {steps!r} is not a valid regular expression ({e})") from None
    rule = self_time_rule(meta, bool((store.kind == K["python"]).any() or (store.kind == K["module"]).any()),
                          torch_version)
    t3 = time.perf_counter()
    say("linking", 0.75)
    tree = build_tree(store, title=path.name)
    t4 = time.perf_counter()
    say("rolling up", 0.9)
    roll = rollups(tree, python_owns_time=rule.frames_own_time)
    t5 = time.perf_counter()
    say("done", 1.0)
    timings = {"read": t1 - t0, "decode": t2 - t1, "index": t3 - t2, "link": t4 - t3, "rollup": t5 - t4}
    if split is not None:  # decode and index overlapped on two cores
        timings = {"read": t1 - t0, "decode+index (2 processes)": t3 - t1, "link": t4 - t3, "rollup": t5 - t4}
    trace = Trace(path=path, tree=tree, roll=roll, meta=meta, report=report, timings=timings,
                  step_choice=choice, self_time=rule)
    trace._step_totals_from_windows()
    return trace
