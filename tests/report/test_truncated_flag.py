"""Every capped JSON says so on stderr (issue 36, `tracetui skill`): `tracetui: truncated: <list>
<shown> of <total> (--top 0: all)`, with totals counted here from the raw JSON or the uncapped run."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

from tests.conftest import TRACES


def _run(*argv):
    p = subprocess.run([sys.executable, "-m", "tracetui", *map(str, argv)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def test_summary_kernels_capped_against_the_raw_kernel_names():
    ev = json.load(gzip.open(TRACES / "transformer_eager.json.gz"))["traceEvents"]
    names = {e["name"] for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    j, err = _run("summary", TRACES / "transformer_eager.json.gz", "--json", "--top", "5")
    assert len(j["kernels"]) == 5
    line = err.strip()
    assert line.startswith(f"tracetui: truncated: kernels 5 of {len(names)}, ops 5 of ") and line.endswith("(--top 0: all)")
    j, err = _run("summary", TRACES / "transformer_eager.json.gz", "--json", "--top", "0")
    assert err == "" and len(j["kernels"]) == len(names)


def test_diff_and_memory_caps_name_the_uncapped_totals():
    a, b = TRACES / "mlp_eager.json.gz", TRACES / "mlp_compile.json.gz"
    full, err = _run("diff", a, b, "--json", "--top", "0")
    assert err == ""
    capped, err = _run("diff", a, b, "--json", "--top", "2")
    assert err == f"tracetui: truncated: changes {len(capped['changes'])} of {len(full['changes'])} (--top 0: all)\n"
    m = TRACES / "transformer_eager_memory.json.gz"
    full, err = _run("memory", m, "--json", "--top", "0")
    assert err == ""
    capped, err = _run("memory", m, "--json", "--top", "3")
    assert f"ops 3 of {len(full['ops'])}" in err and err.startswith("tracetui: truncated: ")
    assert len(err.strip().splitlines()) == 1


def test_the_memory_diff_caps_are_said_too():
    """`memory A B --json --top N` and the memory part of `diff A B --json --top N`: the lists the
    cap cut, against the uncapped run's (they were cut without a word before)."""
    from tests.conftest import DATA
    a, b = (DATA / "diff" / f"cpu_transformer_{k}_memory_v1021.json.gz" for k in ("eager", "compile"))
    full, err = _run("memory", a, b, "--json", "--top", "0")
    assert err == "" and len(full["ops"]) > 2
    capped, err = _run("memory", a, b, "--json", "--top", "2")
    assert len(capped["ops"]) == 2 and err.startswith("tracetui: truncated: ")
    assert f"ops 2 of {len(full['ops'])}" in err and len(err.strip().splitlines()) == 1
    cut_holders = [s for s in full["steps"] if len(s["holders"]) > 2]
    assert cut_holders and f"steps[0].holders 2 of {len(full['steps'][0]['holders'])}" in err
    dfull, err = _run("diff", a, b, "--json", "--top", "0")
    assert err == "" and dfull["memory"]["ops"] == full["ops"]
    dcap, err = _run("diff", a, b, "--json", "--top", "2")
    assert len(dcap["memory"]["ops"]) == 2 and f"memory.ops 2 of {len(full['ops'])}" in err
