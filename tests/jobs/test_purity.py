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


def _jobs_modules():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "tracetui" / "jobs"
    return {f"tracetui.jobs.{p.stem}": p for p in sorted(root.glob("*.py")) if p.stem != "__init__"}


def test_no_import_circle_in_jobs():
    """Every import between the jobs modules (function-level ones too) as a graph: no cycle
    (pool <-> ranks was one: pool.map_ranks imported ranks.load_rank, ranks.discover pool.run_map; the pool is now a generic map that imports no jobs module)."""
    import ast
    mods = _jobs_modules()
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            edges[m] |= {n for n in names if n in mods and n != m}
    state: dict = {}

    def visit(m, path):
        state[m] = 1
        for n in edges[m]:
            assert state.get(n) != 1, "import circle: " + " -> ".join(path + [m, n])
            if n not in state:
                visit(n, path + [m])
        state[m] = 2

    for m in mods:
        if m not in state:
            visit(m, [])
