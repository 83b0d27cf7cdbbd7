"""The many-ranks modules are model code: no Textual or Rich; and the dist extra (pyarrow, duckdb,
ray) is imported only by what needs it, so `tracetui ranks` on traces works without it."""
import subprocess
import sys


def test_ranks_modules_import_no_ui_and_no_dist():
    code = ("import sys, tracetui.jobs.ranks, tracetui.jobs.collectives, tracetui.jobs.pool, "
            "tracetui.jobs.index, tracetui.report.ranks, tracetui.cli.ranks; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'pyarrow', 'duckdb', 'ray')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
