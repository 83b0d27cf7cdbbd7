"""Many ranks of one job: the job's analysis, as a sequence of stages.

Data flows one way: ``placement`` names the ranks (from ``distributedInfo``, else the file name,
and says what it could not place); ``tables`` turns one loaded rank into plain columns (steps,
collectives, kernels, ops); ``analyze`` runs the stages below on the collectives and steps tables
alone, so the same analysis runs on traces in memory and on a Parquet index (``index.py``):

1. ``matching.prepare``: the collectives to match (unpaired p2p aside, subgroups placed);
2. ``matching.match``: each collective's key across ranks;
3. ``clocks.estimate``: each rank's clock offset (only across hosts, unless asked per rank);
4. ``metrics.collective_waits``: waits, last arrivers, the waiting each rank caused;
5. ``matching.unequal_counts``: whether the matching can be trusted;
6. ``metrics.rank_rows``, ``metrics.straggler``, ``metrics.step_rows``: the report's sections;
7. ``lateness``: each rank's lateness split into start skew and work imbalance.

Times in tables are int64 ns on each rank's own clock (``baseTimeNanoseconds`` added), the
analysis' output is in µs and bytes. The names other modules import from here stay here.
"""
from __future__ import annotations

from tracetui.jobs import clocks as _clocks, lateness as _lateness, matching as _matching, metrics as _metrics
from tracetui.jobs.clocks import RUN_APART_NS, median_low as _median_low  # noqa: F401 - public names
from tracetui.jobs.matching import UNRECORDED, backend_groups, match_keys  # noqa: F401
from tracetui.jobs.metrics import HTA_MIN_NORMALIZED_DURATION, STRAGGLER_SHARE  # noqa: F401
from tracetui.jobs.placement import (  # noqa: F401
    HEAD_BYTES, RANK_IN_NAME, TRACE_SUFFIXES, Job, RankFile, RankHeader, discover, expand_inputs, header_of,
    is_job, place_ranks, read_rank_file, require_ranks, skipped_line, spans, written_at)
from tracetui.jobs.tables import (  # noqa: F401
    STEP_COLUMNS, concat, load_rank, memory_table, process_groups, rank_results, rank_tables)


def analyze(info: dict, coll: dict, steps: dict, diagnostics: list[str] | None = None,
            job_world: int | None = None, rank_clocks: bool = False) -> dict:
    """The job: collectives matched across ranks, clock offsets, waits, stragglers, per-step figures.

    Inputs are the concatenated ``info``, ``collectives`` and ``steps`` tables of every rank;
    output is the ``ranks --json`` document (µs, bytes). ``rank_clocks``: estimate an offset for
    every rank, even between ranks of one host (``clocks``).
    """
    diags = list(diagnostics or [])
    unsure: list[str] = []  # why the matching cannot be trusted to name a straggler
    ranks = sorted(set(info["rank"]))
    coll = _matching.prepare(info, coll, job_world, diags)
    if len(ranks) == 1:
        diags.append(f"one rank only (rank {ranks[0]}): waits, arrivals and stragglers compare ranks, "
                     f"so there is nothing to compare it with")
    m = _matching.match(coll, diags)
    clocks = _clocks.estimate(info, m, ranks, diags, unsure, each_rank=rank_clocks)
    waits = _metrics.collective_waits(m, clocks, ranks, job_world, diags)
    unsure += _matching.unequal_counts(m, diags)
    unsure += _matching.unlike_kinds(m)
    idle = [r for r in ranks if not (m.rank == r).any()]
    if idle and len(idle) < len(ranks):
        diags.append(f"rank(s) {spans(idle)} hold no collective while the others do (cut short, or "
                     f"their annotations were not recorded)")
    per_rank = _metrics.rank_rows(ranks, m, waits, clocks, steps, info)
    split = _lateness.per_step(steps, clocks.offset)
    _with_lateness(per_rank, _lateness.per_rank(split, ranks), clocks)
    step_rows = _metrics.step_rows(steps, m.coll, waits.wait)
    for row in step_rows:
        sk, wi = split.get((row["rank"], row["name"]), (None, None))
        row["start_skew_us"] = None if sk is None else sk / 1e3
        row["work_imbalance_us"] = None if wi is None else wi / 1e3
    strag = _metrics.straggler(per_rank, waits, unsure)
    named = next((p for p in per_rank if p["rank"] == strag["rank"]), None)
    strag.update(start_skew_us=named and named["start_skew_us"], work_imbalance_us=named and named["work_imbalance_us"],
                 cause=named and _lateness.cause(named["start_skew_us"], named["work_imbalance_us"]))
    return {"world_size": job_world, "ranks": len(ranks), "reference_rank": clocks.ref,
            "matched_by": {(g or "default"): h for g, h in sorted(m.how.items())},
            "per_rank": per_rank, "straggler": strag, "steps": step_rows,
            "collectives": waits.collectives, "diagnostics": diags}


def _with_lateness(per_rank: list, means: dict, clocks) -> None:
    """Each rank's row with its mean start skew and work imbalance (µs, ``lateness``) and the
    spread of its collective-end differences beside its offset (``clocks.spread``)."""
    for p in per_rank:
        sk, wi = means[p["rank"]]
        sp = clocks.spread.get(p["rank"])
        p.update(start_skew_us=None if sk is None else sk / 1e3, work_imbalance_us=None if wi is None else wi / 1e3,
                 offset_spread_us=None if sp is None else sp / 1e3)


def load_job(items, workers: int | None = None, load_opts: dict | None = None, progress=None):
    """Discover the ranks among ``items``, load them in parallel, and return (job, tables per rank)."""
    from tracetui.jobs.pool import run_map
    job = require_ranks(discover(items), items)
    # a rank that could not be read comes as its ``skipped`` result (``rank_results`` sorts them out)
    tables = run_map(load_rank, [(rf, job.world, load_opts) for rf in job.ranks], workers, progress)
    return job, tables


def analyze_tables(job: Job, tables: list[dict], rank_clocks: bool = False) -> dict:
    """``analyze`` over the results ``load_job`` returned (skipped ranks left out and said)."""
    tables, diags = rank_results(job, tables)
    return analyze(concat([t["info"] for t in tables]), concat([t["collectives"] for t in tables]),
                   concat([t["steps"] for t in tables]), diags, job.world, rank_clocks=rank_clocks)
