"""The model layer never imports Textual or Rich (the CLI and scripts use it without a UI)."""
import subprocess
import sys


def test_model_imports_no_ui():
    code = ("import sys, tracetui.model, tracetui.compare.diff, tracetui.report.summary, tracetui.report.tree, tracetui.report.diff, tracetui.report.memory; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; print(bad); "
            "sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
