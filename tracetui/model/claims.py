"""Which processes a step marker's steps reach: its own, and where the marker is alone on its
process, every process with no step markers of its own (``CLAIMS``). The step windows
(windows.py) and the display tree's step groups (tree.py) both ask here, so a step's figures
and what drilling from it shows are the same work."""
from __future__ import annotations

import numpy as np

CLAIMS = ("a step marker alone on its process (no other host work there) marks the work of processes "
          "with no step markers of their own: the marker was recorded under another pid than its work, and "
          "a process with markers of its own keeps its work; with two such lone processes, which one's work "
          "it is cannot be told, so neither claims any")
"""The rule, as data (hta/triton_example records ProfilerStep#1 alone on one pid, its work on another)."""


def claimed(marks: np.ndarray, host: np.ndarray) -> dict[int, np.ndarray]:
    """Process code -> the process codes its step markers also claim, from each process's count
    of step markers (``marks``) and of host events, the markers among them (``host``): for a
    process whose only host work is step markers, every process with host work and no markers,
    when it is the only such process (two would both take the same work: a review found the
    tree's groups and the windows counting it twice); none for the others."""
    lone = np.nonzero((marks > 0) & (host == marks))[0]
    unmarked = np.nonzero((marks == 0) & (host > 0))[0]
    if lone.size != 1 or not unmarked.size:
        return {}
    return {int(lone[0]): unmarked}


def reach(pid_of: dict, host: dict, marks: dict) -> dict[int, set]:
    """Track with step markers -> the tracks its steps reach: its own process's, and every track
    of the processes its process claims (``claimed``). ``pid_of``, ``host``, ``marks``: each
    host track's process, host events and step markers."""
    pids = list(dict.fromkeys(pid_of.values()))
    code = {p: i for i, p in enumerate(pids)}
    per_pid = np.zeros((2, len(pids)), dtype=np.int64)
    tracks_of: dict = {}
    for t, p in pid_of.items():
        per_pid[:, code[p]] += (host[t], marks[t])
        tracks_of.setdefault(p, set()).add(t)
    claims = claimed(per_pid[1], per_pid[0])
    out = {}
    for t, p in pid_of.items():
        if marks[t]:
            out[t] = tracks_of[p].union(*(tracks_of[pids[c]] for c in claims.get(code[p], ())))
    return out
