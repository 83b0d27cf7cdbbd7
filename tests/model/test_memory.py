"""Memory model against a reference written here straight from the raw JSON: peaks, pairing,
per-op statistics (TensorBoard plugin definitions), the planted leak; on a CPU recording made by
the test and on HTA's GPU peer trace (two threads, backward on its own)."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from tracetui.model import load_trace
from tracetui.read.events import K

from tests.conftest import DATA, TRACES
from tests.memory_workload import LEAK_ELEMS

HTA_MEMORY = "df_index_resolver_df_index_resolver.json.gz"


class Raw:
    """The reference: the file's events read with exact decimals, times as integer ns."""

    def __init__(self, path: Path):
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as f:
            events = json.load(f, parse_float=Decimal)["traceEvents"]
        ns = lambda v: int(Decimal(v) * 1000)  # noqa: E731
        self.mem = []   # (order key, file index, thread, ts ns, args) in (ts, file) order
        self.ops = defaultdict(list)  # thread -> (start, end, file index, name) of cpu_ops
        self.modules = defaultdict(list)
        for i, e in enumerate(events):
            key = (e.get("pid"), e.get("tid"))
            if e.get("ph") == "i" and e.get("name") == "[memory]":
                self.mem.append((ns(e["ts"]), i, key, e["args"]))
            elif e.get("ph") == "X" and e.get("cat") == "cpu_op":
                self.ops[key].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), i, e["name"]))
            elif e.get("ph") == "X" and e.get("cat") == "python_function" and e["name"].startswith("nn.Module: "):
                self.modules[key].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), i, e["name"][11:]))
        self.mem.sort(key=lambda m: (m[0], m[1]))
        self.merged = self._merged(events, ns)

    @staticmethod
    def _merged(events, ns) -> set:
        """File indexes of the cpu_ops torch (``EventList._remove_dup_nodes``) and the TensorBoard
        plugin (``remove_dup_nodes``) merge into their parent: an op whose innermost enclosing
        event (cpu_op or user_annotation, same thread) is a cpu_op of its name with no other child."""
        by = defaultdict(list)
        for i, e in enumerate(events):
            if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
                by[(e.get("pid"), e.get("tid"))].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), i))
        parent, kids = {}, defaultdict(int)
        for evs in by.values():
            stack: list = []
            for s, e, i in sorted(evs, key=lambda x: (x[0], -(x[1] - x[0]), x[2])):
                while stack and not (stack[-1][0] <= s and e <= stack[-1][1]):
                    stack.pop()
                if stack:
                    parent[i] = stack[-1][2]
                    kids[stack[-1][2]] += 1
                stack.append((s, e, i))
        return {i for i, p in parent.items() if events[i].get("cat") == "cpu_op" and events[p].get("cat") == "cpu_op"
                and events[i]["name"] == events[p]["name"] and kids[p] == 1}

    @staticmethod
    def device(args) -> str:
        return "CPU" if args["Device Type"] == 0 else f"GPU{args['Device Id']}"

    def peaks(self) -> dict:
        out: dict = {}
        for _, _, _, a in self.mem:
            d = self.device(a)
            out[d] = max(out.get(d, -1), a["Total Allocated"])
        return out

    def pairs(self) -> dict:
        """allocation file index -> its free's, by walking each (device, address) in time order."""
        open_at, out = {}, {}
        for _, i, _, a in self.mem:
            k = (self.device(a), a["Addr"])
            if a["Bytes"] > 0:
                open_at[k] = i
            elif k in open_at:
                out[open_at.pop(k)] = i
        return out

    def containing(self, key, t) -> list:
        """cpu_ops on the thread with start <= t < end, outermost first."""
        hits = [o for o in self.ops[key] if o[0] <= t < o[1]]
        return sorted(hits, key=lambda o: (o[0], -(o[1] - o[0]), o[2]))

    def all_containing(self) -> list:
        """``containing`` of every instant (in ``mem`` order), by one sweep per thread: ops enter
        the active set at their start and leave once an instant is at or past their end."""
        ops = {k: sorted(v) for k, v in self.ops.items()}
        nxt = defaultdict(int)
        active = defaultdict(dict)
        out = []
        for t, _, key, _ in self.mem:
            mine, act = ops.get(key, []), active[key]
            j = nxt[key]
            while j < len(mine) and mine[j][0] <= t:
                act[mine[j][2]] = mine[j]
                j += 1
            nxt[key] = j
            for f in [f for f, o in act.items() if o[1] <= t]:
                del act[f]
            out.append(sorted(act.values(), key=lambda o: (o[0], -(o[1] - o[0]), o[2])))
        return out

    def op_stats(self) -> dict:
        """(device, op name) -> [alloc count, alloc bytes, self count, self bytes, increase, self increase]."""
        out = defaultdict(lambda: [0] * 6)
        for (t, _, key, a), ops in zip(self.mem, self.all_containing()):
            ops = [o for o in ops if o[2] not in self.merged]  # the plugin's tree has no merged node
            if not ops:
                continue
            b, d = a["Bytes"], self.device(a)
            for j, o in enumerate(ops):
                row = out[(d, o[3])]
                row[4] += b
                if b > 0:
                    row[0] += 1
                    row[1] += b
                if j == len(ops) - 1:
                    row[5] += b
                    if b > 0:
                        row[2] += 1
                        row[3] += b
        return {k: v for k, v in out.items() if any(v)}


def _model_stats(mem) -> dict:
    return {(s.device, s.name): [s.alloc_count, s.alloc_bytes, s.self_alloc_count, s.self_alloc_bytes,
                                 s.increase, s.self_increase] for s in mem.op_stats()}


def _check_all(path: Path) -> tuple:
    """Every figure the issue names, model against reference; returns both for more checks."""
    raw, tr = Raw(path), load_trace(path)
    mem = tr.memory
    assert len(mem) == len(raw.mem) > 0
    # peak per device = the file's maximum Total Allocated
    ref = raw.peaks()
    assert sorted(mem.devices) == sorted(ref)
    for d, label in enumerate(mem.devices):
        p = mem.peak(d)
        assert p.allocated == ref[label]
        # what is live there plus what was allocated before the trace is the peak
        assert p.held_before + int(mem.nbytes[p.live].sum()) == p.allocated
    # every allocation with a matching free is paired, with that free
    pairs = raw.pairs()
    fi = mem.file_index
    model_pairs = {int(fi[a]): int(fi[mem.pair[a]]) for a in mem.allocs.tolist() if mem.pair[a] >= 0}
    assert model_pairs == pairs
    # per-op counts and bytes
    assert _model_stats(mem) == raw.op_stats()
    return raw, tr, mem


def test_cpu_recording_figures(cpu_memory_trace):
    raw, tr, mem = _check_all(cpu_memory_trace)
    assert tr.n_steps == 3 and (mem.step >= 0).all()
    # calls: how many times each op ran, counted from the file (a merged duplicate is no call of
    # its own, as in key_averages() and the plugin); the recording holds some (aten::sum)
    calls = defaultdict(int)
    for ops in raw.ops.values():
        for o in ops:
            calls[o[3]] += o[2] not in raw.merged
    assert raw.merged
    assert all(s.calls == calls[s.name] for s in mem.op_stats())
    # live at the peak: the allocations made by then whose free (if any) comes later
    p = mem.peak(0)
    pairs = raw.pairs()
    order = {i: k for k, (_, i, _, _) in enumerate(raw.mem)}
    at = order[int(mem.file_index[p.at])]
    live = {i for _, i, _, a in raw.mem[:at + 1] if a["Bytes"] > 0 and (i not in pairs or order[pairs[i]] > at)}
    assert set(mem.file_index[p.live].tolist()) == live


def test_planted_leak(cpu_memory_trace):
    raw, tr, mem = Raw(cpu_memory_trace), load_trace(cpu_memory_trace), None
    mem = tr.memory
    pairs = raw.pairs()
    never = {i for _, i, _, a in raw.mem if a["Bytes"] > 0 and i not in pairs}
    assert set(mem.file_index[mem.never_freed()].tolist()) == never
    leak_bytes = LEAK_ELEMS * 4
    leaks = [(t, i, key) for t, i, key, a in raw.mem if i in never and a["Bytes"] == leak_bytes]
    assert len(leaks) == tr.n_steps  # one per step's forward
    by_file = {int(f): k for k, f in enumerate(mem.file_index.tolist())}
    steps = set()
    for t, i, key in leaks:
        k = by_file[i]
        assert mem.label(mem.op[k]) == raw.containing(key, t)[-1][3]  # its innermost op
        mods = [m for m in raw.modules[key] if m[0] <= t < m[1]]
        assert mem.module_label(k) == max(mods, key=lambda m: (m[0], -(m[1] - m[0])))[3] == "Leaky_0"
        steps.add(mem.label(mem.step[k]))
    assert len(steps) == tr.n_steps
    # the never-freed list groups them under their op and module
    groups = mem.holders(mem.never_freed(), "op,module")
    assert any(g["key"][1] == "Leaky_0" and g["bytes"] >= leak_bytes * tr.n_steps for g in groups)


def test_step_peaks(cpu_memory_trace):
    """Each step's peak is the highest Total Allocated inside the step's host interval (or the
    level carried into it), from the file."""
    raw, tr = Raw(cpu_memory_trace), load_trace(cpu_memory_trace)
    mem = tr.memory
    got = {tr.name(s): p.allocated for s, p in mem.step_peaks(0)}
    for s in tr.steps:
        w = tr.step_window(s)
        before = [a["Total Allocated"] for t, _, _, a in raw.mem if t < w.start]
        inside = [a["Total Allocated"] for t, _, _, a in raw.mem if w.start <= t < w.end]
        assert got[tr.name(s)] == max(before[-1:] + inside)


def test_hta_peer_trace(peer_dir):
    raw, tr, mem = _check_all(peer_dir / HTA_MEMORY)
    assert len(mem) == 28_010
    assert len({k for _, _, k, _ in raw.mem}) == 2  # forward and backward threads both allocate
    # the backward thread's allocations reach a module through their forward op where it has one
    assert mem.devices == ["CPU", "GPU1"]


def test_bundled_recording_figures():
    """The transformer recording the UI tests read (tests/data): backward on a second thread."""
    raw, tr, mem = _check_all(DATA / "cpu_transformer_eager_memory.json.gz")
    assert len({k for _, _, k, _ in raw.mem}) == 2 and tr.n_steps == 3


def test_no_memory_events():
    tr = load_trace(TRACES / "linear_eager.json.gz")
    mem = tr.memory
    assert len(mem) == 0 and mem.devices == [] and mem.op_stats() == []


def test_of_node_against_containment(cpu_memory_trace):
    """An op's memory (the detail pane's figures): what ran inside it on its thread, and its own
    part (the instants whose innermost op it is), from the raw JSON."""
    raw, tr = Raw(cpu_memory_trace), load_trace(cpu_memory_trace)
    mem = tr.memory
    inside, own = defaultdict(lambda: [0, 0, 0, 0]), defaultdict(lambda: [0, 0])
    for (t, _, key, a), ops in zip(raw.mem, raw.all_containing()):
        b = a["Bytes"]
        for o in ops:
            row = inside[o[2]]
            row[0 if b > 0 else 2] += 1
            row[1 if b > 0 else 3] += abs(b)
        if ops and b > 0:
            own[ops[-1][2]][0] += 1
            own[ops[-1][2]][1] += b
    t = tr.tree
    ops = np.flatnonzero((t.kind == K["op"]) & (t.ev >= 0))
    checked = 0
    for node in ops.tolist():
        fi = int(tr.store.file_index[t.ev[node]])
        got = mem.of_node(node).get("CPU")
        if fi not in inside:
            assert got is None
            continue
        want = inside[fi]
        assert [got["allocs"], got["alloc_bytes"], got["frees"], got["freed_bytes"]] == want
        assert [got["self_allocs"], got["self_alloc_bytes"]] == own.get(fi, [0, 0])
        checked += 1
    assert checked > 20


def test_epoch_ns_fractions_are_exact(tmp_path):
    """Epoch µs with ns fractions (19 digits: float64 keeps ~16) are read exactly for instants as
    for ops: an allocation 1 ns inside an op's end belongs to it, one at its end to its parent."""
    base = "1680558698123"
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": f"{base}400.000", "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": f"{base}456.789", "dur": 0.5},
    ]
    at = {"start": f"{base}456.789", "inside": f"{base}457.288", "end": f"{base}457.289"}
    for i, (what, ts) in enumerate(at.items()):
        ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                   "args": {"Addr": 100 + i, "Bytes": 8, "Total Allocated": 8 * (i + 1), "Total Reserved": 0,
                            "Device Type": 0, "Device Id": -1}})
    # numbers written as JSON numbers, not strings
    text = json.dumps({"traceEvents": ev})
    for v in list(at.values()) + [f"{base}400.000", f"{base}456.789"]:
        text = text.replace(f'"{v}"', v)
    path = tmp_path / "epoch.json"
    path.write_text(text)
    tr = load_trace(path)
    mem = tr.memory
    got = [mem.label(mem.op[k]) for k in range(len(mem))]
    assert got == ["inner", "inner", "outer"]
    assert mem.ts.tolist() == [int(Decimal(v) * 1000) for v in at.values()]
