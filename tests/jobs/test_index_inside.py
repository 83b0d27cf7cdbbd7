"""`tracetui index -o .` run inside an index's version folder (issue 44, item 16): the build named
its own version after the version folder (``..job.idx.v-…v-…``) and turned that folder into a link
to it, a folder no later build removed. Now it is refused in one line and nothing is written."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tracetui", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=180)


def _listing(folder):
    return sorted((p.name, p.is_symlink(), os.readlink(p) if p.is_symlink() else None) for p in folder.iterdir())


@pytest.mark.parametrize("inside", ["version", "leftover build"])
def test_index_o_dot_inside_an_index_is_refused(tmp_path, inside):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        doc = {"distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2}, "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 50}]}
        (ranks / f"host.rank{r}.pt.trace.json").write_text(json.dumps(doc))
    r = _cli("index", "-o", "job.idx", "ranks", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    version = tmp_path / os.readlink(tmp_path / "job.idx")
    if inside == "leftover build":  # what a build killed mid-way leaves
        version = tmp_path / f".job.idx.building-{2 ** 22 + 12345}"
        version.mkdir()
        (version / "tracetui-index.json").write_text("{}")
    before, inner = _listing(tmp_path), _listing(version)
    r = _cli("index", "-o", ".", "../ranks", cwd=version)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "-o job.idx" in lines[0], r.stderr
    assert _listing(tmp_path) == before and _listing(version) == inner
    # and the index itself still answers
    r = _cli("ranks", "--json", "job.idx", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["ranks"] == 2, r.stderr
