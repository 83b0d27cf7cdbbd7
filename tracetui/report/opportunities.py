"""``tracetui opportunities``: the fusion chains of one trace as text or JSON (tracetui/model/opportunities.py)."""
from __future__ import annotations

from tracetui.report.output import short_name
from tracetui.shorten import column
from tracetui.textsafe import visible


def capped(o: dict, top: int) -> dict:
    """The report with the first ``top`` chains (0: all); ``truncated`` and ``total_chains`` say what was cut."""
    chains = o["chains"]
    out = dict(o)
    out["chains"] = chains[:top] if top else chains
    out["total_chains"] = len(chains)
    out["truncated"] = len(out["chains"]) < len(chains)
    return out


def text_lines(o: dict, path: str) -> list[str]:
    """The report as lines: the bandwidth used, then each chain, biggest projected saving first."""
    bw = o["bandwidth"]
    out = [f"{visible(path)}: {o['total_chains']} fusion chain(s) over {o['steps']} step(s)"]
    if bw is None:
        return out + [f"  {o.get('note', 'nothing to fuse')}"]
    out.append(f"HBM bandwidth {bw['gbps']:,.0f} GB/s ({bw['source']}: {bw['how']}); projected saving "
               f"{o['projected_us_per_step']:,.1f} µs of {o['device_us_per_step']:,.1f} device µs per step")
    for c in o["chains"]:
        mb = f"{c['intermediate_bytes'] / 1e6:,.1f} MB" if c["intermediate_bytes"] is not None else "bytes unknown"
        save = f"{c['projected_saving_us']:,.1f} µs" if c["projected_saving_us"] is not None else "n/a"
        out.append(f"\n#{c['rank']} {visible(c['module'])} ({'backward' if c['backward'] else 'forward'}, "
                   f"stream {visible(c['stream'])}): saves ~{save} per step; {len(c['kernels'])} kernels take "
                   f"{c['us_per_step']:,.1f} µs, intermediates {mb}{'' if c['bytes_complete'] else ' (partly unknown)'}")
        out.append("   ops: " + visible(" → ".join(x.replace("aten::", "") for x in c["ops"])))
        for k in column([visible(k) for k in c["kernels"][:8]], 5, short=short_name):
            out.append(f"   - {k}")
        if len(c["kernels"]) > 8:
            out.append(f"   … {len(c['kernels']) - 8} more")
    if o["truncated"]:
        out.append(f"\n… {o['total_chains'] - len(o['chains'])} more chain(s) (--top 0: all)")
    return out

