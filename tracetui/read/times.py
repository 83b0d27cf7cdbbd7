"""Event times (``ts``/``dur``, µs as written) -> exact int64 nanoseconds.

float64 keeps ~16 significant digits; an epoch timestamp with a ns fraction
(``1712195496004644.183``) has 19. Below ``EXACT_BELOW_US`` the decoded float is close enough
that it gives the written value to the ns, so the common trace (relative times, or Kineto's
~5e12 µs) stays one numpy pass. At or above it, a value written as a JSON integer (msgspec
decodes it as a Python int, exact) is multiplied in int64; one written with a fraction or an
exponent is read from its digits: decoded as text in the first place where the file's head
shows such times (``load.text_times``), else read again (``reread``, a second decode).
"""
from __future__ import annotations

import re
from itertools import compress, repeat
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Callable

import numpy as np

EXACT_BELOW_US = float(1 << 43)
"""|x| below 2^43 µs (~102 days): the float is within half an ulp (<= 2^-11 µs, 0.49 ns) of the
written value, so whole µs (floor, exact) * 1000 + rint(fraction * 1000) is the written value
to the ns when it has <= 3 decimals, as Kineto writes them (further digits round via the float).
Below 2^42 plain rint(x * 1000) already is (error <= 0.24 + 0.25 ns) and costs less."""

PLAIN_BELOW_US = float(1 << 42)

MAX_US = (2 ** 63 - 1) // 1000
"""The largest |time| in µs whose ns fit int64 (~292 years): beyond it a time is out of range."""

OK, MISSING, OUT_OF_RANGE = 0, 1, 2
"""State of each converted time."""


_JSON_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
"""A JSON number (ASCII only; "12." too): Decimal alone would also take "١٢٣", "1_0" or "NaN"."""


def exact_ns(text: bytes | str | int | None) -> int | None:
    """The JSON number ``text`` (µs) as int ns, rounded half to even below the ns; None when it
    is not a JSON number (non-ASCII digits, invalid UTF-8 included) or out of range."""
    if type(text) is int:
        return text * 1000 if abs(text) <= MAX_US else None
    if isinstance(text, str):
        text = text.encode("utf-8", "replace")
    if not isinstance(text, (bytes, bytearray, memoryview)) or len(text) > 400:
        return None
    text = bytes(text)
    if _JSON_NUMBER.fullmatch(text) is None:
        return None
    try:
        d = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError, ValueError, TypeError):
        return None
    if not d.is_finite() or (d and d.adjusted() > 18):  # > 1e18 µs: never fits (checked before int())
        return None
    ns = int(d.scaleb(3).to_integral_value(rounding=ROUND_HALF_EVEN))
    return ns if abs(ns) <= MAX_US * 1000 else None


def _as_float(v) -> float:
    try:
        return float(v)
    except (OverflowError, TypeError, ValueError):
        return float("inf") if isinstance(v, int) else float("nan")


def _small_ns(f: np.ndarray) -> np.ndarray:
    """ns of finite µs below EXACT_BELOW_US (see there)."""
    if not f.size or np.abs(f).max() < PLAIN_BELOW_US:
        return np.rint(f * 1000).astype(np.int64)
    whole = np.floor(f)
    return whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000).astype(np.int64)


def ns_column(values: list, reread: Callable[[list[int]], list] | None = None,
              text: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(ns as int64, state per value: OK / MISSING (None or NaN) / OUT_OF_RANGE) of µs values
    as msgspec decoded them (int, float or NaN). ``reread(indices)`` gives the written text of
    those values (str or bytes), for the large ones written with a fraction; without it they go
    through float (exact only below EXACT_BELOW_US). With ``text``, a value may be its written
    text already (a str: load.TextTimesEvent), read from its digits here."""
    n = len(values)
    if text:  # numbers with a fraction came as their text: read every one from its digits
        is_text = np.fromiter(map(isinstance, values, repeat(str, n)), dtype=bool, count=n)
        if is_text.any():
            ns, state = np.zeros(n, dtype=np.int64), np.full(n, OK, dtype=np.int8)
            at = np.flatnonzero(is_text)
            got, ok = exact_ns_many(list(compress(values, is_text.tolist())))
            ns[at], state[at[~ok]] = got, OUT_OF_RANGE
            rest = np.flatnonzero(~is_text)
            if rest.size:  # integers and missing values
                ns[rest], state[rest] = ns_column(list(compress(values, (~is_text).tolist())))
            return ns, state
    try:
        f = np.fromiter(values, dtype=np.float64, count=n)
    except (OverflowError, TypeError, ValueError):  # an int beyond float64, or an odd type
        f = np.fromiter(map(_as_float, values), dtype=np.float64, count=n)
    small = np.abs(f) < EXACT_BELOW_US  # False for NaN and inf
    state = np.where(np.isnan(f), MISSING, OK).astype(np.int8)
    if small.all():
        return _small_ns(f), state
    ns = np.zeros(n, dtype=np.int64)
    ns[small] = _small_ns(f[small])
    big = np.flatnonzero(~small & (state == OK))
    if not big.size:
        return ns, state
    vals = values if big.size == n else list(map(values.__getitem__, big.tolist()))
    types = set(map(type, vals))
    if types == {int}:  # written as integers: exact as they are
        try:
            v = np.fromiter(vals, dtype=np.int64, count=len(vals))
        except OverflowError:
            v = None
        if v is not None:
            fits = np.abs(v) <= MAX_US
            ns[big[fits]] = v[fits] * 1000
            state[big[~fits]] = OUT_OF_RANGE
            return ns, state
    if types == {float}:
        floats = big
    else:  # ints among floats: rare
        is_int = np.fromiter((type(x) is int for x in vals), dtype=bool, count=len(vals))
        for i, x in zip(big[is_int].tolist(), compress(vals, is_int.tolist())):
            if abs(x) <= MAX_US:
                ns[i] = x * 1000
            else:
                state[i] = OUT_OF_RANGE
        floats = big[~is_int]
    if reread is not None:
        got, ok = exact_ns_many(reread(floats.tolist()))
    else:  # no bytes to read again: the float, exact only below EXACT_BELOW_US
        x = f[floats]
        ok = np.abs(x) <= MAX_US
        got = np.where(ok, np.rint(np.where(ok, x, 0) * 1000), 0).astype(np.int64)
    ns[floats] = got
    state[floats[~ok]] = OUT_OF_RANGE
    return ns, state


_STRINGS = getattr(np, "strings", None)
_VECTOR = _STRINGS is not None and hasattr(_STRINGS, "slice")  # numpy >= 2.3


def exact_ns_many(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """``exact_ns`` of many numbers (str or bytes) at once: (ns, ok). Unsigned plain decimals
    (``123.4567``) are cut into integer and fraction digits by numpy's string functions;
    anything else (a sign, an exponent, an old numpy) goes through ``exact_ns`` one by one."""
    n = len(texts)
    ns, ok = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    plain = np.zeros(n, dtype=bool)
    if n and _VECTOR:
        st = _STRINGS
        try:
            a = np.array(texts, dtype=bytes)  # texts of JSON numbers: ASCII
        except (UnicodeEncodeError, TypeError, ValueError):  # a non-ASCII text is no number
            a = np.array([t if isinstance(t, bytes) else t.encode("ascii", "replace") if isinstance(t, str)
                          else b"" for t in texts], dtype=bytes)
        whole, dot, fr = st.partition(a, b".")
        digits = st.str_len(whole)
        plain = st.isdigit(whole) & (st.isdigit(fr) | ((fr == b"") & (dot == b"")))  # no sign, no exponent
        # below int64's 9223372036854775 µs, so that the ns parse cannot overflow
        plain &= (digits < 16) | ((digits == 16) & (whole < b"9223372036854775"))  # else: exact_ns
        frac = st.ljust(fr, 4, b"0")
        # the ns as one integer: the whole µs and the first three fraction digits, parsed at once
        val = np.where(plain, st.add(whole, st.slice(frac, 0, 3)), b"0").astype(np.int64)
        first = st.slice(frac, 3, 4)  # the first digit below the ns
        rest = st.strip(st.slice(frac, 4, None), b"0") != b""
        val += (first > b"5") | ((first == b"5") & (rest | (val % 2 == 1)))  # round half to even
        plain &= val <= MAX_US * 1000
        ok = plain.copy()
        ns = np.where(ok, val, 0)
    for i in np.flatnonzero(~plain).tolist():
        t = exact_ns(texts[i])
        ns[i], ok[i] = (t, True) if t is not None else (0, False)
    return ns, ok
