"""What the matched collectives say about the job: each collective's waits and last arriver,
per rank the waiting it did and caused, the likely straggler (and HTA's late-start metric beside
it), and per rank, per step, the step's figures with its collectives' waits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetui.jobs.clocks import Clocks
from tracetui.jobs.collectives import busbw_factor
from tracetui.jobs.matching import Matched, _key_str, group_members

HTA_MIN_NORMALIZED_DURATION = 0.01
"""HTA's straggler metric only looks at collectives longer than 1% of the mean step time."""

STRAGGLER_SHARE = 0.5
"""A rank is named the likely straggler when the waits it caused (as the last arriver) are at
least this share of all waits caused in the job; otherwise no single rank is to blame."""


@dataclass
class Waits:
    """Per collective row: its wait (ns) and whether it arrived last; per rank, the waiting it
    caused as last arriver; the aligned starts and ends; the ``collectives`` rows of the report."""
    wait: np.ndarray
    last: np.ndarray
    caused: dict
    a_start: np.ndarray
    a_end: np.ndarray
    collectives: list


def collective_waits(m: Matched, clocks: Clocks, ranks: list, job_world: int | None, diags: list[str]) -> Waits:
    """On the aligned clocks (offsets subtracted): per matched collective, in start order, each
    rank's wait (latest start - own start), the last arriver and the waiting it caused (its start
    - the second latest), and the report's row; metadata the ranks disagree on is said."""
    off_a = np.array([clocks.offset.get(int(r), 0) for r in m.rank.tolist()], dtype=np.int64)
    a_start, a_end = m.start - off_a, m.end - off_a
    wait = np.zeros(m.rank.size, dtype=np.int64)
    last = np.zeros(m.rank.size, dtype=bool)
    caused = {r: 0 for r in ranks}
    members = group_members(m)
    rows_out = []
    for k, rows in sorted(m.by_key.items(), key=lambda kv: int(a_start[kv[1]].min())):
        rows = sorted(rows, key=lambda i: m.coll["rank"][i])
        ra = np.array(rows, dtype=np.int64)
        latest = int(a_start[ra].max())
        wait[ra] = latest - a_start[ra]
        li = rows[int(np.argmax(a_start[ra]))]
        last[li] = len(rows) > 1  # a collective one rank holds alone has no one to be last against
        if len(rows) > 1:
            caused[m.coll["rank"][li]] += latest - int(np.sort(a_start[ra])[-2])
        _say_disagreement(m.coll, k, rows, diags)
        n = max(m.coll["group_size"][i] for i in rows)
        n = n if n > 0 else (job_world or len(members[k[0]]))
        rows_out.append(_collective_row(m.coll, k, rows, n, m.coll["rank"][li], a_start, a_end, wait))
    return Waits(wait, last, caused, a_start, a_end, rows_out)


def _say_disagreement(coll: dict, k, rows: list, diags: list[str]) -> None:
    names = {coll["name"][i] for i in rows}
    dtypes = {coll["dtype"][i] for i in rows}
    sizes = {coll["msg_bytes"][i] for i in rows}
    if len(names) > 1 or len(dtypes) > 1 or len(sizes) > 1:
        diags.append(f"collective {_key_str(k)}: ranks disagree on "
                     + ", ".join(w for w, s in (("name", names), ("dtype", dtypes), ("size", sizes))
                                 if len(s) > 1)
                     + f" ({', '.join(sorted(map(str, names)))})")


def _collective_row(coll: dict, k, rows: list, n: int, last_rank: int, a_start, a_end, wait) -> dict:
    """One matched collective as the report lists it (µs, bytes, GB/s)."""
    i0 = rows[0]
    ra = np.array(rows, dtype=np.int64)
    lat = int((a_end[ra] - a_start[ra]).min())
    msg = max(coll["msg_bytes"][i] for i in rows)
    f = busbw_factor(coll["kind"][i0], n)
    algbw = msg / lat if (msg > 0 and lat > 0) else None  # bytes per ns = GB/s
    algos = {coll["algorithm"][i] for i in rows} - {None}
    return {
        "group": k[0], "match": k[1], "index": k[2], "name": coll["name"][i0], "kind": coll["kind"][i0],
        "dtype": coll["dtype"][i0], "msg_bytes": msg if msg >= 0 else None, "ranks": len(rows),
        "group_size": n, "last_rank": last_rank, "latency_us": lat / 1e3,
        "algorithm": next(iter(algos)) if len(algos) == 1 else (sorted(algos) or None),
        "algbw_gbps": algbw, "busbw_gbps": (algbw * f) if (algbw is not None and f is not None) else None,
        # int ns / 1000 in Python: the float nearest the exact time (float64(ns) first lost up to 128 ns)
        "per_rank": [{"rank": coll["rank"][i], "start_us": int(a_start[i]) / 1000, "end_us": int(a_end[i]) / 1000,
                      "wait_us": int(wait[i]) / 1e3, "step": coll["step"][i]} for i in rows],
    }


def rank_rows(ranks: list, m: Matched, w: Waits, clocks: Clocks, steps: dict, info: dict) -> list:
    """Per rank: its clock and offset, its collectives, the waiting it did and caused, how often
    it was last, HTA's late-start count, and where its file came from."""
    hta = _hta_straggler_counts(ranks, m.rank, w.a_start, w.a_end, m.coll, m.keys, steps, clocks.offset)
    info_by = {r: i for i, r in enumerate(info["rank"])}
    out = []
    for r in ranks:
        mine = m.rank == r
        wr = w.wait[mine]
        j = info_by[r]
        own = clocks.own[r]
        out.append({
            "rank": r, "clock": clocks.clock[r], "offset_us": clocks.offset[r] / 1e3, "offset_from": clocks.offset_n[r],
            "offset_rank_us": None if own is None else own / 1e3, "collectives": int(mine.sum()),
            "wait_total_us": int(wr.sum()) / 1e3, "wait_mean_us": (float(wr.mean()) / 1e3) if wr.size else 0.0,
            "last_count": int(w.last[mine].sum()), "caused_wait_us": w.caused[r] / 1e3,
            "hta_straggler_count": hta.get(r, 0),
            "file": info["file"][j], "host": info["host"][j] or None, "device": info["device"][j] or None,
            "rank_from": info["rank_from"][j],
        })
    return out


def straggler(per_rank: list, w: Waits, unsure: list[str]) -> dict:
    """``_name_straggler``, withheld (and why said) when the matching cannot be trusted."""
    out = _name_straggler(per_rank, int(sum(w.caused.values())), len(w.collectives))
    if unsure and out["rank"] is not None:  # a wrong match names a wrong rank: say why, name none
        out = {"rank": None, "share": out.get("share"), "unreliable": list(unsure),
               "evidence": "not named, the matching is not reliable: " + "; ".join(unsure)
                           + ". Taken at face value: " + out["evidence"]}
    return out

def _name_straggler(per_rank: list, caused_total: int, n_coll: int) -> dict:
    """The likely straggler and the evidence: the rank whose late arrivals caused most of the
    waiting (``STRAGGLER_SHARE``), with how often it was last and the HTA metric beside it."""
    if not per_rank or caused_total <= 0:
        return {"rank": None, "evidence": "no collective waited on a late rank"}
    top = max(per_rank, key=lambda p: (p["caused_wait_us"], p["last_count"]))
    share = top["caused_wait_us"] * 1e3 / caused_total
    others = [p for p in per_rank if p is not top]
    mean_other_wait = float(np.mean([p["wait_mean_us"] for p in others])) if others else 0.0
    ev = (f"rank {top['rank']} arrived last at {top['last_count']} of {n_coll} collectives; the others "
          f"waited {top['caused_wait_us']:.1f} µs for it ({100 * share:.0f}% of all waiting caused by a late "
          f"rank); its own mean wait {top['wait_mean_us']:.1f} µs vs {mean_other_wait:.1f} µs for the "
          f"others; HTA's late-start metric flags it in {top['hta_straggler_count']} step(s)")
    if share < STRAGGLER_SHARE:
        return {"rank": None, "evidence": "no single rank dominates: " + ev, "share": share}
    return {"rank": top["rank"], "evidence": ev, "share": share}


def _hta_straggler_counts(ranks, rank_a, a_start, a_end, coll, keys, steps, offset) -> dict:
    """HTA's ``find_stragglers_with_late_start_comm_kernels``, on matched collectives: per step,
    the collectives longer than 1% of the mean step time on their longest rank (HTA filters each
    rank's copy alone, which drops the late rank itself wherever it did not wait: on gloo its
    copy is short, and the ranks that waited were flagged); per (rank, step, name) the last of them;
    the name whose duration varies most across ranks (mean over steps of the std); per step the
    k ranks whose last such collective starts latest are flagged (HTA's k = 2, here 1 for jobs of
    up to 4 ranks, where 2 would flag half of them). Returns rank -> steps flagged."""
    if not rank_a.size or not steps.get("rank"):
        return {}
    st_rank = np.array(steps["rank"], dtype=np.int64)
    st_s = np.array(steps["start_ns"], dtype=np.int64) - np.array([offset.get(int(r), 0) for r in st_rank.tolist()],
                                                                   dtype=np.int64)
    st_e = np.array(steps["end_ns"], dtype=np.int64) - np.array([offset.get(int(r), 0) for r in st_rank.tolist()],
                                                                 dtype=np.int64)
    n_iter = len(set(steps["step"]))
    if not n_iter:
        return {}
    mean_iter = (int(st_e.max()) - int(st_s.min())) / n_iter
    step_a = np.array(coll["step"], dtype=np.int64)
    dur = a_end - a_start
    longest: dict = {}  # per matched collective, its longest rank's duration
    for i, k in enumerate(keys):
        longest[k] = max(longest.get(k, 0), int(dur[i]))
    sig = (step_a >= 0) & (np.array([longest[k] for k in keys], dtype=np.int64) >= HTA_MIN_NORMALIZED_DURATION * mean_iter)
    if not sig.any():
        return {}
    names = np.array(coll["name"], dtype=object)
    last: dict = {}
    for i in np.nonzero(sig)[0].tolist():
        k = (int(rank_a[i]), int(step_a[i]), names[i])
        if k not in last or a_start[i] > a_start[last[k]]:
            last[k] = i
    spread: dict = {}
    for nm in set(k[2] for k in last):
        per_step = {}
        for (r, s, n), i in last.items():
            if n == nm:
                per_step.setdefault(s, []).append(dur[i] / mean_iter)
        stds = [float(np.std(v, ddof=1)) for v in per_step.values() if len(v) > 1]
        spread[nm] = float(np.mean(stds)) if stds else 0.0
    chosen = max(spread, key=lambda n: (spread[n], n))
    k_top = 1 if len(ranks) <= 4 else 2
    out = {r: 0 for r in ranks}
    by_step: dict = {}
    for (r, s, n), i in last.items():
        if n == chosen:
            by_step.setdefault(s, []).append((int(a_start[i]), r))
    for s, lst in by_step.items():
        if len(lst) < 2:  # a step one rank alone reached: no one to be late against
            continue
        lst.sort(reverse=True)
        threshold = lst[min(k_top, len(lst)) - 1][0]
        for ts, r in lst:
            if ts >= threshold:
                out[r] += 1
    return out


def step_rows(steps: dict, coll: dict, wait: np.ndarray) -> list:
    """Per rank, per step: the step's figures (µs; communication as ``tables._step_figures``
    counts it, whatever the device) and the waits of the collectives launched in it."""
    out = []
    if not steps.get("rank"):
        return out
    w_by: dict = {}
    n_by: dict = {}
    for i, (r, s) in enumerate(zip(coll.get("rank", []), coll.get("step", []))):
        if s >= 0:
            w_by[(r, s)] = w_by.get((r, s), 0) + int(wait[i])
            n_by[(r, s)] = n_by.get((r, s), 0) + 1
    us = lambda v: None if v < 0 else v / 1e3  # noqa: E731
    for j in range(len(steps["rank"])):
        r, s = steps["rank"][j], steps["step"][j]
        ov, tot = steps["comm_overlapped_ns"][j], steps["comm_ns"][j]
        out.append({"rank": r, "step": s, "name": steps["name"][j],
                    "step_us": (steps["end_ns"][j] - steps["start_ns"][j]) / 1e3,
                    "window_us": steps["window_ns"][j] / 1e3, "busy_us": us(steps["busy_ns"][j]),
                    "compute_us": us(steps["compute_ns"][j]), "comm_us": us(tot),
                    "comm_exposed_us": us(steps["comm_exposed_ns"][j]), "comm_overlapped_us": us(ov),
                    "overlap_ratio": (ov / tot) if (tot is not None and tot > 0 and ov >= 0) else None,
                    "memcpy_us": us(steps["memcpy_ns"][j]), "memset_us": us(steps["memset_ns"][j]),
                    "idle_us": us(steps["idle_ns"][j]), "kernels": steps["kernels"][j],
                    "wait_us": w_by.get((r, s), 0) / 1e3, "collectives": n_by.get((r, s), 0),
                    "verdict": steps["verdict"][j]})
    return out
