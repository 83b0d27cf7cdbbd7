"""The CPU side of a diff: op counts per step that changed, and host events whose CPU self time
per step changed (dispatch, the compile pre-ops torch.compile adds)."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from tracetui.read.events import K
from tracetui.model.trace import Trace

COMPILE_PREOPS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode",
                  "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph", "CompiledFunction")
"""CPU-side events torch.compile adds around a compiled region (the 'compile pays pre-ops' story)."""

def _of_kinds(kind: np.ndarray, kinds: tuple) -> np.ndarray:
    """``kind`` in ``kinds``, by a lookup table (np.isin sorts the whole column: 270k nodes)."""
    table = np.zeros(max(int(kind.max(initial=0)), *kinds) + 1, dtype=bool)
    table[list(kinds)] = True
    return table[kind]


def _op_counts(t: Trace) -> tuple[Counter, Counter]:
    """Per-step count and CPU time of every op/annotation name (steps themselves excluded)."""
    steps = max(len(t.steps), 1)
    tree = t.tree
    sel = np.nonzero(_of_kinds(tree.kind, (K["op"], K["annotation"])) & (t.roll.step_of >= 0 if t.steps else True))[0]
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
    sel = np.nonzero(_of_kinds(tree.kind, (K["op"], K["annotation"], K["runtime"])) &
                     ((t.roll.step_of >= 0) if t.steps else True))[0]
    ids, inv = np.unique(tree.name_id[sel], return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=t.roll.cpu_self[sel], minlength=ids.size)
    out = Counter()
    for i, v in zip(ids.tolist(), tot.tolist()):
        out[_norm_op(tree.names[i])] += v / steps
    t._diff_self = out
    return out


SMALL_CPU_NS = 1000
"""Host event names whose self time per step moved less than this (1 µs) share one row."""
SMALL_CPU_ROW = "other host events (each changed < 1 µs per step)"


def cpu_self_total_us(t: Trace) -> float:
    """CPU self time per step summed over every host event name (what the rows of ``_cpu_changes``
    add up to the difference of): µs."""
    return sum(_self_per_step(t).values()) / 1e3


def _cpu_changes(a: Trace, b: Trace) -> list[dict]:
    """Host events whose CPU self time per step changed, biggest first; the names that moved less
    than ``SMALL_CPU_NS`` each share a last row, so the rows add up to the change of the total."""
    sa, sb = _self_per_step(a), _self_per_step(b)
    out = []
    small = {"a": 0.0, "b": 0.0, "n": 0}
    for name in sorted(set(sa) | set(sb)):  # a set's order changes with the process's string hashing
        d = sb.get(name, 0.0) - sa.get(name, 0.0)
        if abs(d) >= SMALL_CPU_NS:
            out.append({"name": name, "a_self_us": sa.get(name, 0.0) / 1e3, "b_self_us": sb.get(name, 0.0) / 1e3,
                        "delta_us": d / 1e3, "compile_preop": any(name.startswith(p) for p in COMPILE_PREOPS)})
        elif d:
            small["a"] += sa.get(name, 0.0)
            small["b"] += sb.get(name, 0.0)
            small["n"] += 1
    out.sort(key=lambda d: (-abs(d["delta_us"]), d["name"]))  # ties: by name, the same every run
    if small["n"]:
        out.append({"name": f"{SMALL_CPU_ROW}: {small['n']}", "a_self_us": small["a"] / 1e3,
                    "b_self_us": small["b"] / 1e3, "delta_us": (small["b"] - small["a"]) / 1e3,
                    "compile_preop": False})
    return out

