"""``tracetui diff A B``: the verdict line, the comparability check and ``--gate`` (tracetui/compare/verdict.py)."""
from __future__ import annotations

import argparse
import sys


def gate_pct(text: str) -> float:
    """An argparse type: a percentage >= 0 (``--gate 5`` fails B when it is more than 5% worse)."""
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage such as 5") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: a percentage of 0 or more")
    return v


GATE_ON = ("device", "cpu", "wall", "kernels")
"""verdict.GATE_METRICS's keys, kept here so ``--help`` imports no model (a test checks they agree)."""


def add_gate_args(d) -> None:
    """``--gate PCT`` and ``--gate-on`` on the diff parser."""
    d.add_argument("--gate", type=gate_pct, default=None, metavar="PCT",
                   help="CI gate: exit 1 when B is worse than A by more than PCT percent per step, "
                        "3 when the traces are not comparable (exit codes in README)")
    d.add_argument("--gate-on", choices=GATE_ON, default="device",
                   help="the per-step figure the gate compares: device µs (default), cpu µs, wall µs or kernels")


def report_two(traces: list, args, fmt: str, top: int, table) -> int:
    """The two-trace diff report opened by its verdict; the exit code of the gate (0 without one)."""
    from tracetui.compare.changes import diff_dict
    from tracetui.compare.diff import diff_traces
    from tracetui.compare.verdict import comparability, facts, gate, header_lines, verdict
    from tracetui.report.diff import print_diff
    d = diff_traces(*traces)
    fa, fb = facts(traces[0]), facts(traces[1])
    j = diff_dict(d)  # every change (top=0): the verdict sums them by kind
    v, comp = verdict(j), comparability(fa, fb)
    pct = getattr(args, "gate", None)
    g = gate(j, fa, fb, comp, pct, getattr(args, "gate_on", "device")) if pct is not None else None
    head = header_lines(v, comp, g)
    extra = {"verdict": v, "comparability": comp, "gate": g}
    print_diff(d, fmt=fmt, table=table, top=top, head=head + [""], extra=extra)
    if g is not None and fmt != "text":  # the JSON carries it; csv and md do not: say it on stderr
        from tracetui.textsafe import visible
        print(f"tracetui: {visible(head[-1])}", file=sys.stderr)
    return g["exit_code"] if g is not None else 0

