"""Which events mark training steps: a rule table, tried in order, so steps exist without ``prof.step()``.

A step is a time window of the whole process (see ``windows.py``); this module only decides which
host events open and close those windows. It runs between indexing and linking, and marks the
chosen events with the ``step`` kind so the tree keeps them on top of their thread.
"""
from __future__ import annotations

import shlex

import re
from dataclasses import dataclass

import numpy as np

from tracetui.read.events import K, EventStore
from tracetui.model.serving import ENGINE_RULES

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
    rule: str          # a ``STEP_RULES`` name, "--steps" or "none"
    description: str
    count: int
    short: str = ""    # for the status line: "ProfilerStep", "train_step_N", "/REGEX/"
    hint: str = ""     # with no steps: the likeliest step-like annotations and the --steps to use them
    reason: str = ""   # why the rule reads these annotations as steps (the engine rule's source)


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


def _outermost(store: EventStore, ev: np.ndarray) -> np.ndarray:
    """``ev`` less every event that starts inside an earlier one on its thread (one marker per step)."""
    keep = []
    for tr in np.unique(store.track[ev]).tolist():
        mine = ev[store.track[ev] == tr]
        mine = mine[np.argsort(store.ts[mine], kind="stable")]
        end = store.ts[mine] + store.dur[mine]
        prev_end = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end)[:-1]]
        keep.append(mine[store.ts[mine] >= prev_end])
    return np.sort(np.concatenate(keep)) if keep else ev


def _engine_steps(store: EventStore, ann: np.ndarray) -> StepChoice | None:
    """The first serving engine whose step annotations (``serving.ENGINE_RULES``) the trace holds."""
    if not ann.size:
        return None
    names = store.names
    nids = np.unique(store.name_id[ann]).tolist()
    for rule in ENGINE_RULES:
        if not any(rule.rx.match(names[n]) for n in nids):
            continue
        # every form of that engine counts (vLLM writes execute_…_context_… and execute_new_…_cached_…)
        hit = [n for n in nids if any(r.rx.match(names[n]) for r in ENGINE_RULES if r.engine == rule.engine)]
        ev = _outermost(store, ann[np.isin(store.name_id[ann], hit)])
        store.kind[ev] = K["step"]
        return StepChoice("engine annotation", f"{rule.engine} step annotations {rule.form} (detected, {ev.size} found)",
                          int(ev.size), f"{rule.engine} {rule.form}", reason=rule.reason)
    return None


def _profiler_steps(store: EventStore, ann: np.ndarray) -> StepChoice | None:
    """``ProfilerStep#N``: the reader gave them the ``step`` kind already."""
    n = int((store.kind == K["step"]).sum())
    return StepChoice("ProfilerStep", "ProfilerStep#N (torch.profiler's prof.step())", n, "ProfilerStep") if n else None


def _numbered_steps(store: EventStore, ann: np.ndarray) -> StepChoice | None:
    """The most frequent numbered, step-like annotation family on one thread."""
    cands = _numbered_candidates(store, ann) if ann.size else []
    if not cands:
        return None
    count, _, prefix, events = cands[0]
    store.kind[events] = K["step"]
    return StepChoice("numbered annotation", f"record_function '{prefix}N' (detected, {count} found)", count,
                      f"{prefix}N")


STEP_RULES = (
    ("ProfilerStep", _profiler_steps,
     "torch.profiler's own marker, written by prof.step(): the user said where steps are"),
    ("engine annotation", _engine_steps,
     "serving engines (SGLang, vLLM, ATOM) mark each forward pass themselves and never call prof.step(); "
     "their annotation also says prefill or decode (serving.ENGINE_RULES)"),
    ("numbered annotation", _numbered_steps,
     "a training loop's record_function('train_step_3'): numbered, step-like, repeated, never overlapping "
     "itself on its thread"),
)
"""How steps are found when ``--steps`` is not given: (name, finder, reason), tried in order; the
first finder that returns a choice wins."""


def choose_steps(store: EventStore, pattern: str | None = None) -> StepChoice:
    """Pick the step markers and give them the ``step`` kind in ``store`` (in place).

    ``pattern`` (a regex the user named, searched in annotation names) when given; else the first
    of ``STEP_RULES`` that finds steps; else none, with a hint (``step_hint``). Raises
    ``ValueError`` for a regex that does not compile.
    """
    kind = store.kind
    if pattern is not None:
        return _named_steps(store, pattern)
    ann = np.nonzero(kind == K["annotation"])[0]
    for _, find, _ in STEP_RULES:
        choice = find(store, ann)
        if choice is not None:
            return choice
    return StepChoice("none", "no step markers (no ProfilerStep#N, no engine or numbered step annotation)", 0,
                      "none", hint=step_hint(store, ann))


def _named_steps(store: EventStore, pattern: str) -> StepChoice:
    """``--steps REGEX``: every annotation whose name the regex finds (ProfilerSteps included)."""
    kind = store.kind
    rx = re.compile(pattern)
    kind[kind == K["step"]] = K["annotation"]
    ann = np.nonzero(kind == K["annotation"])[0]
    hit_names = np.array([bool(rx.search(n)) for n in store.names], dtype=bool)
    hits = ann[hit_names[store.name_id[ann]]] if ann.size else ann
    kind[hits] = K["step"]
    none = "" if hits.size else ": none matched, so no steps (it matches user annotations' names)"
    return StepChoice("--steps", f"annotations matching /{pattern}/ (--steps){none}", int(hits.size), f"/{pattern}/",
                      hint="" if hits.size else step_hint(store, ann))


NOT_STEPS = (
    ("Torch-Compiled Region", "Dynamo's wrapper around each compiled frame: several per step"),
    ("TorchDynamo Cache Lookup", "a guard check before each compiled frame"),
    ("## Call CompiledFxGraph", "one Inductor graph call, many per step"),
    ("Pregraph bytecode", "Dynamo's pre-graph bytecode, per compiled frame"),
    ("AOTDispatcher", "AOTAutograd's runtime wrappers, per compiled frame"),
    ("CompiledFunction", "autograd's node for a compiled graph, per compiled frame"),
)
"""Annotation names (prefixes) torch writes itself; never proposed as step markers."""

HINTS = 3
"""The hint names at most this many candidates."""


def _hint_families(store: EventStore, ann: np.ndarray) -> dict[str, list[int]]:
    """--steps regex -> name ids: each name alone, and names that differ only by a trailing number."""
    fam: dict[str, list[int]] = {}
    names = store.names
    for nid in np.unique(store.name_id[ann]).tolist():
        name = names[nid]
        if not name.strip() or name.startswith(tuple(p for p, _ in NOT_STEPS)):
            continue
        stem = name.rstrip("0123456789")  # not a regex: linear on any name
        key = f"^{re.escape(stem)}\\d+$" if stem != name and stem else f"^{re.escape(name)}$"
        fam.setdefault(key, []).append(nid)
    return fam


def step_hint(store: EventStore, ann: np.ndarray) -> str:
    """With no step markers: the likeliest step-like annotations (repeated, never overlapping
    themselves on one thread), with their counts and the ``--steps`` that would take them."""
    if not ann.size:
        return "no user annotations (record_function) to take for steps; GPU-only activity has no host steps"
    out = []
    for key, nids in _hint_families(store, ann).items():
        ev = ann[np.isin(store.name_id[ann], nids)]
        best = None
        for tr in np.unique(store.track[ev]).tolist():
            mine = ev[store.track[ev] == tr]
            if mine.size >= MIN_REPEATS and not _overlaps(store.ts[mine], store.ts[mine] + store.dur[mine]):
                cand = (int(mine.size), int(store.dur[mine].sum()))
                best = max(best or cand, cand)
        if best:
            out.append((-best[0], -best[1], key))
    if not out:
        return "no user annotation repeats without overlapping itself; --steps REGEX names the one that marks a step"
    out.sort()
    return "; ".join(f"try --steps {shlex.quote(key)} ({-n} annotations)" for n, _, key in out[:HINTS])
