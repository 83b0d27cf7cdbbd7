"""Every regex that runs on trace text is linear on adversarial 20k-character names (issue 44, item 2),
and the linear rewrites match exactly what the patterns they replaced matched.

The audit itself (``tests/regex_audit.py``) runs in a subprocess under a time limit: a
catastrophic pattern fails this test instead of hanging the suite. Before the fixes it reported 10
patterns (steps' NUMBERED, compare's FX-node suffix, seven kernel-taxonomy rules, the H100 SXM
device rule), each taking 0.5-11 s on one 20k name."""
from __future__ import annotations

import random
import re
import subprocess
import sys

from tracetui.compare.items import _strip_overload
from tracetui.model.opportunities import NOMINAL_GBPS
from tracetui.model.taxonomy import TABLE, _then

AUDIT_LIMIT_S = 300


def test_every_regex_is_linear_on_adversarial_names():
    try:
        out = subprocess.run([sys.executable, "-m", "tests.regex_audit"], capture_output=True, text=True,
                             timeout=AUDIT_LIMIT_S)
    except subprocess.TimeoutExpired as e:
        tried = [ln for ln in (e.stdout or b"").decode().splitlines() if ln.startswith("TRY ")]
        raise AssertionError(f"the audit hung; last pattern tried: {tried[-1] if tried else 'none'}") from None
    lines = out.stdout.splitlines()
    failing = [ln[:300] for ln in lines if ln.startswith(("SLOW", "UNAUDITED"))]
    assert not failing, "\n".join(failing)
    assert out.returncode == 0, out.stderr[-2000:]
    done = [ln for ln in lines if ln.startswith("DONE")]
    assert done, out.stderr[-2000:]
    audited = int(done[0].split()[1])
    # the walk found the rule tables and the source scan found the inline patterns
    assert audited >= len(TABLE), done
    for where in ("model/steps.py", "tracetui.model.taxonomy._COMPILED", "read/repair.py", "compare/items.py",
                  "NOMINAL_GBPS", "jobs/placement.py", "textsafe.py"):
        assert any(where in ln for ln in lines if ln.startswith("OK")), where


def _words(pieces, rng, n=80_000, most=8):
    for _ in range(n):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(0, most)))


def test_then_matches_what_word_gap_patterns_matched():
    """``_then(a, b)`` is ``a\\w*b`` made linear: the same answer on every name built from the parts
    that matter (each piece, separators, digits), with ``a\\w*(?:b)`` as the reference."""
    rng = random.Random(44)
    for first, then in (("compute", "fusedparams"), ("cutlass_", "cudnn"), ("rocblas_", "gem[mv]"),
                        ("magma_", "gemm"), ("softmax", "forward|backward")):
        ref, new = re.compile(rf"{first}\w*(?:{then})"), re.compile(_then(first, then))
        alts = [a.replace("[mv]", "m") for a in then.split("|")] + [then.replace("[mv]", "v")]
        pieces = [first, first[:3], first[2:], "_", "x", "0", " ", ":", "<", "::", "٣"] + alts + [a[:3] for a in alts]
        for s in _words(pieces, rng):
            assert bool(ref.search(s)) == bool(new.search(s)), (first, then, s)


def test_strip_overload_is_the_suffix_regex():
    rng = random.Random(45)
    ref = re.compile(r"(_default)?(_\d+)*$")
    pieces = ["_", "1", "23", "٣", "default", "_default", "mm", "_1", "x", "a", " ", "__"]
    for s in _words(pieces, rng, n=150_000):
        assert _strip_overload(s) == ref.sub("", s), s


def test_h100_sxm_rule_matches_what_it_matched():
    rule = next(rx for rx, _, what in NOMINAL_GBPS if "H100 SXM" in what)
    ref, new = re.compile(r"H100.*(?:SXM|HBM3)"), re.compile(rule)
    rng = random.Random(46)
    for s in _words(["H100", "H10", "SXM", "HBM3", "HBM", " ", "\n", "x", "80GB", "NVIDIA "], rng):
        assert bool(ref.search(s)) == bool(new.search(s)), s
    assert new.search("NVIDIA H100 80GB HBM3") and not new.search("NVIDIA H100 PCIe")
