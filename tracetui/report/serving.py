"""Serving steps and CUDA graphs in the summary: each step's label, the per-phase figures, and
the figures a hidden graph makes unknown (null in JSON, "unknown" in text)."""
from __future__ import annotations

from tracetui.model.trace import Trace
from tracetui.report.output import US, short_name, write_line
from tracetui.textsafe import visible

UNKNOWN_WHEN_HIDDEN = ("gpu_busy_us", "other_steps_us", "gpu_idle_us", "idle_split_us", "busy_by_class_us",
                       "comm_exposed_us", "comm_overlapped_us")
"""A step whose CUDA-graph work is hidden (model/graphs.py) has these figures unknown: JSON null."""


def honest(t: Trace, step: int, row: dict) -> dict:
    """The step's serving label, its graph launches, and null for what a hidden graph makes unknown."""
    lab = t.step_labels.get(step)
    row["label"] = {**lab.as_dict(), "text": lab.text} if lab is not None else None
    gaps = t.graph_gaps.by_step.get(step)
    row["graphs"] = {**gaps.as_dict(), "note": gaps.note() or None} if gaps is not None else None
    if gaps is not None and gaps.incomplete:
        row.update({k: None for k in UNKNOWN_WHEN_HIDDEN})
    return row


def serving_phases(t: Trace, top: int = 5) -> list[dict]:
    """Per phase (prefill / decode / mixed …): steps, device µs, kernels, top kernels (µs)."""
    return [{"phase": f["phase"], "steps": f["steps"], "unknown_steps": f["unknown_steps"],
             "device_us": round(f["device_ns"] * US, 3), "kernels": f["kernels"], "batch_mean": f["batch_mean"],
             "top_kernels": [{"name": k["name"], "count": k["count"], "device_us": round(k["device_ns"] * US, 3)}
                             for k in f["top_kernels"]]}
            for f in t.phase_figures(top)]


def cuda_graphs(t: Trace) -> dict | None:
    """Graph launches, those with no kernels linked, and how many steps that leaves unknown."""
    g = t.graph_gaps
    return {**g.as_dict(), "note": g.summary()} if g.launches else None


def hidden_note(d: dict, first: bool = False) -> str:
    """After a kernel list's title: the list holds recorded work only where a graph hid some."""
    if first:
        g = d["per_step"][0].get("graphs") if d["per_step"] else None
        return " (recorded work only: this step's CUDA graph work is hidden)" if g and g["incomplete"] else ""
    g = d["cuda_graphs"]
    return (f" (recorded work only: CUDA graph work hidden in {g['incomplete_steps']} step(s))"
            if g and g["incomplete_steps"] else "")


def marker_lines(d: dict) -> list[str]:
    """Under 'steps:': the hint when there are none, and the CUDA graphs line."""
    out = []
    if d["step_marker"]["hint"]:
        out.append(f"  {d['steps']} steps; {visible(d['step_marker']['hint'])}")
    if d["cuda_graphs"]:
        out.append(f"  {d['cuda_graphs']['note']}")
    return out


def step_line(s: dict, w: int) -> str:
    """One per-step row of the text summary; a step whose graph work is hidden says "unknown"."""
    head = f"  {visible(s['name']):{w}s} {s['window_us']:9.1f} "
    tail = (f" {s['launch_cpu_us']:11.1f} {s['sync_cpu_us']:9.1f} {s['kernels']:7d}  {s['verdict']}"
            + (f"  {s['label']['text']}" if s.get("label") else ""))
    if s["gpu_idle_us"] is None:
        return head + f"{'unknown (CUDA graph work hidden)':>54s}" + tail
    sp = s["idle_split_us"]
    return (head + f"{s['gpu_busy_us']:9.1f} {s['other_steps_us']:10.1f} {s['gpu_idle_us']:11.1f} "
            f"({sp['host_wait']:.1f}/{sp['kernel_wait']:.1f}/{sp['other']:.1f})" + tail)


def print_phases(phases: list[dict]) -> None:
    """Per phase of a serving trace: steps, device time, kernels and its top kernels."""
    if not phases:
        return
    write_line("\nper phase (steps labelled by the engine's annotation; µs)")
    for f in phases:
        bs = f" · mean batch {f['batch_mean']:g}" if f["batch_mean"] is not None else ""
        unk = f" · {f['unknown_steps']} step(s) left out: CUDA graph work hidden" if f["unknown_steps"] else ""
        write_line(f"  {f['phase']}: {f['steps']} step(s){bs} · device {f['device_us']:,.1f} · {f['kernels']} kernels{unk}")
        for k in f["top_kernels"]:
            write_line(f"    {k['count']:6d} {k['device_us']:10.1f}  {visible(short_name(k['name']))}")
