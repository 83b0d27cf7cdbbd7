"""Profile a workload with torch.profiler and write a gzipped Kineto trace with its provenance."""
from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tracetui.atomic import target_kind, write_all
from tracetui.workloads.models import COMPILED, Workload

NEEDS_TRITON = ("triton", "fused", "fused-compile", "fused-graphs")
"""Impls that run our Triton kernels: a CUDA device, or the CPU interpreter (TRITON_INTERPRET=1)."""

PROVENANCE_KEY = "tracetui"
"""Top-level trace key holding how the trace was made (workload, impl, sizes, versions, device)."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


STEP_MARKERS = ("profiler", "record_function")
"""How steps are marked: ``profiler`` = a schedule and ``prof.step()`` (``ProfilerStep#N``);
``record_function`` = no schedule, no ``ProfilerStep`` at all, each step inside
``record_function(f"train_step_{i}")`` (``infer_step_{i}`` for inference rungs), as many
training loops mark their steps."""


def provenance(w: Workload, impl: str, device: str, dtype: torch.dtype, with_stack: bool,
               mode: str | None = None, step_marker: str = "profiler", memory: bool = False,
               backward_thread: bool = False) -> dict:
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # triton is optional on CPU-only machines
        triton_version = None
    return {
        "workload": w.name, "impl": impl, "sizes": w.sizes, "dtype": str(dtype).replace("torch.", ""),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "device_type": device, "torch": torch.__version__, "triton": triton_version,
        "cuda": torch.version.cuda if device == "cuda" else None, "with_stack": with_stack,
        "train": w.train, "compile_mode": mode if impl == "compile" else None, "step_marker": step_marker,
        "profile_memory": memory, "backward_thread": backward_thread,
        "python": platform.python_version(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["tracetui"] + sys.argv[1:]) if sys.argv else None,
    }


def key_averages_rows(prof) -> list[dict]:
    """torch.profiler's own per-name aggregates, kept beside the trace to check our numbers against."""
    rows = []
    for e in prof.key_averages():
        rows.append({
            "name": e.key, "count": e.count,
            "cpu_total_us": e.cpu_time_total, "cpu_self_us": e.self_cpu_time_total,
            "device_total_us": getattr(e, "device_time_total", 0.0),
            "device_self_us": getattr(e, "self_device_time_total", 0.0),
        })
    return rows


def read_key_averages(path: Path) -> tuple[list[dict], str | None]:
    """(rows, torch version) of a sidecar: ``{"torch": ..., "rows": [...]}``, or a bare list of
    rows as the first recordings wrote it (version unknown there: it is in the trace's provenance)."""
    doc = json.loads(Path(path).read_text())
    if isinstance(doc, list):
        return doc, None
    return doc["rows"], doc.get("torch")


def record(w: Workload, impl: str, out: Path, device: str | None = None, dtype: torch.dtype | None = None,
           with_stack: bool = False, warmup_iters: int = 3, active: int = 3,
           save_key_averages: bool = True, mode: str | None = None, step_marker: str = "profiler",
           memory: bool = False, backward_thread: bool = False) -> Path:
    """Run ``w`` as ``impl`` under the profiler and write ``out``.

    ``step_marker="profiler"``: schedule wait 1, warmup 1, ``active`` steps, ``ProfilerStep#N``.
    ``"record_function"``: ``active`` steps, each in ``record_function("train_step_<i>")``.
    ``mode``: torch.compile's mode; ``memory``: ``profile_memory=True``; ``backward_thread``: run
    backward on a torch thread (CPU only: CUDA autograd already has its own thread).
    """
    if impl not in w.impls:
        raise ValueError(f"workload {w.name!r} has no impl {impl!r} (choose from {', '.join(w.impls)})")
    if step_marker not in STEP_MARKERS:
        raise ValueError(f"step marker {step_marker!r} is not one of {', '.join(STEP_MARKERS)}")
    if mode is not None and impl not in COMPILED:
        raise ValueError(f"a compile mode needs --impl {' or '.join(COMPILED)} (got {impl!r})")
    device = device or default_device()
    if impl == "fused-graphs" and device != "cuda":
        raise ValueError("impl 'fused-graphs' needs a CUDA device (CUDA graphs)")
    if impl in NEEDS_TRITON and device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"impl {impl!r} needs a CUDA device (or TRITON_INTERPRET=1 for the CPU interpreter)")
    if backward_thread and not w.train:
        raise ValueError(f"workload {w.name!r} runs no backward (transformer trains, and mlp with --train)")
    if backward_thread and device == "cuda":
        raise ValueError("backward on its own thread is for the CPU: on CUDA autograd's thread already runs it")
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
    torch.manual_seed(0)
    if impl in COMPILED and device == "cpu":
        # Inductor's C++ kernels are invisible to the profiler unless asked to record themselves
        import torch._inductor.config as inductor_config
        inductor_config.cpp.enable_kernel_profile = True
    _say(f"[tracetui gen] building {w.name}/{impl}{f' ({mode})' if mode else ''} on {device} ({dtype}) "
         f"sizes={w.sizes}")
    step = w.stepper(impl, device, dtype, mode=mode, backward_thread=backward_thread)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    label = (lambda: record_function(w.label)) if w.label else contextlib.nullcontext
    with (contextlib.nullcontext() if w.train else torch.no_grad()):
        for i in range(warmup_iters):  # compile / autotune / cuBLAS handles outside the recording
            _say(f"[tracetui gen] warm-up {i + 1}/{warmup_iters}" + (" (compiling)" if impl in COMPILED and i == 0 else ""))
            step()
        sync()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        options = dict(activities=activities, record_shapes=True, with_modules=True, with_stack=with_stack,
                       profile_memory=memory)
        if step_marker == "profiler":
            with profile(schedule=schedule(wait=1, warmup=1, active=active, repeat=1), **options) as prof:
                for i in range(2 + active):
                    with label():
                        step()
                    sync()
                    prof.step()
                    _say(f"[tracetui gen] step {i + 1}/{2 + active}")
        else:
            prefix = "train_step" if w.train else "infer_step"
            with profile(**options) as prof:
                for i in range(active):
                    with record_function(f"{prefix}_{i}"):
                        with label():
                            step()
                        sync()
                    _say(f"[tracetui gen] step {i + 1}/{active}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace = json.loads(raw.read_text(encoding="utf-8", errors="replace"))
    trace[PROVENANCE_KEY] = provenance(w, impl, device, dtype, with_stack, mode, step_marker, memory,
                                       backward_thread)
    data = json.dumps(trace, separators=(",", ":")).encode()
    files = {out: gzip.compress(data, compresslevel=9) if str(out).endswith(".gz") else data}
    if save_key_averages and target_kind(out) != "through":  # -o /dev/null: no sidecar beside it in /dev
        files[key_averages_path(out)] = json.dumps({"torch": torch.__version__, "rows": key_averages_rows(prof)},
                                                   indent=0).encode()
    write_all(files)  # both or neither: a full disk leaves no truncated trace, no empty sidecar
    return out


def key_averages_path(trace: Path) -> Path:
    """Where ``record`` keeps key_averages() for ``trace``: ``<name>.key_averages.json`` beside it."""
    name = Path(trace).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return Path(trace).with_name(name + ".key_averages.json")


def ladder() -> list[tuple[str, str, bool]]:
    """(workload, impl, with_stack) of every trace ``gen --all`` records.

    All with stacks: on torch 2.11 ``with_modules`` alone records no ``nn.Module`` scopes for eager
    modules (seen in our first H200 recording), and the module scopes are the top of the story.
    """
    return [("linear", "eager", True), ("linear", "compile", True),
            ("mlp", "eager", True), ("mlp", "compile", True), ("mlp", "triton", True),
            ("mlp", "fused", True), ("mlp", "fused-compile", True), ("mlp", "fused-graphs", True)]


def ladder_filename(workload: str, impl: str, with_stack: bool = True) -> str:
    return f"{workload}_{impl}.json.gz"
