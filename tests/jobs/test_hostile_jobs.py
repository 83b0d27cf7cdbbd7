"""Issue 35's findings on job folders and indexes: one small hostile file must never OOM, hang or
give a traceback in `ranks`, `index`, `ranks INDEX` or MCP `ranks`. Each case failed before its
fix; expected figures are computed here from the files the test writes."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracetui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _events(r: int, seq=None, nelems=None) -> list:
    """A step with one gloo all-reduce in it (the collective's args as given)."""
    args = {"dtype": "Float"}
    if seq is not None:
        args["Seq"] = seq
    if nelems is not None:
        args["In msg nelems"] = nelems
    return [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 10, "dur": 100, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 12, "dur": 5, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 20 + r, "dur": 50, "pid": 1,
             "tid": 2, "args": args}]


def _rank(folder: Path, r: int, world=2, base=1_700_000_000_000_000_000, info=True, **kw) -> Path:
    doc = {"host_name": "h", "baseTimeNanoseconds": base, "traceEvents": _events(r, **kw)}
    if info:
        doc["distributedInfo"] = {"backend": "gloo", "rank": r, "world_size": world}
    p = folder / f"rank{r}.pt.trace.json"
    p.write_text(json.dumps(doc))
    return p


def _cli(args: list, cwd=None, limit_as: int | None = None, limit_fsize: int | None = None, timeout=60):
    """``tracetui ARGS`` in a child under resource limits: (exit code, stdout, stderr lines)."""
    def limits():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
        if limit_fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "tracetui", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, preexec_fn=limits, env=env)
    return r.returncode, r.stdout, r.stderr.strip().splitlines()


def _one_line(err: list, *words) -> None:
    assert len(err) == 1 and err[0].startswith("tracetui: error: "), err
    assert "Traceback" not in err[0]
    for w in words:
        assert w in err[0], err


# ---------------------------------------------------------------- declared sizes
def test_a_billion_world_size_allocates_nothing_of_its_size(tmp_path):
    """One of eight files says world_size 1e9 (the rest carry their rank in their names only):
    under a 1.5 GB address-space limit `ranks` answers, and counts the ranks missing from the gaps."""
    world = 10**9
    for r in range(8):
        _rank(tmp_path, r, world=world, info=(r == 3))
    big = tmp_path / "rank3.pt.trace.json"
    assert big.stat().st_size < 600
    code, out, err = _cli(["ranks", tmp_path, "--json", "--workers", "1"], limit_as=1500 << 20)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["world_size"] == world and doc["ranks"] == 8
    assert f"{world - 8:,} of {world:,} ranks missing: 8-{world - 1}" in doc["diagnostics"]
    code, out, err = _cli(["index", tmp_path, "-o", tmp_path.parent / "big.idx", "--workers", "1"],
                          limit_as=2500 << 20)
    assert code == 0, err


def test_a_billion_world_size_in_mcp_ranks(tmp_path):
    for r in range(4):
        _rank(tmp_path, r, world=10**9, info=(r == 0))
    code = ("import json, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1500 << 20, 1500 << 20)); "
            "from tracetui.mcp import tools; d = tools.ranks([sys.argv[1]], section='diagnostics'); "
            "print(json.dumps(d))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert any(f"{10**9 - 4:,} of" in d for d in json.loads(r.stdout)["diagnostics"])


@pytest.mark.parametrize("field,value", [("rank", 2**70), ("rank", -1), ("rank", True), ("world_size", 2**70),
                                         ("world_size", 0), ("world_size", -5)])
def test_a_rank_or_world_past_int32_is_not_taken(tmp_path, capsys, field, value):
    """``distributedInfo.rank`` 2**70 was an integer orjson could not write (a traceback from
    ``ranks --json``); such a value is not taken, and said."""
    for r in range(2):
        _rank(tmp_path, r)
    doc = json.loads((tmp_path / "rank1.pt.trace.json").read_text())
    doc["distributedInfo"][field] = value
    (tmp_path / "rank1.pt.trace.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["ranks", str(tmp_path), "--json", "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(abs(p["rank"]) < 2**31 for p in out["per_rank"])
    if field == "rank" and value is not True:
        assert any(d.startswith(f"rank1.pt.trace.json: distributedInfo.rank {value}") for d in out["diagnostics"]), \
            out["diagnostics"]
        assert [p["rank"] for p in out["per_rank"]] == [0, 1]  # placed from its file name instead
    if field == "world_size":
        assert any(f"distributedInfo.world_size {value} is not a world size" in d for d in out["diagnostics"])


@pytest.mark.parametrize("key,value", [("Seq", 2**70), ("In msg nelems", 2**70), ("Seq", -(2**70))])
def test_an_integer_past_64_bits_in_a_collective(tmp_path, capsys, key, value):
    """A collective's ``Seq`` or element count past int64 reads as unknown: `ranks --json` and
    `index` answer (it was orjson's 'Integer exceeds 64-bit range' traceback)."""
    for r in range(2):
        _rank(tmp_path, r, **({"seq": value} if key == "Seq" else {"nelems": value}))
    capsys.readouterr()
    assert main(["ranks", str(tmp_path), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["collectives"]) == 1 and doc["collectives"][0]["ranks"] == 2
    assert doc["collectives"][0]["msg_bytes"] is None if key != "Seq" else True
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    assert main(["index", str(tmp_path), "-o", str(tmp_path.parent / "i.idx"), "--workers", "1"]) == 0


def test_a_base_time_near_2_63_is_not_applied(tmp_path, capsys):
    """``baseTimeNanoseconds`` 2**63 - 1000 carried every time past int64 (an OverflowError
    traceback from `ranks` and `index`): the base is not applied, and said."""
    _rank(tmp_path, 0, base=2**63 - 1000)
    _rank(tmp_path, 1)
    capsys.readouterr()
    assert main(["ranks", str(tmp_path), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("baseTimeNanoseconds 9,223,372,036,854,774,808 carries its times past the int64 range" in d
               for d in doc["diagnostics"]), doc["diagnostics"]
    rows = {p["rank"]: p for p in doc["collectives"][0]["per_rank"]}
    assert rows[0]["start_us"] == 20.0  # as recorded: ts 20 µs, no base
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    out = tmp_path.parent / "b.idx"
    assert main(["index", str(tmp_path), "-o", str(out), "--workers", "1"]) == 0
    assert main(["ranks", str(out), "--json"]) == 0


def test_a_symlink_loop_beside_good_ranks_is_named_and_skipped(tmp_path, capsys):
    """It rejected the whole job with 'no such file'."""
    files = [_rank(tmp_path, r) for r in range(2)]
    loop = tmp_path / "rank_7.pt.trace.json"
    loop.symlink_to(loop.name)
    capsys.readouterr()
    assert main(["ranks", *map(str, files), str(loop), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["rank"] for p in doc["per_rank"]] == [0, 1]
    assert any(d.startswith("rank 7 (rank_7.pt.trace.json): skipped: ") and "loop" in d
               for d in doc["diagnostics"]), doc["diagnostics"]
    # alone, it is still the one-line error
    assert main(["ranks", str(loop)]) == 2
    _one_line(capsys.readouterr().err.strip().splitlines(), "rank_7.pt.trace.json", "loop")


def test_a_rank_number_past_int32_in_a_file_name_is_not_taken(tmp_path, capsys):
    files = [_rank(tmp_path, r, info=False) for r in range(2)]
    big = tmp_path / ("rank" + "9" * 30 + ".pt.trace.json")
    files[1].rename(big)
    capsys.readouterr()
    assert main(["ranks", str(files[0]), str(big), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["rank"] for p in doc["per_rank"]] == [0]
    assert any("past 2,147,483,647: not taken" in d for d in doc["diagnostics"]), doc["diagnostics"]


JOB_VIEW = """
import asyncio, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2500 << 20, 2500 << 20))
from tracetui.ui.app import TraceApp
from tracetui.ui.job_view import JobScreen

async def run():
    app = TraceApp([sys.argv[1]], job=True)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(1500):
            if isinstance(app.screen, JobScreen) and app.screen.doc is not None:
                break
            await pilot.pause(0.02)
        print(str(app.screen.query_one("#job-head").render()))
asyncio.run(run())
"""


def test_a_billion_world_size_in_the_job_view(tmp_path):
    """The app's job view on the same kind of folder, under a 2.5 GB address-space limit: it opens."""
    for r in range(4):
        _rank(tmp_path, r, world=10**9, info=(r == 0))
    r = subprocess.run([sys.executable, "-c", JOB_VIEW, str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "4 ranks of 1000000000" in r.stdout, r.stdout


# ---------------------------------------------------------------- the index
pa = pytest.importorskip  # (the index tests below need the dist extra)


@pytest.fixture()
def job(tmp_path) -> list[Path]:
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    d = tmp_path / "job"
    d.mkdir()
    return [_rank(d, r) for r in range(2)]


def _build(job, out, capsys=None) -> int:
    return main(["index", *map(str, job), "-o", str(out), "--workers", "1"])


def _state(out: Path) -> dict:
    return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}


@pytest.mark.parametrize("bad", [
    {"version": "3"}, {"version": True}, {"world_size": "8"}, {"ranks": {"0": 1}}, {"ranks": [1, 2]},
    {"ranks": [{"rank": "0", "file": "x"}]}, {"diagnostics": 5}, {"diagnostics": [1]}, {"tables": None},
])
def test_a_manifest_of_wrong_types_is_one_line(job, tmp_path, capsys, bad):
    from tracetui.jobs import index as ix
    out = tmp_path / "m.idx"
    assert _build(job, out) == 0
    man = json.loads((out / ix.MANIFEST).read_text())
    man.update(bad)
    (out / ix.MANIFEST).write_text(json.dumps(man))
    capsys.readouterr()
    assert main(["ranks", str(out)]) == 2
    _one_line(capsys.readouterr().err.strip().splitlines(), "rebuild it with tracetui index")


def test_a_manifest_that_is_a_list_or_deep_is_one_line(job, tmp_path, capsys):
    from tracetui.jobs import index as ix
    out = tmp_path / "m.idx"
    assert _build(job, out) == 0
    for text in ("[]", "[" * 100_000 + "]" * 100_000, "\xff"):
        (out / ix.MANIFEST).write_text(text, errors="surrogateescape")
        capsys.readouterr()
        assert main(["ranks", str(out)]) == 2
        _one_line(capsys.readouterr().err.strip().splitlines())


def test_output_on_a_read_only_folder_is_one_line(job, tmp_path, capsys, monkeypatch):
    """Root ignores permissions, so the read-only mount is the OS's answer to mkdir, patched in."""
    import errno
    out = tmp_path / "ro.idx"
    assert _build(job, out) == 0
    before = _state(out)
    real = os.mkdir

    def read_only(path, *a, **k):
        if str(path).startswith(str(tmp_path / ".ro.idx")):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "mkdir", read_only)
    capsys.readouterr()
    assert _build(job, out) == 2
    _one_line(capsys.readouterr().err.strip().splitlines(), str(out), "cannot write the index: Read-only file system")
    assert _state(out) == before


def test_a_full_disk_is_one_line_and_leaves_the_old_index(job, tmp_path):
    """A file size limit (RLIMIT_FSIZE: EFBIG on the write, as a full disk gives ENOSPC) fails
    the build in one line; the old index is whole and no temporary folder is left."""
    out = tmp_path / "full.idx"
    assert _build(job, out) == 0
    before = _state(out)
    code, _, err = _cli(["index", *job, "-o", out, "--workers", "1"], limit_fsize=2000)
    assert code == 2
    _one_line(err, str(out), "cannot write the index")
    assert _state(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".full.idx")) == [os.readlink(out)]


@pytest.mark.parametrize("name", [".", ".."])
def test_output_dot_and_dot_dot_are_one_line(job, tmp_path, name):
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    (cwd / "keep.txt").write_text("mine")
    code, _, err = _cli(["index", *job, "-o", name, "--workers", "1"], cwd=cwd)
    assert code == 2
    _one_line(err, "not replaced")
    assert (cwd / "keep.txt").read_text() == "mine"


def test_output_that_holds_the_inputs_is_refused(job, capsys):
    capsys.readouterr()
    assert _build(job, job[0].parent) == 2
    _one_line(capsys.readouterr().err.strip().splitlines(), "holds the job's own traces")
    assert all(p.exists() for p in job)


def test_kill_9_mid_build_leaves_litter_the_next_build_cleans(job, tmp_path):
    """A build killed with SIGKILL leaves its .building-PID folder (nothing can remove it then),
    and the old index whole; the next build removes the folder."""
    out = tmp_path / "k.idx"
    assert _build(job, out) == 0
    before = _state(out)
    slow = tmp_path / "slow.py"  # a build whose ranks take long to load: killed while it builds
    slow.write_text("import sys, time\nfrom tracetui.jobs import tables\nreal = tables.rank_tables\n"
                    "tables.rank_tables = lambda *a: (time.sleep(60), real(*a))[1]\n"
                    "from tracetui.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    p = subprocess.Popen([sys.executable, str(slow), "index", *map(str, job), "-o", str(out), "--workers", "1"],
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    litter = tmp_path / f".k.idx.building-{p.pid}"
    deadline = time.monotonic() + 60
    while not litter.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert litter.exists()
    assert _state(out) == before  # the reader's index is the old one, whole
    assert _build(job, out) == 0
    assert not litter.exists()
    assert not [q for q in tmp_path.iterdir() if ".building-" in q.name]


def test_the_swap_is_one_rename_of_a_link(job, tmp_path, monkeypatch):
    """-o is a link to a version folder; at every rename of a rebuild, a reader finds a whole
    index at -o (before: the old one was renamed away, then the new one in)."""
    from tracetui.jobs import index as ix
    out = tmp_path / "s.idx"
    assert _build(job, out) == 0
    assert out.is_symlink()
    first = os.readlink(out)
    seen = []
    real = os.replace

    def watched(a, b):
        seen.append((ix.read_manifest(out)["version"], (out / "collectives.parquet").is_file()))
        real(a, b)
        seen.append((ix.read_manifest(out)["version"], (out / "collectives.parquet").is_file()))

    monkeypatch.setattr(os, "replace", watched)
    assert _build(job, out) == 0
    monkeypatch.undo()
    assert seen and all(v == ix.INDEX_VERSION and ok for v, ok in seen)
    assert os.readlink(out) != first
    assert (tmp_path / first).is_dir()  # the previous version stays for a reader still on it
    assert _build(job, out) == 0
    assert not (tmp_path / first).exists()  # and goes at the build after


def test_a_user_symlink_to_an_index_stays_a_link(job, tmp_path, capsys):
    real = tmp_path / "data" / "real.idx"
    real.parent.mkdir()
    assert _build(job, real) == 0
    mine = tmp_path / "mine.idx"
    mine.symlink_to(real)
    assert _build(job, mine) == 0
    assert mine.is_symlink() and os.readlink(mine) == str(real)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mine.idx")]  # nothing built beside the link
    capsys.readouterr()
    assert main(["ranks", str(mine), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"] == 2


@pytest.mark.parametrize("what", ["info.parquet", "collectives.parquet", "tracetui-index.json"])
def test_a_fifo_inside_an_index_is_refused_not_opened(job, tmp_path, what):
    """DuckDB opened a FIFO in place of a table and waited for a writer forever."""
    out = tmp_path / "f.idx"
    assert _build(job, out) == 0
    (out / what).unlink()
    os.mkfifo(out / what)
    code, _, err = _cli(["ranks", out], timeout=30)
    assert code == 2
    _one_line(err, f"{what} is a FIFO, not a file")
    from tracetui.jobs import index as ix
    from tracetui.read.errors import TraceError
    if what != "info.parquet" or True:
        with pytest.raises(TraceError):
            ix.straggler_query(out)


def test_a_device_inside_an_index_is_refused(job, tmp_path):
    out = tmp_path / "d.idx"
    assert _build(job, out) == 0
    (out / "steps.parquet").unlink()
    (out / "steps.parquet").symlink_to("/dev/zero")
    code, _, err = _cli(["ranks", out], timeout=30)
    assert code == 2
    _one_line(err, "steps.parquet is a device, not a file")
