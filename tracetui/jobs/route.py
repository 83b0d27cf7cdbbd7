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
        try:
            exists, is_dir = p.exists(), p.is_dir()
        except OSError:  # a name longer than the system allows: not a job; the load says why
            return False
        quoted_glob = not exists and any(c in str(p) for c in "*?[")
        if not is_dir and not quoted_glob:
            return False
        if is_dir and is_index(p):
            return True
    from tracetui.jobs.ranks import is_job
    return is_job(ps)
