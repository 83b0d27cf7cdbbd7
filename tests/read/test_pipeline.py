"""Issue 34: loading is stages. Following ``load_trace(path)`` through the calls its pipeline
functions make, each stage is one file entered once, in order: resolve the input and read its
bytes (read/source.py) -> decode strategy -> events -> store (read/load.py) -> step markers ->
self-time rule -> tree -> rollups and step windows, side by side (model/, in read/together.py's
threads)."""
from __future__ import annotations

import os
import sys
import threading

import pytest

import tracetui
from tracetui.model import load_trace
from tracetui.model import trace as trace_mod
from tracetui.read import load as load_mod

from tests.conftest import TRACES

ROOT = os.path.dirname(tracetui.__file__)
PIPELINE = {(trace_mod.__file__, "load_trace"), (trace_mod.__file__, "_model"), (load_mod.__file__, "decode_store"),
            (trace_mod.__file__, "<lambda>")}  # _model's stages handed to together()

STAGES = ["read/source.py", "read/load.py", "read/split.py", "read/events.py", "read/schema.py",
          "model/steps.py", "model/selftime.py", "model/tree.py", "read/forked.py", "read/together.py", "model/stats.py",
          "model/windows.py"]
"""The files the pipeline's own calls may go to, in this order (split.py: the two-process
strategy, tried first; schema.py: the document's other keys, once the store is built;
forked.py: how many threads the load may use; together.py: the runner of the last two, which run side by side, so either may come first)."""

SIDE_BY_SIDE = {"model/windows.py": "model/stats.py"}


def _stage_calls(path) -> list[str]:
    """Files of the tracetui functions that the pipeline functions call directly, in call order."""
    seen: list[str] = []

    def prof(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        caller = frame.f_back.f_code
        if (caller.co_filename, caller.co_name) not in PIPELINE:
            return
        f = frame.f_code.co_filename
        if frame.f_code.co_name == "<lambda>":  # the progress callback, not a stage
            return
        if f.startswith(ROOT) and f != caller.co_filename:
            seen.append(os.path.relpath(f, ROOT))

    sys.setprofile(prof)
    threading.setprofile(prof)  # the stages together() runs in its threads
    try:
        load_trace(path)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return seen


@pytest.mark.parametrize("name", ["mlp_eager.json.gz", "transformer_eager.json.gz"])
def test_load_trace_enters_each_stage_once_in_order(name):
    calls = _stage_calls(TRACES / name)
    files = [f for i, f in enumerate(calls) if not i or calls[i - 1] != f]  # consecutive calls: one stay
    assert len(files) == len(set(files)), files  # no file entered twice
    assert all(f in STAGES for f in files), files
    assert files == sorted(files, key=lambda f: STAGES.index(SIDE_BY_SIDE.get(f, f))), files
    for stage in ("read/source.py", "read/load.py", "model/steps.py", "model/tree.py", "model/stats.py",
                  "model/windows.py"):
        assert stage in files, (stage, files)
