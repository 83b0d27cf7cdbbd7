"""Monotone sequence alignment by dynamic programming (Needleman-Wunsch with per-item gap costs).

Pure numpy: each row of the DP is a handful of vector operations (the left-gap recurrence is a
running minimum over cumulative gap costs), so aligning 2,000 x 2,000 kernels takes tens of
milliseconds instead of seconds of Python loops.
"""
from __future__ import annotations

import numpy as np

FORBIDDEN = 1e6
"""Cost of a pairing that must never happen (a GEMM with a pointwise kernel): large, not inf, so
sums stay finite; any path through it costs more than leaving both sides unpaired."""

MAX_CELLS = 40_000_000
"""Above this many cells (n x m) the caller splits the problem (the traceback keeps two bool
matrices of that size: 80 MB)."""


def align(cost: np.ndarray, gap_a: np.ndarray, gap_b: np.ndarray) -> list[tuple[int | None, int | None]]:
    """The cheapest monotone alignment of A (rows of ``cost``) with B (columns).

    ``cost[i, j]`` is the price of pairing A[i] with B[j]; ``gap_a[i]`` / ``gap_b[j]`` the price of
    leaving A[i] / B[j] unpaired. Returns (i, j) pairs in order; an unpaired item has None on the
    other side. Pairings at ``FORBIDDEN`` or above are never returned.
    """
    n, m = cost.shape
    gap_a = np.asarray(gap_a, dtype=np.float64)
    gap_b = np.asarray(gap_b, dtype=np.float64)
    if n == 0 or m == 0:
        return [(i, None) for i in range(n)] + [(None, j) for j in range(m)]
    gb = np.r_[0.0, np.cumsum(gap_b)]              # cost of leaving B[:j] unpaired
    prev = gb.copy()
    from_diag = np.zeros((n, m + 1), dtype=bool)   # cell (i+1, j) came down-diagonally
    from_left = np.zeros((n, m + 1), dtype=bool)   # cell (i+1, j) came from the left
    for i in range(n):
        e = np.empty(m + 1)
        e[0] = prev[0] + gap_a[i]
        up = prev[1:] + gap_a[i]
        diag = prev[:-1] + cost[i]
        d = diag < up
        e[1:] = np.where(d, diag, up)
        from_diag[i, 1:] = d
        run = np.minimum.accumulate(e - gb) + gb
        from_left[i] = run < e - 1e-9
        prev = run
    out: list[tuple[int | None, int | None]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i == 0:
            out.append((None, j - 1))
            j -= 1
        elif j > 0 and from_left[i - 1, j]:
            out.append((None, j - 1))
            j -= 1
        elif j > 0 and from_diag[i - 1, j]:
            if cost[i - 1, j - 1] >= FORBIDDEN:  # only reachable when everything else is worse
                out.append((i - 1, None))
                out.append((None, j - 1))
            else:
                out.append((i - 1, j - 1))
            i -= 1
            j -= 1
        else:
            out.append((i - 1, None))
            i -= 1
    return out[::-1]


def assign_monotone(match: np.ndarray, tie: np.ndarray | None = None) -> list[int]:
    """Give each A item (row) to at most one B item (column) it ``match``es, columns never going
    backwards as rows advance, claiming as many rows as possible (``tie`` breaks equal choices:
    lower is preferred). Returns, per row, the column or -1.

    This is how the kernels of a gap are shared among the fused kernels that can replace them:
    Inductor keeps the program order of the nodes it fuses, so kernel k+1's ops follow kernel k's.
    """
    n, m = match.shape
    if n == 0 or m == 0:
        return [-1] * n
    tie = np.zeros((n, m)) if tie is None else tie
    step = np.where(match, tie, FORBIDDEN)          # claiming row i for column j
    # f[i, j]: best cost of rows [0, i) with the last claiming column <= j; skipping a row costs 1
    f = np.zeros((n + 1, m))
    for i in range(n):
        skip = f[i] + 1.0
        claim = f[i] + step[i]
        best = np.minimum(skip, claim)
        # columns are monotone: f[i+1, j] may also come from a smaller column (running minimum)
        f[i + 1] = np.minimum.accumulate(best)
    out = [-1] * n
    j = m - 1
    for i in range(n - 1, -1, -1):
        target = f[i + 1, j]
        for jj in range(j, -1, -1):  # the column bound this row's best came through
            via = f[i, jj] + min(1.0, step[i, jj])
            if via <= target + 1e-12:
                if step[i, jj] < 1.0:
                    out[i] = jj
                j = jj
                break
    return out
