"""What a list of paths opens as: the ranks of one job (or an index), or traces. Decided here, below
both front ends, so the CLI and the app's ctrl+o decide alike without the app importing the CLI."""
from __future__ import annotations

from pathlib import Path


def is_index(p: Path) -> bool:
    """A folder written by ``tracetui index`` (it holds the manifest)."""
    from tracetui.jobs.index import MANIFEST
    return (Path(p) / MANIFEST).exists()


def opens_job(paths) -> bool:
    """``tracetui PATH...`` opens the job view: an index, a folder of two or more ranks of one job,
    or two or more files that are distinct ranks of one job (anything else opens as before)."""
    if not paths:
        return False
    ps = [Path(p) for p in paths]
    if len(ps) == 1:
        p = ps[0]
        quoted_glob = not p.exists() and any(c in str(p) for c in "*?[")
        if not p.is_dir() and not quoted_glob:
            return False
        if p.is_dir() and is_index(p):
            return True
    from tracetui.jobs.ranks import is_job
    return is_job(ps)
