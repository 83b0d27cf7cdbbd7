"""Steps as windows of the whole process: what the GPU did for a step, on every thread and stream.

The tree answers "who launched what"; a window answers "where did the time go". A step's window
starts where its marker starts on the host and owns every piece of GPU activity whose launch
(the runtime call, or the op when only the External id links them) starts inside the marker's
interval on any thread of the same process: the forward on the main thread, the backward on
``pt_autograd_0``, the optimizer, data-loader threads. This is HTA's rule. GPU activity with no
launch found counts for the step whose interval holds its own start.

A step marker recorded alone on a process of its own (no host work there but step markers: HTA's
``triton_example`` puts ``ProfilerStep#1`` on one pid and its work on another) owns the host work
in its interval of every process that has no step markers of its own (``CLAIMS``); a process with
its own markers (a rank merged into the same file, say) always keeps its work.

The GPU can run behind the host, so the window ends at the later of the marker's end and the
end of the step's last GPU activity. Inside it every nanosecond is exactly one of: busy with this
step's work, busy with other work (an earlier step's, the queue was behind, or work launched outside
every step; ``other_steps`` in the figures, "other work" in reports), or idle; idle splits into host
wait, kernel wait and other (HTA's idle-time breakdown). Windows of consecutive steps can overlap
when the GPU lags; the host intervals never do.
"""
from __future__ import annotations

import re
from functools import cached_property

import numpy as np

from tracetui.read.events import GPU_KINDS, K, kind_mask
from tracetui.model.claims import CLAIMS, claimed  # noqa: F401 - CLAIMS: the rule, as windows has offered it

RUNTIME_ROLES = (
    (re.compile(r"GraphLaunch"), "launch", "a CUDA/HIP graph launch enqueues a whole captured graph"),
    (re.compile(r"(?i)launch"), "launch", "cudaLaunchKernel, cuLaunchKernel(Ex), hipLaunchKernel, "
                                          "hipExtModuleLaunchKernel: enqueue one kernel"),
    (re.compile(r"(?i)mem(cpy|set)\w*async"), "launch", "async copies and sets are enqueued like kernels"),
    (re.compile(r"(?i)synchronize"), "sync", "the host blocks until the device (stream, event) is done"),
    (re.compile(r"(?i)^(cuda|hip|cu)mem(cpy|set)(?!.*async)"), "sync",
     "a synchronous copy or set waits for the device before it returns"),
    (re.compile(r"(?i)(malloc|free|hostalloc|hostregister|memgetinfo)"), "alloc",
     "allocator calls: not launches, and not waits on the device"),
)
"""Runtime/driver call name -> role, first match wins. Only ``launch`` counts as launch CPU;
``sync`` is reported on its own line; everything else (stream/event bookkeeping, queries,
``cudaStreamWaitEvent``, which enqueues a device-side wait) is neither."""

KERNEL_WAIT_NS = 5_000
"""An idle gap before work that was already enqueued counts as kernel wait (launch latency and
the hand-over between back-to-back kernels) up to this length; longer gaps are "other" (waiting
on an event, another stream, a collective)."""

COMM_CLASSES = frozenset({"communication"})
"""Taxonomy classes (tracetui/model/taxonomy.py) that count as communication."""
NON_COMPUTE = COMM_CLASSES | {"memcpy", "memset"}

VERDICTS = (
    ("GPU-bound", "busy >= 80% of the window: the GPU ran this step's work nearly all the time"),
    ("sync-bound", "the host spent >= 25% of the step in synchronising calls while the GPU idled"),
    ("launch-bound", "idle is mostly host wait and launch calls took >= 30% of the step's host time"),
    ("CPU-bound", "idle is mostly host wait: the host was busy with other work, not launching"),
    ("mixed", "none of the above dominates"),
)
"""Per-step verdicts, tried in order; each names the figures it follows from."""


def runtime_role(name: str) -> str:
    """``launch`` | ``sync`` | ``alloc`` | ``other`` for a runtime/driver call name (``RUNTIME_ROLES``)."""
    for rx, role, _ in RUNTIME_ROLES:
        if rx.search(name):
            return role
    return "other"


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of intervals (overlapping streams and devices counted once)."""
    s, e = _merged(starts, ends)
    return int((e - s).sum())


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint, sorted (start, end) arrays."""
    if not starts.size:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    grp = np.cumsum(new) - 1
    g_end = np.zeros(int(new.sum()), dtype=np.int64)
    np.maximum.at(g_end, grp, e)
    return s[new], g_end


def _flat(nodes: np.ndarray, step_ix: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(``nodes`` grouped by step index 0..n-1, each group in its original order; offsets of
    the groups): -1 dropped. Step ``k``'s nodes are ``flat[at[k]:at[k + 1]]``."""
    o = np.argsort(step_ix, kind="stable")
    at = np.searchsorted(step_ix[o], np.arange(n + 1))
    return nodes[o[at[0]:]], at - at[0]


def _distinct(keys: np.ndarray, bound: int) -> np.ndarray:
    """``np.unique(keys)`` of keys in [0, bound): counted where the bound is small beside the
    keys (a hash-based unique of 2.5M host nodes' (step, thread) keys took ~37 ms at 1 GB)."""
    if bound <= 4 * keys.size + 1024:
        return np.flatnonzero(np.bincount(keys, minlength=bound)).astype(keys.dtype)
    return np.unique(keys)


def _clip(starts, ends, lo, hi):
    s, e = np.maximum(starts, lo), np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


class StepWindow:
    """One step: its marker node, host interval and the GPU activity it launched (node ids).

    ``gpu``: GPU activity nodes launched in [start, end) on any thread of ``pid``; ``runtime``:
    runtime/driver call nodes starting there; ``threads``: host track keys with events starting
    there. The three are cut from the ``Windows``' flat arrays when asked (a trace of 250,000
    steps builds 250,000 windows)."""
    __slots__ = ("node", "name", "pid", "start", "end", "k", "_of")

    def __init__(self, node: int, name: str, pid, start: int, end: int, k: int, of: "Windows"):
        self.node, self.name, self.pid, self.start, self.end, self.k, self._of = node, name, pid, start, end, k, of

    @property
    def gpu(self) -> np.ndarray:
        at = self._of.gpu_at
        return self._of.gpu_flat[at[self.k]:at[self.k + 1]]

    @property
    def runtime(self) -> np.ndarray:
        at = self._of.runtime_at
        return self._of.runtime_flat[at[self.k]:at[self.k + 1]]

    @property
    def threads(self) -> list:
        of = self._of
        keys = of.trace.store.track_keys
        return sorted((keys[x] for x in of.thread_flat[of.thread_at[self.k]:of.thread_at[self.k + 1]].tolist()),
                      key=str)

    @property
    def gpu_end(self) -> int:
        return self.end

    @property
    def pids(self) -> tuple:
        """The processes whose host work the window holds: its marker's, and where the marker is
        alone on its process, every process without step markers of its own (``CLAIMS``)."""
        return (self.pid, *self._of.claimed_pids.get(self.pid, ()))


class Windows:
    """Every step window of a trace, and the per-step breakdown over each."""

    def __init__(self, trace, kept: dict | None = None):
        """``kept``: the arrays below and ``step_pids``, as a reopen reads them back
        (model/reopen.py) instead of computing them."""
        self.trace = trace
        t = trace.tree
        store = t.store
        # processes as small ints (-1: none, or a GPU track): the per-node work below compares
        # ints, not an object array of pids (0.4 s of the serial load at 1 GB)
        pids = [k[0] if k and k[0] != "gpu" else None for k in store.track_keys]
        self._pid_values = list(dict.fromkeys(p for p in pids if p is not None))
        code = {p: i for i, p in enumerate(self._pid_values)}
        self._pid_code_of_track = np.array([code[p] if p is not None else -1 for p in pids] or [-1],
                                           dtype=np.int64)
        if kept is not None:
            for name, a in kept.items():
                if name not in ("step_pids", "claimed_pids"):
                    setattr(self, name, a)
            self.claimed_pids = {p: tuple(c) for p, c in kept.get("claimed_pids") or ()}
            self._step_rows(np.asarray(trace.steps, dtype=np.int64), kept["step_pids"])
            return
        steps = trace.steps
        gpu = trace._gpu_nodes
        # the launch of each piece of GPU activity: its runtime call, or the op linked by External id
        par = t.parent[gpu] if gpu.size else gpu
        launcher = np.where((par > 0) & kind_mask(t.kind[np.maximum(par, 0)], [K["runtime"], K["op"], K["annotation"]]),
                            par, -1)
        self.launcher = launcher
        self.launch_ts = np.where(launcher >= 0, t.start[np.maximum(launcher, 0)], t.start[gpu])
        self.launch_end = np.where(launcher >= 0, t.start[np.maximum(launcher, 0)] + t.dur[np.maximum(launcher, 0)],
                                   -1)
        g_pid = self.process_codes(launcher)
        host = np.nonzero(kind_mask(t.kind, [K["step"], K["annotation"], K["module"], K["python"], K["op"],
                                           K["runtime"]]))[0]
        h_track = store.track[t.ev[host]]
        h_pid = self._pid_code_of_track[h_track]  # process_codes of nodes that are events
        at_rt = np.flatnonzero(t.kind[host] == K["runtime"])  # the runtime calls are host nodes: their
        rt, r_pid = host[at_rt], h_pid[at_rt]                  # codes are found with the rest
        steps = np.asarray(steps, dtype=np.int64)
        s_pid = self.process_codes(steps)
        claims = self._claims(s_pid, h_pid)
        self.claimed_pids = {self._pid_values[p]: tuple(self._pid_values[c] for c in cs.tolist())
                             for p, cs in claims.items()}
        g_step = self._assign(steps, s_pid, self.launch_ts, g_pid, claims, any_pid=True)
        r_step = self._assign(steps, s_pid, t.start[rt], r_pid, claims)
        h_step = self._assign(steps, s_pid, t.start[host], h_pid, claims)
        n = steps.size
        # per step, as one flat array and offsets (also what window_figures reads, all steps at once)
        self.gpu_flat, self.gpu_at = _flat(gpu, g_step, n)
        self.runtime_flat, self.runtime_at = _flat(rt, r_step, n)
        # each window's host threads: the distinct (step, track) pairs, found once for all steps
        in_step = h_step >= 0
        n_tracks = max(len(store.track_keys), 1)
        pairs = _distinct(h_step[in_step] * n_tracks + h_track[in_step], n * n_tracks)
        p_step, self.thread_flat = np.divmod(pairs, n_tracks)
        self.thread_at = np.searchsorted(p_step, np.arange(n + 1))
        self._step_rows(steps, [self._pid_values[c] if c >= 0 else None for c in s_pid.tolist()])

    def _step_rows(self, steps: np.ndarray, s_pid: list) -> None:
        """One ``StepWindow`` per step, cutting its parts from the flat arrays when asked."""
        t = self.trace.tree
        names, name_id = t.names, t.name_id[steps].tolist()
        s_start, s_end = t.start[steps].tolist(), (t.start[steps] + t.dur[steps]).tolist()
        self.windows: list[StepWindow] = [
            StepWindow(s, names[name_id[k]], pid, s_start[k], s_end[k], k, self)
            for k, (s, pid) in enumerate(zip(steps.tolist(), s_pid))]
        self.by_node = {w.node: w for w in self.windows}

    def process_code(self, pid) -> int:
        """``pid`` as ``process_codes`` gives it (-1: None, or a process with no host track)."""
        try:
            return self._pid_values.index(pid) if pid is not None else -1
        except ValueError:
            return -1

    def process_codes(self, nodes: np.ndarray) -> np.ndarray:
        """The host process of each node, as its index in ``_pid_values`` (-1 where there is
        none: node -1, or a GPU node): ints, so callers compare arrays, not pid objects."""
        t = self.trace.tree
        ev = np.where(nodes >= 0, t.ev[np.maximum(nodes, 0)], -1)
        tr = np.where(ev >= 0, t.store.track[np.maximum(ev, 0)], -1)
        return np.where(tr >= 0, self._pid_code_of_track[np.maximum(tr, 0)], -1)

    def _claims(self, s_pid: np.ndarray, h_pid: np.ndarray) -> dict[int, np.ndarray]:
        """Step process code -> the process codes its markers also claim (``claims.claimed``,
        the rule ``CLAIMS``). ``h_pid``: the process of every host node, the step
        markers (``s_pid``, every step-kind node) among them. Counted, not sorted: one pass over
        the host nodes (``np.unique`` took 1.5 s on 20 million)."""
        n = len(self._pid_values)
        host = np.bincount(h_pid + 1, minlength=n + 1)[1:n + 1]  # code -1 (none) counted apart, dropped
        marks = np.bincount(s_pid + 1, minlength=n + 1)[1:n + 1]
        return claimed(marks, host)

    def _assign(self, steps: np.ndarray, s_pid: np.ndarray, ts: np.ndarray, pid: np.ndarray,
                claims: dict[int, np.ndarray], any_pid: bool = False) -> np.ndarray:
        """Index (into ``steps``) of the step whose host interval holds each time, on the same
        process or one it claims (``_claims``; any process where ``pid`` is -1 and ``any_pid``),
        else -1."""
        t = self.trace.tree
        out = np.full(ts.size, -1, dtype=np.int64)
        for p in dict.fromkeys(s_pid.tolist()):
            mine = np.nonzero(s_pid == p)[0]
            mine = mine[np.argsort(t.start[steps[mine]], kind="stable")]
            s0 = t.start[steps[mine]]
            s1 = s0 + t.dur[steps[mine]]
            sel = pid == p
            if p in claims:
                sel |= np.isin(pid, claims[p])
            if any_pid:
                sel |= pid == -1
            idx = None if sel.all() else np.flatnonzero(sel)  # all: one process (most traces), no gathers
            at = ts if idx is None else ts[idx]
            k = np.searchsorted(s0, at, side="right") - 1
            inside = (k >= 0) & (at < s1[np.maximum(k, 0)])
            out[inside if idx is None else idx[inside]] = mine[k[inside]]
        return out

    @cached_property
    def _all_gpu(self) -> tuple[np.ndarray, np.ndarray]:
        """Every GPU activity interval of the trace, merged (what the GPU did, whoever launched it)."""
        t = self.trace.tree
        g = self.trace._gpu_nodes
        return _merged(t.start[g], t.start[g] + t.dur[g])

    @cached_property
    def figures(self):
        """Every window's breakdown figures, computed together (``window_figures.py``)."""
        from tracetui.model.window_figures import Figures  # noqa: PLC0415
        return Figures(self, KERNEL_WAIT_NS, COMM_CLASSES, NON_COMPUTE, runtime_role)

    @cached_property
    def _index(self) -> dict:
        return {w.node: k for k, w in enumerate(self.windows)}

    def breakdowns(self) -> list[dict]:
        """``breakdown`` of every window, in ``windows`` order, built together."""
        rows = self.figures.rows()
        gaps = self.trace.graph_gaps.by_step
        for w, out in zip(self.windows, rows):
            out["verdict"], out["verdict_reason"] = _unknown(gaps.get(w.node)) or verdict(out)
        return rows

    def breakdown(self, w: StepWindow) -> dict:
        """The step's figures (ns): window, busy (own work), other work (``other_steps_ns``: GPU work
        the step did not launch), idle and its split
        (host wait / kernel wait / other), busy by kernel class, communication exposed/overlapped,
        launch and sync CPU, and a verdict.

        Invariant: ``busy + other_steps + idle == window`` and every part is >= 0.
        """
        out = self.figures.of(self._index[w.node])
        out["verdict"], out["verdict_reason"] = _unknown(self.trace.graph_gaps.by_step.get(w.node)) or verdict(out)
        return out


def _unknown(gaps) -> tuple[str, str] | None:
    """A step whose CUDA-graph work is hidden (``graphs.StepGaps``) has no verdict: its idle is unknown."""
    return ("unknown", gaps.note()) if gaps is not None and gaps.incomplete else None


def _intersection_ns(a_s, a_e, b_s, b_e) -> int:
    """Length of (union A) ∩ (union B), both given as disjoint sorted intervals."""
    if not a_s.size or not b_s.size:
        return 0
    total = 0
    j = 0
    for s, e in zip(a_s.tolist(), a_e.tolist()):
        while j < b_s.size and b_e[j] <= s:
            j += 1
        k = j
        while k < b_s.size and b_s[k] < e:
            total += min(e, int(b_e[k])) - max(s, int(b_s[k]))
            k += 1
    return total


def verdict(b: dict) -> tuple[str, str]:
    """The first of ``VERDICTS`` that holds, and the figures it follows from."""
    win, cpu = max(b["window_ns"], 1), max(b["cpu_ns"], 1)
    busy_pct = 100 * b["busy_ns"] / win
    hw = b["idle_split_ns"]["host_wait"]
    idle = max(b["idle_ns"], 1)
    figures = (f"busy {busy_pct:.0f}% of the window, idle {100 * b['idle_ns'] / win:.0f}% "
               f"(host wait {100 * hw / idle:.0f}% of it), launch CPU {100 * b['launch_cpu_ns'] / cpu:.0f}% "
               f"and sync CPU {100 * b['sync_cpu_ns'] / cpu:.0f}% of the step")
    if not b["gpu_events"]:
        return "CPU only", "the step launched no GPU work"
    if busy_pct >= 80:
        return "GPU-bound", figures
    if b["sync_cpu_ns"] >= 0.25 * cpu:
        return "sync-bound", figures
    if hw >= 0.5 * b["idle_ns"] and b["launch_cpu_ns"] >= 0.3 * cpu:
        return "launch-bound", figures
    if hw >= 0.5 * b["idle_ns"]:
        return "CPU-bound", figures
    return "mixed", figures
