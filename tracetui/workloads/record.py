"""Profile a workload with torch.profiler and write a gzipped Kineto trace with its provenance."""
from __future__ import annotations

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

from ..atomic import write_all
from .models import Workload

PROVENANCE_KEY = "tracetui"
"""Top-level trace key holding how the trace was made (workload, impl, sizes, versions, device)."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def provenance(w: Workload, impl: str, device: str, dtype: torch.dtype, with_stack: bool) -> dict:
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


def record(w: Workload, impl: str, out: Path, device: str | None = None, dtype: torch.dtype | None = None,
           with_stack: bool = False, warmup_iters: int = 3, active: int = 3,
           save_key_averages: bool = True) -> Path:
    """Run ``w`` as ``impl`` under the profiler (wait 1, warmup 1, ``active`` steps) and write ``out``."""
    if impl not in w.impls:
        raise ValueError(f"workload {w.name!r} has no impl {impl!r} (choose from {', '.join(w.impls)})")
    device = device or default_device()
    if impl in ("triton", "fused") and device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"impl {impl!r} needs a CUDA device (or TRITON_INTERPRET=1 for the CPU interpreter)")
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
    torch.manual_seed(0)
    if impl == "compile" and device == "cpu":
        # Inductor's C++ kernels are invisible to the profiler unless asked to record themselves
        import torch._inductor.config as inductor_config
        inductor_config.cpp.enable_kernel_profile = True
    _say(f"[tracetui gen] building {w.name}/{impl} on {device} ({dtype}) sizes={w.sizes}")
    model, x = w.build(impl, device, dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        for i in range(warmup_iters):  # compile / autotune / cuBLAS handles outside the recording
            _say(f"[tracetui gen] warm-up {i + 1}/{warmup_iters}" + (" (compiling)" if impl == "compile" and i == 0 else ""))
            model(x)
        sync()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        sched = schedule(wait=1, warmup=1, active=active, repeat=1)
        with profile(activities=activities, schedule=sched, record_shapes=True, with_modules=True,
                     with_stack=with_stack) as prof:
            for step in range(2 + active):
                with record_function(w.label):
                    model(x)
                sync()
                prof.step()
                _say(f"[tracetui gen] step {step + 1}/{2 + active}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace = json.loads(raw.read_text(encoding="utf-8", errors="replace"))
    trace[PROVENANCE_KEY] = provenance(w, impl, device, dtype, with_stack)
    data = json.dumps(trace, separators=(",", ":")).encode()
    files = {out: gzip.compress(data, compresslevel=9) if str(out).endswith(".gz") else data}
    if save_key_averages:
        files[key_averages_path(out)] = json.dumps(key_averages_rows(prof), indent=0).encode()
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
            ("mlp", "fused", True)]


def ladder_filename(workload: str, impl: str, with_stack: bool = True) -> str:
    return f"{workload}_{impl}.json.gz"
