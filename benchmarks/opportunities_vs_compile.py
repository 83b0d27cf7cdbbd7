"""Projected fusion savings (`tracetui opportunities EAGER`) against what torch.compile realised
(`tracetui diff EAGER COMPILE`), per chain. Prints a Markdown table for docs/perf.md.

    python benchmarks/opportunities_vs_compile.py traces/mlp_eager.json.gz traces/mlp_compile.json.gz

Matching: each fused kernel of the diff (``fused``: one row per instance, the A kernels it
replaced and their modules) gives its saving to the chains holding those kernels, in proportion
to how many of its replaced kernels each chain holds; a chain is matched on kernel name and on
sharing a module with the fused row. A chain no fused kernel touched realised 0.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter


def run_json(*argv: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "tracetui", *argv], capture_output=True, text=True, check=False)
    return json.loads(out.stdout)


def realised(chains: list[dict], fused: list[dict]) -> list[float]:
    """Per chain, the µs per step the fused kernels that replaced its kernels saved."""
    got = [0.0] * len(chains)
    free = [Counter(c["kernels"]) for c in chains]
    order = sorted(range(len(chains)), key=lambda i: chains[i]["position"])  # launch order, not rank
    for f in fused:
        if not f["replaces"]:
            continue
        share = f["saved_us"] / len(f["replaces"])
        mods = set(f["module_a"]) | set(f["blocks_a"])
        for name in f["replaces"]:
            for i in order:
                c = chains[i]
                if free[i][name] > 0 and (not mods or mods & set(c["modules"])):
                    free[i][name] -= 1
                    got[i] += share
                    break
    return got


def table(eager: str, compiled: str) -> tuple[list[str], dict]:
    o = run_json("opportunities", eager, "--json", "--top", "0")
    d = run_json("diff", eager, compiled, "--json", "--top", "0")
    chains = o["chains"]
    real = realised(chains, d["fused"])
    rows = ["| # | module | dir | ops | chain µs | intermediate MB | projected µs | realised µs | error µs |",
            "|---|---|---|---|---|---|---|---|---|"]
    tot_p = tot_r = 0.0
    for c, r in zip(chains, real):
        p = c["projected_saving_us"]
        ops = " + ".join(x.replace("aten::", "") for x in c["ops"][:6]) + (" …" if len(c["ops"]) > 6 else "")
        mb = f"{c['intermediate_bytes'] / 1e6:.1f}" if c["intermediate_bytes"] is not None else "?"
        err = f"{p - r:+.1f}" if p is not None else "n/a"
        rows.append(f"| {c['rank']} | {c['module']} | {'bwd' if c['backward'] else 'fwd'} | {ops} | "
                    f"{c['us_per_step']:.1f} | {mb} | {p if p is None else round(p, 1)} | {r:.1f} | {err} |")
        if p is not None:
            tot_p += p
            tot_r += r
    pairs = [(c["projected_saving_us"], c["traffic_saving_us"], r) for c, r in zip(chains, real)
             if c["projected_saving_us"] is not None]
    errs = sorted(abs(p - r) for p, _, r in pairs)
    floor = sorted(abs(f - r) for _, f, r in pairs)
    summary = {"projected_us": tot_p, "realised_us": tot_r, "bandwidth": o["bandwidth"], "chains": len(chains),
               "compile_fusion_saved_us": sum(f["saved_us"] for f in d["fused"]),
               "median_abs_err": errs[len(errs) // 2] if errs else 0.0,
               "traffic_only_median_abs_err": floor[len(floor) // 2] if floor else 0.0,
               "traffic_only_total": sum(f for _, f, _ in pairs)}
    rows.append(f"| | **all chains with bytes** | | | | | **{tot_p:.1f}** | **{tot_r:.1f}** | **{tot_p - tot_r:+.1f}** |")
    return rows, summary


def main(argv: list[str]) -> int:
    for eager, compiled in zip(argv[0::2], argv[1::2]):
        rows, s = table(eager, compiled)
        print(f"\n`{eager}` → `{compiled}`: bandwidth {s['bandwidth']['gbps']:.0f} GB/s ({s['bandwidth']['source']}: "
              f"{s['bandwidth']['how']}); all of compile's fusions saved {s['compile_fusion_saved_us']:.1f} µs/step\n")
        print("\n".join(rows))
        print(f"\nper chain |projected − realised|: median {s['median_abs_err']:.1f} µs; the traffic-only "
              f"projection (2 × intermediates / bandwidth) totals {s['traffic_only_total']:.1f} µs, median error "
              f"{s['traffic_only_median_abs_err']:.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
