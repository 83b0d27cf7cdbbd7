"""The model's front door: ``load_trace(path)`` -> ``Trace`` (events, tree, rollups, metadata)."""
from __future__ import annotations

import gc
import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np

from tracetui.read.errors import TraceError
from tracetui.read.heap import large_arrays_on_heap
from tracetui.read.together import quick_handoff
from tracetui.read.events import GPU_KINDS, K, KINDS, EventStore, kind_mask
from tracetui.read.early import start_load, _Gunzipping  # noqa: F401 - the CLI's and tests' way in
from tracetui.read.load import LOST_GPU_NOTE, Events, decode_store  # noqa: F401 - LOST_GPU_NOTE: tests
from tracetui.read import cache as store_cache
from tracetui.read.source import LoadReport, read_input, resolve_input
from tracetui.model import reopen as model_cache
from tracetui.model.kclass import KernelClasses
from tracetui.model.selftime import SelfTimeRule, self_time_rule
from tracetui.model.stats import Agg, Rollups, aggregate, rollups_beside, torch_device
from tracetui.model.steps import StepChoice, choose_steps
from tracetui.model.tree import Tree, link_tree
from tracetui.model.windows import StepWindow, Windows

Progress = Callable[[str, float], None]
"""Callback(stage, fraction done) used by the app's loading worker."""

OP_KINDS = frozenset({K["op"], K["annotation"], K["step"], K["runtime"], K["module"], K["python"]})


@dataclass
class Trace(KernelClasses):
    """A loaded, linked trace. Times on nodes are ns; the JSON/CLI layer reports µs.

    Its parts: identity (device, provenance, steps), per-node facts (names, launchers, scopes),
    the GPU activity's classes (``kclass.KernelClasses``), the op and kernel tables, and the
    step windows and memory model built on demand."""
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
        return np.nonzero(kind_mask(self.tree.kind, GPU_KINDS))[0]

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
        """key_averages()'s rows: device totals as torch counts them, ``device_scope_us`` with
        op-less kernels and every thread of a step (``stats.torch_device``)."""
        return aggregate(self.tree, self.roll, OP_KINDS, device=torch_device(self.tree))

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
    def step_labels(self) -> dict:
        """Step node -> ``serving.StepLabel`` (prefill / decode / mixed, batch, tokens) where an
        engine annotation says it (``phases.step_labels``)."""
        from tracetui.model.phases import step_labels  # noqa: PLC0415
        return step_labels(self)

    @cached_property
    def graph_gaps(self):
        """CUDA/HIP graph launches and the steps whose graph work is hidden (``graphs.graph_gaps``)."""
        from tracetui.model.graphs import graph_gaps  # noqa: PLC0415
        return graph_gaps(self)

    def phase_figures(self, top: int = 5) -> list[dict]:
        """Per phase (prefill / decode / …): steps, device ns, kernels, top kernels; steps whose
        graph work is hidden are counted but not summed (``phases.phase_figures``)."""
        from tracetui.model.phases import phase_figures  # noqa: PLC0415
        return phase_figures(self, self.step_labels, top, frozenset(self.graph_gaps.incomplete_steps))

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


OUT_OF_MEMORY = ("ran out of memory while loading (a load needs about 2.4x the trace's size; "
                 "TRACETUI_MAX_BYTES caps what is read)")


def load_trace(path, progress: Progress | None = None, early=None,
               steps: str | None = None, torch_version: str | None = None, cache: bool = False,
               workers: int | None = None) -> Trace:
    """Read, decode, link and roll up a trace file (or the newest trace in a folder).

    The stages, in order: resolve the input and read its bytes (read/source.py), the decode
    strategy and the event store (read/load.py), the step markers (steps.py), the tree
    (tree.py), the rollups (stats.py). ``early`` is ``start_load``'s handle: used when it is
    for the same file, else discarded. ``steps`` is a regex naming the step markers (else
    ``steps.choose_steps`` decides); ``torch_version`` overrides the recording's version for
    the self-time rule. ``cache``: reopen from the event store cached for this very file, and
    cache it after a decode (read/cache.py; TRACETUI_NO_CACHE=1 turns it off). ``workers``:
    the cores a large file's load uses: decode processes (read/split.py), then threads
    for the later stages (read/together.py); default one per usable CPU, at most 8.
    """
    say = progress or (lambda stage, frac: None)
    # Loading allocates millions of small objects and no cycles; the cyclic GC would rescan
    # them all at every threshold (measured: ~30% of load time on a 270k-event trace).
    was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        say("reading", 0.0)
        # read before the heap mode below: a buffer that grows (gunzip) must be free to move
        # by mremap, not copied on the heap (a gzip bomb reached 2x the limit there)
        ident, events = _from_cache(path) if cache else (None, None)
        if events is not None:
            with quick_handoff():
                return _model(events, say, steps, torch_version, {"cache": time.perf_counter() - t0}, ident, workers)
        src = read_input(path, early)
        read_s = time.perf_counter() - t0
        with large_arrays_on_heap(), quick_handoff():  # heap: GB-sized traces' numpy temporaries reuse pages
            say("decoding", 0.15)
            events = decode_store(src, early, say, workers)
            kept = ident is not None and store_cache.keep(src.path, ident, src.data, events)
            # the model's entry only beside a store's entry: both are this file's, as ``ident`` says
            return _model(events, say, steps, torch_version, {"read": read_s, **events.timings},
                          ident if kept else None, workers)
    except MemoryError:
        raise TraceError(path, OUT_OF_MEMORY) from None
    finally:
        if early is not None:
            early.cancel()  # a no-op once its result was collected
        if was:
            gc.enable()


def _from_cache(path) -> tuple[list | None, Events | None]:
    """(the file's identity, its events from the reopen cache or None); the identity is taken
    before the file is read, so a file that changes while it is read is not cached."""
    resolved = resolve_input(Path(path))
    if not store_cache.enabled():
        return None, None
    ident = store_cache.identity(resolved)
    return ident, store_cache.cached_events(resolved, ident)


def _model(events: Events, say: Progress, steps: str | None, torch_version: str | None,
           timings: dict, ident: list | None = None, workers: int | None = None) -> Trace:
    """The model's stages over the event store: step markers -> tree -> rollups (-> the step
    windows' totals); read back from the reopen cache instead where ``ident`` (the file's
    identity, read/cache.py) has an entry made with the same options, and written there after."""
    t0 = time.perf_counter()
    store, path = events.store, events.path
    try:
        choice = choose_steps(store, steps)
    except re.error as e:
        raise TraceError(path, f"--steps {steps!r} is not a valid regular expression ({e})") from None
    rule = self_time_rule(events.meta, bool((store.kind == K["python"]).any() or (store.kind == K["module"]).any()),
                          torch_version)

    def make(tree: Tree, roll: Rollups | None) -> Trace:
        return Trace(path=path, tree=tree, roll=roll, meta=events.meta, report=events.report, timings=timings,
                     step_choice=choice, self_time=rule)

    t1 = time.perf_counter()
    _index_time(timings, t1 - t0)
    key = model_cache.key(path.name, steps, rule.frames_own_time) if ident is not None else None
    got = model_cache.load(path, ident, store, key) if ident is not None else None
    if got is not None:
        say("done", 1.0)
        tree, roll, kept, tables = got
        timings["model_cache"] = time.perf_counter() - t1
        trace = make(tree, roll)
        windows = model_cache.kept_windows(trace, kept) if kept is not None else None
        if windows is not None:
            trace.windows = windows  # the rollups hold their totals already
        else:
            trace._step_totals_from_windows()  # builds them (the totals it sets are the kept ones)
        trace.__dict__.update(tables)  # the op and kernel tables, the GPU nodes' classes
        return trace
    say("linking", 0.75)
    tree = link_tree(store, title=path.name, cut_frames=not rule.frames_own_time, workers=workers)
    t2 = time.perf_counter()
    timings["link"] = t2 - t1
    say("rolling up", 0.9)
    trace = make(tree, None)
    # the step windows need only the linked nodes: built beside the rollups and the display
    # tree's finish (stats.rollups_beside), then their totals go into the rollups' step rows
    trace.roll, trace.windows = rollups_beside(tree, lambda: Windows(trace), python_owns_time=rule.frames_own_time,
                                               workers=workers)
    trace._step_totals_from_windows()
    timings["tree+rollup+windows"] = time.perf_counter() - t2
    say("done", 1.0)
    if ident is not None:
        try:
            model_cache.save(path, ident, key, trace)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, MemoryError):
            pass  # the cache only saves time: a trace that loaded is not lost to its entry
    return trace


def _index_time(timings: dict, seconds: float) -> None:
    """The step markers' time counts as indexing (or as the cache's, on a reopen)."""
    if "index" in timings:
        timings["index"] += seconds
    elif "cache" in timings:
        timings["cache"] += seconds
    else:  # decode and index overlapped on several cores
        key = next(k for k in timings if k.startswith("decode+index"))
        timings[key] += seconds
