"""Steps stay the top level of their thread, and other threads' work shows under its step.

Two stages of the tree's links (tree.link_tree), after the host events nest on their threads:
``steps_on_top`` lifts the frames that span a step's start beside the steps and moves what they
held under the step it starts in; ``step_thread_groups`` finds, for each step, the other
threads' top-level events that start inside it (display only: they go under a group node below
the step). Both read each thread's events as its slice of the nesting order (``tree._Order``:
sorted by start), in a few whole-slice passes: a step thread of a GB trace holds ~10^6 events,
and these stages sit on the load's critical path.
"""
from __future__ import annotations

import numpy as np

from tracetui.model.claims import reach
from tracetui.read.events import K, EventStore


def steps_on_top(links, steps: np.ndarray) -> None:
    """Frames that span a step's start are shown beside the steps (under the thread), so steps
    stay the top level; what they held that lies inside a step moves under that step. Each
    step thread's events are its slice of the nesting order (sorted by start, gathered once),
    read in place: a few whole-slice passes (a step thread of a GB trace holds ~10^6 events).
    ``steps``: the step-kind events."""
    store, parent_e, base, nested = links.store, links.parent, links.base, links.nested
    kind_e, ts, dur = store.kind, store.ts, links.dur
    for t in set(store.track[steps].tolist()):
        st = steps[store.track[steps] == t]
        st = st[np.argsort(ts[st])]
        s_start, s_end = ts[st], ts[st] + dur[st]
        on = nested.on(t)
        ev, e_start, e_end = nested.events[on], nested.ts[on], nested.end[on]
        spanning = ev[spans_a_step_start(s_start, s_end, e_start, e_end)]
        spanning = spanning[kind_e[spanning] != K["step"]]  # a step is no frame around the others
        links.diag["steps_spanned_by_events"] += int(spanning.size)
        tn = links.thread_node[t]
        parent_e[spanning] = tn
        parent_e[st] = tn
        if spanning.size:  # what they held moves under the step it starts in
            is_span = np.zeros(base + len(store), dtype=bool)
            is_span[spanning + base] = True
            held = np.flatnonzero(is_span[parent_e[ev]])  # spanning events and steps now hang from tn
            kids, k_start = ev[held], e_start[held]
            k = np.searchsorted(s_start, k_start, side="right") - 1
            inside = (k >= 0) & (k_start < s_end[np.maximum(k, 0)])
            parent_e[kids[inside]] = st[k[inside]] + base


def spans_a_step_start(s_start: np.ndarray, s_end: np.ndarray, e_start: np.ndarray, e_end: np.ndarray) -> np.ndarray:
    """Which events span a step's start: a step starts inside them, or one starts with them and
    ends first (steps sorted by start)."""
    i_next = np.searchsorted(s_start, e_start, side="right")  # the first step starting after each
    later = np.r_[s_start, np.iinfo(np.int64).max]  # one past the last step: no step starts there
    spans = later[i_next] < e_end
    earlier = np.r_[s_start[0] - 1 if s_start.size else 0, s_start]  # the last step at or before
    same = np.flatnonzero(earlier[i_next] == e_start)  # a step starts with the event: the first such
    if same.size:
        first = np.searchsorted(s_start, e_start[same], side="left")
        spans[same[e_end[same] > s_end[first]]] = True
    return spans


def step_thread_groups(store: EventStore, nested, parent_e: np.ndarray, thread_node: dict,
                       steps: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(step event, other thread's track, its top-level events starting in the step's interval).

    Display only: those events move under a group node below the step, so drilling from a step
    reaches its backward and optimizer work; their containment parents (and so every CPU self
    time) stay on their own thread, as in torch's tree. A thread's events are its slice of the
    nesting order (``nested``), in start order. The threads a step reaches: its process's, and
    those of the processes its markers claim (claims.py), as its window does. ``steps``: the
    step-kind events.
    """
    if not steps.size:
        return []
    reaches = _reach(store, nested, steps, thread_node)
    step_tracks = dict.fromkeys(store.track[steps].tolist())
    out = []
    for st_track in step_tracks:
        st = steps[store.track[steps] == st_track]
        st = st[np.argsort(store.ts[st], kind="stable")]
        s0, s1 = store.ts[st], store.ts[st] + store.dur[st]
        for t2, tnode in thread_node.items():
            if t2 == st_track or t2 not in reaches[st_track]:
                continue
            on = nested.on(t2)
            if t2 in step_tracks:  # steps_on_top moved some of its events
                ev, e_start = nested.events[on], nested.ts[on]
                top = parent_e[ev] == tnode
            else:  # untouched since the nesting: its top is the nesting's (a few of a thread's events)
                at = on.start + np.flatnonzero(nested.top[on])
                ev, e_start = nested.events[at], nested.ts[at]
                top = np.ones(ev.size, dtype=bool)
            # a step stays on its own thread: moved under another thread's step, two steps
            # with the same interval would each hold the other (a parent cycle)
            top &= store.kind[ev] != K["step"]
            ev, e_start = ev[top], e_start[top]
            k = np.searchsorted(s0, e_start, side="right") - 1
            inside = (k >= 0) & (e_start < s1[np.maximum(k, 0)])
            ev, k = ev[inside], k[inside]
            # in nesting order the starts ascend, so each step's events are one run of k (a
            # comparison of every event per step took ~20 ms on the 1 GB trace's 438 steps)
            cut = np.flatnonzero(k[1:] != k[:-1]) + 1
            for kk, group in zip(k[np.r_[0, cut]].tolist() if k.size else [], np.split(ev, cut)):
                out.append((int(st[kk]), t2, group))
    out.sort(key=lambda g: (int(store.ts[g[0]]), g[1]))
    return out


def _reach(store: EventStore, nested, steps: np.ndarray, thread_node: dict) -> dict[int, set]:
    """Step track -> the host tracks its steps reach (claims.reach)."""
    n = len(store.track_keys)
    # the nesting order is sorted by track: each track's count is where its slice ends (a
    # bincount of 2.5M host events took ~13 ms)
    host = np.diff(np.searchsorted(nested.track, np.arange(n + 1, dtype=nested.track.dtype)))
    marks = np.bincount(store.track[steps], minlength=n)
    return reach({t: store.track_keys[t][0] for t in thread_node}, {t: int(host[t]) for t in thread_node},
                 {t: int(marks[t]) for t in thread_node})
