"""The whole bad-input corpus (tests/corpus.py) through the CLI, each command a fresh process with
its address space capped at 3 GiB (``prlimit --as=3G``) and a 10 s limit: every run must exit 0, or exit 2 with one error line on stderr
(as tests/test_bad_corpus.py: a `tracetui:` notice may precede it).
Prints the worst memory (peak RSS of one command) and the slowest run.

    python benchmarks/corpus_cli.py [--as 3G] [--limit 10] [--only NAME ...]
    python benchmarks/corpus_cli.py --output-faults

``--output-faults`` runs the output-fault corpus instead (issue 44): every command that writes a
report, in every format, with stdout on /dev/full, a file over ``ulimit -f``, stdout closed and a
pipe whose reader is gone; each must exit 2 with one ``cannot write the output`` line.

(the issue 35 check; numbers in docs/perf.md). TRACETUI_MAX_BYTES is left as the user has it.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.corpus import (OUTPUT_FAULTS, all_cases, base_doc, layout, output_commands,  # noqa: E402
                          output_fault_ok, run_output_fault)


def _size(text: str) -> int:
    return int(float(text[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[text[-1].upper()])


def run(argv: list[str], limit: float, cap: str) -> dict:
    """One CLI command with its address space capped, as ``prlimit --as=CAP`` does (setrlimit in
    the child: the prlimit binary itself segfaults on this VM, even for /usr/bin/true)."""
    cmd = [sys.executable, "-m", "tracetui"] + argv
    n = _size(cap)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (n, n)))
    try:
        _, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"rc": "timeout", "s": time.perf_counter() - t0, "err": ""}
    return {"rc": p.returncode, "s": time.perf_counter() - t0, "err": err.decode("utf-8", "replace")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--as", dest="cap", default="3G")
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--output-faults", action="store_true", help="the output-fault corpus instead")
    a = ap.parse_args()
    if a.output_faults:
        sys.exit(output_faults())
    bad, worst, slowest, n = [], (0.0, ""), (0.0, ""), 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = root / "base.json"
        base.write_bytes(layout(base_doc(), "compact"))
        for i, c in enumerate(all_cases()):
            if a.only and c.name not in a.only:
                continue
            d = root / f"c{i:03d}"
            d.mkdir()
            path = str(c.make(d))
            for argv in (["summary", path, "--json", "--top", "0"], ["tree", path, "--json"],
                         ["diff", path, str(base), "--json"]):
                before = _children_maxrss()
                r = run(argv, a.limit, a.cap)
                mb = max(_children_maxrss(), before) / 1024  # the peak of the largest child so far
                n += 1
                lines = r["err"].splitlines()
                errors = [ln for ln in lines if ln.startswith("tracetui: error: ")]
                ok = r["rc"] == 0 or (r["rc"] == 2 and len(errors) == 1  # a notice may precede it (a folder's pick)
                                      and all(ln.startswith("tracetui: ") for ln in lines))
                if not ok:
                    bad.append({"case": c.name, "cmd": argv[0], "rc": r["rc"], "err": r["err"][-400:]})
                if mb > worst[0]:
                    worst = (mb, f"{c.name} {argv[0]}")
                if r["s"] > slowest[0]:
                    slowest = (r["s"], f"{c.name} {argv[0]}")
    out = {"runs": n, "failures": bad, "worst_peak_rss_mb": round(worst[0], 1), "worst_case": worst[1],
           "slowest_s": round(slowest[0], 2), "slowest_case": slowest[1], "address_space": a.cap}
    print(json.dumps(out, indent=1))
    sys.exit(1 if bad else 0)


def output_faults() -> int:
    """Every (command, format) of tests/corpus.py's output_commands() under every fault."""
    bad, n, slowest = [], 0, (0.0, "")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for label, argv in output_commands():
            for fault in OUTPUT_FAULTS:
                t = time.perf_counter()
                r = run_output_fault(argv, fault, Path(tmp))
                s = time.perf_counter() - t
                n += 1
                if s > slowest[0]:
                    slowest = (s, f"{label} {fault}")
                if not output_fault_ok(r):
                    bad.append({"run": f"{label} {fault}", "rc": r["rc"], "err": r["err"][-400:]})
    print(json.dumps({"runs": n, "commands": len(output_commands()), "faults": list(OUTPUT_FAULTS),
                      "failures": bad, "slowest_s": round(slowest[0], 2), "slowest_run": slowest[1],
                      "total_s": round(time.perf_counter() - t0, 1)}, indent=1))
    return 1 if bad else 0


def _children_maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KB: the largest child's peak


if __name__ == "__main__":
    main()
