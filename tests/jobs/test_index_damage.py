"""A damaged index (a table file missing, not Parquet, truncated) is one line naming the index and
the table, exit 2, on every query path: `tracetui ranks INDEX`, the straggler query, the app's."""
from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from tracetui.cli.main import main
from tracetui.jobs import index as ix
from tracetui.read.errors import TraceError


@pytest.fixture(scope="module")
def small_index(gen_job, tmp_path_factory):
    out = tmp_path_factory.mktemp("idx") / "job.idx"
    assert main(["index", *map(str, gen_job["files"][:2]), "-o", str(out), "--workers", "1"]) == 0
    return out


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


DAMAGE = {
    "missing": ("collectives", lambda p: p.unlink()),
    "garbage": ("steps", lambda p: p.write_bytes(b"not parquet\n")),
    "truncated": ("collectives", _truncate),
    "info": ("info", _truncate),
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_table_is_one_line_naming_it(small_index, tmp_path, capsys, how):
    table, damage = DAMAGE[how]
    broken = tmp_path / "broken"
    shutil.copytree(small_index, broken)
    f = broken / f"{table}.parquet"
    assert f.exists()
    damage(f)
    snapshot = {p.name: p.read_bytes() for p in broken.glob("*.parquet")}
    capsys.readouterr()
    assert main(["ranks", str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tracetui: error: {broken}: table {table} unreadable (")
    assert err[0].endswith("rebuild it with tracetui index")
    assert "Traceback" not in err[0]
    if table in ("collectives", "info"):  # the straggler query reads those two
        with pytest.raises(TraceError) as e:
            ix.straggler_query(broken)
        assert f"table {table} unreadable" in str(e.value)
    assert {p.name: p.read_bytes() for p in broken.glob("*.parquet")} == snapshot  # never modified


def test_an_index_of_another_version_says_so(small_index, tmp_path, capsys):
    import json
    old = tmp_path / "old"
    shutil.copytree(small_index, old)
    man = json.loads((old / ix.MANIFEST).read_text())
    man["version"] = ix.INDEX_VERSION - 1
    (old / ix.MANIFEST).write_text(json.dumps(man))
    capsys.readouterr()
    assert main(["ranks", str(old)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tracetui: error: {old}: index version {ix.INDEX_VERSION - 1}, this tracetui reads version "
                   f"{ix.INDEX_VERSION}: rebuild it with tracetui index"]
