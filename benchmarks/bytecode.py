"""Byte-compile the tracetui a benchmark runs, as Python itself does on a first import.

This VM sets PYTHONDONTWRITEBYTECODE=1, so without this every run compiled tracetui from
source, while Textual and numpy (installed by pip, which compiles) ran from bytecode: the
first screen paid ~0.06 s for it (first_screen_pty on the 270k-event replica, 7 rounds: 1.44
against 1.38 s), a cost a user's Python pays once. ``--cold`` in the benchmarks removes the
package's __pycache__ instead, so that cost is measured.
"""
from __future__ import annotations

import compileall
import importlib.util
import os
import shutil
import subprocess
import sys


def src_env(src: str) -> dict:
    """The environment that makes ``python -m tracetui`` import the checkout at ``src``."""
    # without PYTHONSAFEPATH, `-m` puts the working directory first on sys.path, ahead of
    # PYTHONPATH: run from a checkout, every --src ran that checkout's code
    return {"PYTHONPATH": os.path.abspath(src), "PYTHONSAFEPATH": "1"}


def package_dir(src: str | None = None) -> str:
    """The tracetui package that ``python -m tracetui`` imports with ``src_env(src)``."""
    if src is None:
        spec = importlib.util.find_spec("tracetui")
        if spec is None or spec.origin is None:
            raise SystemExit("tracetui is not installed")
        return os.path.dirname(spec.origin)
    env = {**os.environ, **src_env(src)}
    out = subprocess.run([sys.executable, "-c", "import tracetui; print(tracetui.__file__)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    return os.path.dirname(out)


def compile_package(src: str | None = None) -> str:
    """Write the package's .pyc files (next to the sources, in __pycache__); its directory."""
    where = package_dir(src)
    compileall.compile_dir(where, quiet=1)
    return where


def uncompile_package(src: str | None = None) -> str:
    """Remove the package's __pycache__ folders (only caches), so each start compiles it."""
    where = package_dir(src)
    for root, dirs, _ in os.walk(where):
        if "__pycache__" in dirs:
            shutil.rmtree(os.path.join(root, "__pycache__"))
            dirs.remove("__pycache__")
    return where
