"""Clock offsets between the ranks of a job, estimated only where clocks can differ.

Ranks of one host share its clock (``host_name``; Kineto adds ``baseTimeNanoseconds`` to the
host's one clock), so their offset is 0 and nothing is estimated between them: an estimate there
only measures when each rank's collective ended (-1.67 µs between two ranks of one host). A rank
whose host is not recorded is its own clock. Each rank's alignment uncertainty (``spread``) is the
interquartile range of its own end differences to the reference rank's. Across clocks, each clock's offset to the reference
(lowest) rank's is the lower median, over the matched collectives and the clock's ranks, of
(end on that rank - end on the reference rank): collectives end together. ``each_rank`` (the
user asks: ``ranks --rank-clocks``) gives every rank its own clock.
"""
from __future__ import annotations

from dataclasses import dataclass

from tracetui.jobs.matching import Matched

RUN_APART_NS = 10 * 10**9
"""A rank whose matched collectives end this far from the reference rank's (median) is named in a
diagnostic: synchronised hosts differ by milliseconds, ranks of one host by nothing, so such a
gap says the files come from two runs (a log folder keeps every run's files)."""


@dataclass
class Clocks:
    """Per rank: its clock's name, the offset applied (ns), how many differences it rests on,
    its own estimate where one was made (None on the reference's clock), and the spread of its
    end differences (``spread``; None on the reference rank)."""
    ref: int
    clock: dict
    offset: dict
    offset_n: dict
    own: dict
    spread: dict


def spread(values: list[int]) -> int | None:
    """The interquartile range of a rank's collective-end differences (ns; lower quartiles, so
    exact): how far from one another its collectives' ends fall around the offset. None with
    fewer than two differences (nothing to spread)."""
    if len(values) < 2:
        return None
    v = sorted(values)
    n = len(v) - 1
    return int(v[(3 * n) // 4] - v[n // 4])


def median_low(values: list[int]) -> int:
    """The lower median (an element, so exact in ns; DuckDB's ``quantile_disc(x, 0.5)``)."""
    v = sorted(values)
    return int(v[(len(v) - 1) // 2])


def _end_differences(m: Matched, ranks: list, ref: int) -> dict:
    """Per rank, (end on it - end on ``ref``) for every collective both hold."""
    ref_end = {k: int(m.end[i]) for k, rows in m.by_key.items() for i in rows if m.coll["rank"][i] == ref}
    diffs: dict = {r: [] for r in ranks}
    for k, rows in m.by_key.items():
        if k in ref_end:
            for i in rows:
                diffs[m.coll["rank"][i]].append(int(m.end[i]) - ref_end[k])
    return diffs


def estimate(info: dict, m: Matched, ranks: list, diags: list[str], unsure: list[str],
             each_rank: bool = False) -> Clocks:
    """Each rank's clock and offset (module docstring). A rank ``RUN_APART_NS`` from the reference
    is said, and added to ``unsure`` (its matches cannot name a straggler)."""
    ref = ranks[0] if ranks else 0
    clock = {r: (h if h and not each_rank else f"rank {r}") for r, h in zip(info["rank"], info["host"])}
    diffs = _end_differences(m, ranks, ref)
    est = {r: (median_low(diffs[r]) if diffs[r] else None) for r in ranks}
    for r in ranks:
        if est[r] is not None and abs(est[r]) > RUN_APART_NS:
            unsure.append(f"rank {r}'s collectives end {est[r] / 1e9:+,.1f} s from rank {ref}'s (another run?)")
            diags.append(f"rank {r}: its collectives end {est[r] / 1e9:+,.1f} s from rank {ref}'s (median); "
                         f"clocks are rarely that far apart: is it from another run?")
    per_clock: dict = {}
    for r in ranks:
        per_clock.setdefault(clock[r], []).extend(diffs[r])
    ref_clock = clock.get(ref, "")
    off = {c: (median_low(d) if d and c != ref_clock else 0) for c, d in per_clock.items()}
    for c, d in per_clock.items():
        if not d and c != ref_clock and m.by_key:
            diags.append(f"{c} shares no collective with rank {ref}: its clock is left as recorded")
    return Clocks(ref=ref, clock=clock, offset={r: off[clock[r]] for r in ranks},
                  offset_n={r: (len(per_clock[clock[r]]) if clock[r] != ref_clock else 0) for r in ranks},
                  own={r: (est[r] if clock[r] != ref_clock else None) for r in ranks},
                  spread={r: (spread(diffs[r]) if r != ref else None) for r in ranks})
