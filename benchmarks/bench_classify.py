"""Kernel-name classification speed: µs per distinct name, fast path against the rule-by-rule
reference, measured in the same run (issue 44 item 15: ≤ 20 µs a name; 10^6 names well under 60 s).

    python benchmarks/bench_classify.py [--names 50000] [--decode]

The names are distinct variants of every name in tests/data/kernel_corpus.tsv (a real mix:
C++ templates of kilobytes, Inductor names, cuBLAS, NCCL), each made unique by a suffix or a
changed template argument, plus names no rule knows (the slowest case: every rule is read).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracetui.model import names as names_mod  # noqa: E402
from tracetui.model import taxonomy  # noqa: E402


def corpus_rows() -> list[tuple[str, str, str | None, bool]]:
    lines = [ln for ln in (ROOT / "tests/data/kernel_corpus.tsv").read_text().splitlines()
             if ln and not ln.startswith("#")]
    head = lines[0].split("\t")
    rows = [dict(zip(head, ln.split("\t"))) for ln in lines[1:]]
    return [(r["name"], r["kind"], r["launching_op"] or None, r["user_triton"] == "1") for r in rows]


def distinct_names(n: int, seed: int = 0) -> list[tuple[str, str, str | None, bool]]:
    """``n`` distinct (name, kind, op, user) rows: corpus rows with a unique twist, and a fifth
    names that match no rule."""
    rng = random.Random(seed)
    base = corpus_rows()
    out = []
    for i in range(n):
        if i % 5 == 4:
            out.append((f"my_kernel_{i}_{rng.randrange(1 << 30)}", "kernel", None, False))
            continue
        name, kind, op, user = base[i % len(base)]
        if "<" in name:
            name = name.replace("<", f"<{i}, ", 1)
        else:
            name = f"{name}_{i}"
        out.append((name, kind, op, user))
    return out


def short_names(n: int) -> list[tuple[str, str, str | None, bool]]:
    """``n`` distinct short names no rule knows (``k_000001_void``): every rule is read."""
    return [(f"k_{i:07d}_void", "kernel", None, False) for i in range(n)]


def timed(fn, rows) -> float:
    t0 = time.process_time()
    for r in rows:
        fn(*r)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--names", type=int, default=50_000)
    ap.add_argument("--short", action="store_true", help="short unknown names instead of the corpus mix")
    ap.add_argument("--decode", action="store_true", help="also time names.decode_kernel (the summary's per-row decode)")
    a = ap.parse_args()
    rows = short_names(a.names) if a.short else distinct_names(a.names)
    taxonomy.classify.cache_clear()
    fast = timed(taxonomy.classify, rows)
    ref = timed(taxonomy.classify_by_rules, rows)
    print(f"{a.names:,} distinct names (mean {sum(len(r[0]) for r in rows) / len(rows):.0f} chars), CPU time:")
    print(f"  rule by rule:  {ref:7.2f} s  {ref / len(rows) * 1e6:7.1f} µs/name")
    print(f"  classify:      {fast:7.2f} s  {fast / len(rows) * 1e6:7.1f} µs/name   ratio {fast / ref:.3f}")
    if a.decode:
        taxonomy.classify.cache_clear()
        getattr(names_mod, "_decode", None) and names_mod._decode.cache_clear()
        dec = timed(lambda n, k, o, u: names_mod.decode_kernel(n, k, u, o), rows)
        print(f"  decode_kernel: {dec:7.2f} s  {dec / len(rows) * 1e6:7.1f} µs/name (classify included)")


if __name__ == "__main__":
    main()
