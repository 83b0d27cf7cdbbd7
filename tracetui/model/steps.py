"""Which events mark training steps: a rule table, tried in order, so steps exist without ``prof.step()``.

A step is a time window of the whole process (see ``windows.py``); this module only decides which
host events open and close those windows. It runs between indexing and linking, and marks the
chosen events with the ``step`` kind so the tree keeps them on top of their thread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracetui.read.events import K, EventStore

PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
"""torch.profiler's own marker, written by ``prof.step()``; first choice whenever it is there."""

NUMBERED = re.compile(r"^(?P<prefix>.*?(?<!\d))(?P<n>\d+)$")
"""A ``record_function`` name that ends in a number: ``train_step_3``, ``step 3``, ``iteration#5``.
The prefix never ends in a digit, so the number is tried only where a digit run starts: linear in
the name (a bare ``.*?`` retried the digits from every position: 100k digits + ``x`` hung)."""

STEP_WORDS = re.compile(r"(?i)(step|iter|batch)")
"""Auto-detection only trusts numbered annotations that say they are steps: numbered names are
common for other things (``Torch-Compiled Region: 0/1``, ``bucket 3``, ``layer_7``)."""

MIN_REPEATS = 2
"""A marker must occur at least this often to be taken for a step without being named."""


@dataclass(frozen=True)
class StepChoice:
    """What was taken as a step, and why (the status line and ``summary`` say it)."""
    rule: str          # "ProfilerStep", "numbered annotation", "--steps", "none"
    description: str
    count: int
    short: str = ""    # for the status line: "ProfilerStep", "train_step_N", "/REGEX/"


def _overlaps(ts: np.ndarray, end: np.ndarray) -> bool:
    o = np.argsort(ts, kind="stable")
    return bool((ts[o][1:] < end[o][:-1]).any())


def _numbered_candidates(store: EventStore, ann: np.ndarray) -> list[tuple]:
    """(score, prefix, events) for every numbered, step-like annotation family on one thread."""
    fam: dict[str, list[int]] = {}
    names = store.names
    for nid in np.unique(store.name_id[ann]).tolist():
        m = NUMBERED.match(names[nid])
        if not m or not STEP_WORDS.search(m["prefix"]):
            continue
        fam.setdefault(m["prefix"], []).append(nid)
    out = []
    for prefix, nids in fam.items():
        ev = ann[np.isin(store.name_id[ann], nids)]
        for tr in np.unique(store.track[ev]).tolist():
            mine = ev[store.track[ev] == tr]
            ts, end = store.ts[mine], store.ts[mine] + store.dur[mine]
            if mine.size < MIN_REPEATS or _overlaps(ts, end):
                continue  # a step marker repeats and never overlaps itself
            out.append((int(mine.size), int((end - ts).sum()), prefix, mine))
    out.sort(key=lambda c: (-c[0], -c[1], c[2]))
    return out


def choose_steps(store: EventStore, pattern: str | None = None) -> StepChoice:
    """Pick the step markers and give them the ``step`` kind in ``store`` (in place).

    Order: ``pattern`` (a regex the user named, searched in annotation names) when given; else
    ``ProfilerStep#N``; else the most frequent numbered, step-like ``record_function`` family on one
    thread that never overlaps itself. Raises ``ValueError`` for a regex that does not compile.
    """
    kind = store.kind
    marked = np.nonzero(kind == K["step"])[0]
    if pattern is not None:
        rx = re.compile(pattern)
        kind[marked] = K["annotation"]
        ann = np.nonzero(kind == K["annotation"])[0]
        hit_names = np.array([bool(rx.search(n)) for n in store.names], dtype=bool)
        hits = ann[hit_names[store.name_id[ann]]] if ann.size else ann
        kind[hits] = K["step"]
        none = "" if hits.size else ": none matched, so no steps (it matches user annotations' names)"
        return StepChoice("--steps", f"annotations matching /{pattern}/ (--steps){none}", int(hits.size), f"/{pattern}/")
    if marked.size:
        return StepChoice("ProfilerStep", "ProfilerStep#N (torch.profiler's prof.step())", int(marked.size),
                          "ProfilerStep")
    ann = np.nonzero(kind == K["annotation"])[0]
    cands = _numbered_candidates(store, ann) if ann.size else []
    if not cands:
        return StepChoice("none", "no step markers (no ProfilerStep#N, no numbered step annotation)", 0, "none")
    count, _, prefix, events = cands[0]
    kind[events] = K["step"]
    return StepChoice("numbered annotation", f"record_function '{prefix}N' (detected, {count} found)", count,
                      f"{prefix}N")
