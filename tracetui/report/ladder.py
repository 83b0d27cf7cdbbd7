"""``tracetui diff A B C …``: an N-way ladder, each rung's per-step figures and what changed."""
from __future__ import annotations

from tracetui.report import host_step
from tracetui.report.host_step import per_step
from tracetui.report.output import write_json, write_line, shown
from tracetui.shorten import fit_arrow, name_room
from tracetui.textsafe import visible


def print_ladder(ld: dict, names: list[str], as_json: bool = False, write=None) -> None:
    """An N-way ladder: per step figures of each rung, and why each next rung is faster or slower."""
    if as_json:
        write_json(ld)
        return
    sink = write or write_line

    def emit(line: str) -> None:
        sink(shown(line))
    for line in ladder_lines(ld, names):
        emit(line)


def ladder_tables(ld: dict, names: list[str]) -> list:
    """The csv/md tables of a ladder (``diff A B C …``): ``rungs`` (one row per trace, its
    per-step figures), ``steps`` (one per neighbour pair, its totals), ``changes`` and
    ``cpu_changes`` (the pair's top changes, each led by the pair's ``from`` and ``to`` names)."""
    from tracetui.report.export import records_table
    rungs = [{"name": n, **r} for n, r in zip(names, ld["rungs"])]
    steps = [{"from": names[s["from"]], "to": names[s["to"]], **s["totals"]} for s in ld["steps"]]

    def changes(key: str) -> list[dict]:
        return [{"from": names[s["from"]], "to": names[s["to"]], **c} for s in ld["steps"] for c in s[key]]
    return [records_table("rungs", rungs), records_table("steps", steps),
            records_table("changes", changes("top")), records_table("cpu_changes", changes("cpu_top"))]


def rung_cpu(r: dict) -> str:
    """A rung's host time per step, or "-" without step markers (``host_step.per_step``)."""
    return per_step(r["cpu_us_per_step"])


def host_delta(ld: dict, s: dict, names: list[str] | None = None) -> str:
    """The host time change between two neighbours, or which has no step markers (``host_step``)."""
    a, b = ld["rungs"][s["from"]], ld["rungs"][s["to"]]
    pair = (visible(names[s["from"]]), visible(names[s["to"]])) if names else ("A", "B")
    return host_step.host_delta(a, b, s["totals"]["cpu_delta_us"], pair)


def ladder_lines(ld: dict, names: list[str]) -> list[str]:
    """The rungs (a rung's name is never cut: its column is as wide as the longest), then the
    biggest changes between neighbours, each title fitted to a terminal, whole into a pipe."""
    w = max([14] + [len(visible(n)) for n in names])
    out = [f"{'per step':{w + 2}s} {'device µs':>11s}   kernels  launches  launch CPU µs    CPU µs   file"]
    for name, r in zip(names, ld["rungs"]):
        out.append(f"  {visible(name):{w}s} {r['device_us_per_step']:11,.1f} {r['kernels_per_step']:9d} "
                   f"{per_step(r['launches_per_step'], '.0f'):>9s} {per_step(r['launch_cpu_us_per_step']):>14s} "
                   f"{rung_cpu(r):>9s}   "
                   f"{visible(r['file'])}")
    for s in ld["steps"]:
        t = s["totals"]
        out.append(f"\n{visible(names[s['from']])} → {visible(names[s['to']])}: "
                   f"device {t['device_delta_us']:+,.1f} µs, "
                   f"kernels {t['kernels_a']} → {t['kernels_b']}, host time {host_delta(ld, s, names)}; "
                   f"unexplained rows {t['unexplained']}")
        for c in s["top"]:
            rep = f"  [{c['repeat']}]" if c["repeat"] else ""
            room = name_room(16 + len(c["label"]) + len(rep))
            out.append(f"  {c['delta_us']:+10.1f}  {c['label']}: {fit_arrow(visible(c['title']), room)}{rep}")
        for c in s["cpu_top"]:
            out.append(f"  {c['delta_us']:+10.1f}  CPU: {fit_arrow(visible(c['title']), name_room(19))}")
    return out
