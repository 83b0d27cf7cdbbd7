"""Skipping JSON's blanks (space, tab, CR, LF) backwards, at C speed.

A document can hold any amount of blanks between two tokens: ``{"traceEvents":[`` then 64 MiB of
spaces then ``]}`` took 8 s when they were stepped over one byte at a time in Python (a 1 MB gzip
of 1 GiB, 108 s). Here each step strips a chunk with ``bytes.rstrip``, the chunks doubling.
"""
from __future__ import annotations

BLANKS = b" \t\r\n"
FIRST_CHUNK = 64
"""Bytes looked at first: blanks between tokens are usually a few."""


def last_non_blank(buf, lo: int, hi: int) -> int:
    """The index of the last byte of ``buf[lo:hi]`` that is not a blank, or ``lo - 1`` when all
    are. ``buf``: bytes, bytearray or memoryview (only a chunk at a time is copied)."""
    size = FIRST_CHUNK
    while hi > lo:
        start = max(lo, hi - size)
        kept = len(bytes(buf[start:hi]).rstrip(BLANKS))
        if kept:
            return start + kept - 1
        hi, size = start, size * 2
    return lo - 1
