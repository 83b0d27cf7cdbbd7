"""``tracetui ranks``: the job's report as text or JSON (schema in the README). No Textual here."""
from __future__ import annotations

import orjson

from tracetui.report.output import write_bytes, write_line as _out


def _f(v, nd=1) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


MAX_RANK_ROWS = 32
"""Past this many ranks, the text report lists the straggler and the ranks that waited most or
caused most waiting (``--json`` has every rank)."""


def _shown_ranks(doc: dict) -> list[int]:
    per = doc["per_rank"]
    if len(per) <= MAX_RANK_ROWS:
        return [p["rank"] for p in per]
    s = doc["straggler"]["rank"]
    by_caused = sorted((p for p in per if p["caused_wait_us"] > 0), key=lambda p: -p["caused_wait_us"])[:MAX_RANK_ROWS // 4]
    by_wait = sorted(per, key=lambda p: -p["wait_total_us"])
    keep = ([s] if s is not None else []) + [p["rank"] for p in by_caused]
    for p in by_wait:
        if len(set(keep)) >= MAX_RANK_ROWS:
            break
        keep.append(p["rank"])
    return sorted(set(keep))


def print_ranks(doc: dict, as_json: bool = False, top: int = 10) -> None:
    """The ``ranks`` report; ``top`` caps the collectives listed in text (JSON lists all)."""
    if as_json:
        from tracetui.textsafe import json_safe  # C1, bidi and U+2028 from names escaped, as every --json
        from tracetui.report.output import round_us
        round_us(doc)  # µs to the ns, as every --json
        try:
            data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        except orjson.JSONEncodeError:  # an integer past 64 bits from a trace: Python's encoder writes it
            import json
            data = json.dumps(doc, indent=2, ensure_ascii=False, default=str).encode()
        write_bytes(json_safe(data) + b"\n")
        return
    _out(f"job: {doc['ranks']} rank(s) of world size {doc['world_size'] if doc['world_size'] else 'unknown'}; "
         + ("collectives matched by " + ", ".join(f"{g}: {m}" for g, m in doc["matched_by"].items())
            if doc["matched_by"] else "no collectives")
         + f"; clocks aligned to rank {doc['reference_rank']}")
    s = doc["straggler"]
    _out(("likely straggler: rank " + str(s["rank"]) if s["rank"] is not None else "no clear straggler")
         + f" - {s['evidence']}")
    if s.get("cause"):
        _out(f"  cause: {s['cause']} (per step, mean: start skew {_f(s['start_skew_us'])} µs, "
             f"work imbalance {_f(s['work_imbalance_us'])} µs)")
    _out()
    shown = set(_shown_ranks(doc))
    if len(shown) < len(doc["per_rank"]):
        _out(f"(the straggler and the {len(shown)} ranks that caused or waited most, of {len(doc['per_rank'])}; "
             f"--json lists every rank)")
    _out(f"{'rank':>5} {'offset µs':>12} {'spread µs':>10} {'colls':>6} {'wait µs':>12} {'mean µs':>10} {'last':>5} "
         f"{'caused µs':>12} {'skew µs':>10} {'imbal µs':>10} {'HTA':>4}  host")
    for p in doc["per_rank"]:
        if p["rank"] not in shown:
            continue
        _out(f"{p['rank']:>5} {_f(p['offset_us'], 3):>12} {_f(p.get('offset_spread_us'), 3):>10} {p['collectives']:>6} "
             f"{_f(p['wait_total_us']):>12} {_f(p['wait_mean_us']):>10} {p['last_count']:>5} "
             f"{_f(p['caused_wait_us']):>12} {_f(p.get('start_skew_us')):>10} {_f(p.get('work_imbalance_us')):>10} "
             f"{p['hta_straggler_count']:>4}  {p['host'] or '-'}")
    _out("(spread: interquartile range of the rank's collective-end differences to the reference rank's; "
         "skew / imbal: mean per step of its start skew and work imbalance)")
    if doc["steps"]:
        _out()
        sw = max([18] + [len(r["name"]) for r in doc["steps"]])  # a step's name is never cut
        _out(f"{'rank':>5} {'step':<{sw}} {'step µs':>11} {'comm µs':>10} {'exposed µs':>11} {'overlap':>8} "
             f"{'wait µs':>10}")
        for r in doc["steps"]:
            if r["rank"] not in shown:
                continue
            ov = "-" if r["overlap_ratio"] is None else f"{100 * r['overlap_ratio']:.0f}%"
            _out(f"{r['rank']:>5} {r['name']:<{sw}} {_f(r['step_us']):>11} {_f(r['comm_us']):>10} "
                 f"{_f(r['comm_exposed_us']):>11} {ov:>8} {_f(r['wait_us']):>10}")
    colls = sorted(doc["collectives"], key=lambda c: -sum(p["wait_us"] for p in c["per_rank"]))
    if colls:
        _out()
        _out(f"collectives by total wait (top {min(top, len(colls)) if top else len(colls)} of {len(colls)}):")
        _out(f"{'wait µs':>11} {'latency µs':>11} {'bytes':>12} {'busbw GB/s':>10} {'last':>5}  name")
        for c in colls[:top or None]:
            _out(f"{_f(sum(p['wait_us'] for p in c['per_rank'])):>11} {_f(c['latency_us']):>11} "
                 f"{c['msg_bytes'] if c['msg_bytes'] is not None else '-':>12} {_f(c['busbw_gbps'], 2):>10} "
                 f"{c['last_rank']:>5}  {c['name']} ({c['group'] or 'default'} #{c['index']})")
    if doc["diagnostics"]:
        _out()
        _out("diagnostics:")
        for d in doc["diagnostics"]:
            _out(f"  {d}")
