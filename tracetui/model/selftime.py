"""Which CPU self-time rule the recording's torch used, so self times match its ``key_averages()``.

torch <= 2.12 leaves Python frames (``with_stack``) out of its event tree: an op's self time is
its duration minus its ATen/runtime children, however deep the frames between them. torch >= 2.13
nests ops under the frames, so a step's or annotation's self time excludes the frames directly
under it instead. The rule changes only traces that hold Python frames.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

FRAMES_OWN_TIME_FROM = (2, 13)
"""First torch version whose profiler tree nests ops under Python frames."""


@dataclass(frozen=True)
class SelfTimeRule:
    frames_own_time: bool
    reason: str

    @property
    def label(self) -> str:
        return "torch >= 2.13 (Python frames own time)" if self.frames_own_time else "torch <= 2.12 (ops only)"


def parse_version(v) -> tuple[int, int] | None:
    """(major, minor) of a version such as ``2.13``, ``2.13.0+cpu``; None when it is not one."""
    m = re.match(r"^\s*(\d+)\.(\d+)", str(v)) if v is not None else None
    return (int(m[1]), int(m[2])) if m else None


def self_time_rule(meta: dict, has_frames: bool, torch_version: str | None = None) -> SelfTimeRule:
    """The rule for one recording, tried in order: a version the user gave, the torch version the
    recorder wrote in the trace (``tracetui`` provenance), the torch installed here (a trace is
    mostly read where it was recorded, over SSH on the training host: a plain
    ``export_chrome_trace`` of torch 2.13 carries no version, and the older rule put its
    annotations' self times 4x off its own ``key_averages()``), else the older rule, which every
    archived trace without a version was recorded with (the newer rule only exists since torch
    2.13). Traces without Python frames get the same numbers either way."""
    if not has_frames:
        return SelfTimeRule(False, "no Python frames in the trace: both rules agree")
    prov = meta.get("tracetui") if isinstance(meta.get("tracetui"), dict) else {}
    for source, v in (("--torch-version", torch_version), ("recorded torch version", prov.get("torch"))):
        ver = parse_version(v)
        if ver is not None:
            return SelfTimeRule(ver >= FRAMES_OWN_TIME_FROM, f"{source} {v}")
    here = installed_torch()
    ver = parse_version(here)
    if ver is not None:
        return SelfTimeRule(ver >= FRAMES_OWN_TIME_FROM,
                            f"torch version not recorded: that of the torch installed here, {here} "
                            "(pass --torch-version to change)")
    return SelfTimeRule(False, "torch version not recorded: assumed <= 2.12 (pass --torch-version to change)")


def installed_torch() -> str | None:
    """The version of the torch installed in this environment, from its package metadata (torch
    is not imported: a few ms), or None where it is not installed."""
    try:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - only when a trace has frames
    except ImportError:
        return None
    try:
        return version("torch")
    except (PackageNotFoundError, ValueError, OSError):
        return None
