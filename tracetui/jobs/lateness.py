"""Why a rank arrives late: the straggler verdict split into start skew and work imbalance.

A rank reaches its step's collectives late either because it began the step's work late (a
data-loader stall, a sleep, a host hiccup before the step) or because it worked longer in the
step (more compute than the others). Per step, matched across ranks by its name (ProfilerStep#N):

1. each rank's start of work (``steps.work_start_ns``: its first CPU op in the step) on the
   aligned clock (the rank's clock offset subtracted);
2. its **start skew**: that start minus the earliest rank's;
3. its **work imbalance**: its compute time in the step (``steps.work_ns``) minus the least of
   any rank's;
4. per rank, the mean of each over its steps; the straggler's larger one is the verdict's cause.

Ranks without the figure for a step (no op in it) are left out of that step's comparison.
"""
from __future__ import annotations

CAUSES = (
    ("start skew", "the rank began the step's work later than the others (mean start skew the larger)"),
    ("work imbalance", "the rank computed longer in the step than the quickest rank (mean work imbalance the larger)"),
)
"""The straggler's cause, by which of its two mean figures is larger, and what each means."""


def per_step(steps: dict, offset: dict) -> dict:
    """(rank, step name) -> (start skew ns, work imbalance ns); either None where unknown."""
    n = len(steps.get("rank", []))
    start = {}
    work = {}
    for j in range(n):
        r, name = steps["rank"][j], steps["name"][j]
        ws = steps.get("work_start_ns", [-1] * n)[j]
        if ws is not None and ws >= 0:
            start[(r, name)] = ws - offset.get(r, 0)
        w = steps.get("work_ns", [-1] * n)[j]
        if w is not None and w >= 0:
            work[(r, name)] = w
    first: dict = {}
    least: dict = {}
    for (r, name), s in start.items():
        first[name] = min(first.get(name, s), s)
    for (r, name), w in work.items():
        least[name] = min(least.get(name, w), w)
    out = {}
    for j in range(n):
        k = (steps["rank"][j], steps["name"][j])
        out[k] = (start[k] - first[k[1]] if k in start else None, work[k] - least[k[1]] if k in work else None)
    return out


def per_rank(split: dict, ranks: list) -> dict:
    """rank -> (mean start skew ns, mean work imbalance ns) over its steps (None: no step had it)."""
    out = {}
    for r in ranks:
        sk = [v[0] for k, v in split.items() if k[0] == r and v[0] is not None]
        wi = [v[1] for k, v in split.items() if k[0] == r and v[1] is not None]
        out[r] = (sum(sk) / len(sk) if sk else None, sum(wi) / len(wi) if wi else None)
    return out


def cause(skew_ns, imbalance_ns) -> str | None:
    """``CAUSES``' name for a rank's two means (None when neither is known or both are 0)."""
    a, b = skew_ns or 0, imbalance_ns or 0
    if a <= 0 and b <= 0:
        return None
    return CAUSES[0][0] if a >= b else CAUSES[1][0]
