"""The model's part of the reopen cache: the tree, the rollups and the step windows that
``load_trace`` builds over the event store, kept beside the store's entry (read/cache.py).

A 1 GB trace spends ~9 s of CPU on these after its store is read back; from the entry they
cost what reading the entry costs. The entry has the store's identity rules (file identity,
code key, atomic write, a broken entry ignored and replaced) and, on top, the options that
change what is built (``key``): the root's title, the ``--steps`` regex and the self-time rule.
Every array is columnar; the few dicts (diagnostics, step pids) go in the header.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tracetui.read import cache as store_cache
from tracetui.read.events import K
from tracetui.model.stats import Rollups
from tracetui.model.tree import Tree

TREE_ARRAYS = ("name_id", "kind", "ev", "start", "dur", "parent", "cparent", "child_off", "child_idx", "depth")
ROLL_ARRAYS = ("cpu_total", "cpu_self", "device", "kernels", "step_of", "dup", "op_self")
WINDOW_ARRAYS = ("launcher", "launch_ts", "launch_end", "gpu_flat", "gpu_at", "runtime_flat", "runtime_at",
                 "thread_flat", "thread_at")
"""What ``Windows.__init__`` computes (model/windows.py), kept so a reopen does not redo it."""


def key(title: str, steps: str | None, frames_own_time: bool) -> dict:
    """Every option the tree, rollups and windows depend on, besides the file and the code."""
    return {"title": title, "steps": steps, "frames_own_time": bool(frames_own_time)}


def load(path: Path, ident: list | None, store, k: dict) -> tuple[Tree, Rollups, dict | None, dict] | None:
    """(tree, rollups, the windows' arrays and step pids or None, the ``Trace``'s kept tables by
    attribute) built on ``store`` from the entry, or None where there is no entry for this file,
    code and ``k``."""
    got = store_cache.load_arrays(path, ident, store_cache.MODEL, k)
    if got is None:
        return None
    header, arr = got
    try:
        n_names = header["n_store_names"]
        if n_names != len(store.names) or any(a not in arr for a in TREE_ARRAYS + ROLL_ARRAYS):
            return None
        fwd_of = dict(zip(arr["fwd_of.bwd"].tolist(), arr["fwd_of.fwd"].tolist()))
        tree = Tree(store=store, names=list(store.names) + list(header["extra_names"]),
                    **{a: arr[a] for a in TREE_ARRAYS}, diagnostics=header["diagnostics"], fwd_of=fwd_of)
        n = len(tree.kind)
        per_node = [a for a in TREE_ARRAYS if a not in ("child_off", "child_idx")] + list(ROLL_ARRAYS)
        if any(arr[a].shape != (n,) for a in per_node) or arr["child_off"].shape != (n + 1,) \
                or arr["child_idx"].size > n:
            return None
        roll = Rollups(**{a: arr[a] for a in ROLL_ARRAYS})
        for kind in header["without"]:
            tree._without[kind] = (arr[f"without.{kind}.off"], arr[f"without.{kind}.idx"])
        windows = None
        if header.get("step_pids") is not None and all("win." + a in arr for a in WINDOW_ARRAYS):
            windows = {a: arr["win." + a] for a in WINDOW_ARRAYS}
            windows["step_pids"] = header["step_pids"]
            windows["claimed_pids"] = header["claimed_pids"]  # absent: an entry of older code, not served
            if header.get("figures") is not None:
                figures = {a: arr["fig." + a] for a in header["figure_arrays"]}
                windows["figures"] = {**figures, **header["figures"]}
        tables = _load_tables(header, arr)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return tree, roll, windows, tables


def kept_windows(trace, kept: dict):
    """``Windows`` of ``trace`` from what ``load`` read (its figures too, where they were kept);
    None where they do not fit its steps."""
    from tracetui.model.window_figures import Figures  # noqa: PLC0415
    from tracetui.model.windows import Windows  # noqa: PLC0415
    n = len(trace.steps)
    if len(kept["step_pids"]) != n or kept["gpu_at"].shape != (n + 1,) or kept["thread_at"].shape != (n + 1,):
        return None
    figures = kept.pop("figures", None)
    windows = Windows(trace, kept)
    if figures is not None:
        fig = Figures.__new__(Figures)
        fig.__dict__.update(figures)
        windows.figures = fig  # the cached_property's slot
    return windows


def save(path: Path, ident: list | None, k: dict, trace) -> bool:
    """Write the entry of a ``Trace``'s tree, rollups, step windows and tables; never raises."""
    if ident is None:
        return False
    tree, roll, windows = trace.tree, trace.roll, trace.windows
    n_store = len(tree.store.names)
    fwd = np.array(sorted(tree.fwd_of.items()), dtype=np.int64).reshape(-1, 2)
    arrays = [(a, getattr(tree, a)) for a in TREE_ARRAYS] + [(a, getattr(roll, a)) for a in ROLL_ARRAYS]
    arrays += [("fwd_of.bwd", fwd[:, 0].copy()), ("fwd_of.fwd", fwd[:, 1].copy())]
    header = {"n_store_names": n_store, "extra_names": tree.names[n_store:], "diagnostics": tree.diagnostics,
              "step_pids": None}
    off, idx = tree.children_without(K["python"])  # the tree the app and `tracetui tree` show first
    arrays += [(f"without.{K['python']}.off", off), (f"without.{K['python']}.idx", idx)]
    header["without"] = [K["python"]]
    if windows is not None:
        arrays += [("win." + a, getattr(windows, a)) for a in WINDOW_ARRAYS]
        header["step_pids"] = [w.pid for w in windows.windows]
        header["claimed_pids"] = [[p, list(c)] for p, c in windows.claimed_pids.items()]
        figures = _figures(windows.figures)
        if figures is not None:
            header["figures"], fig_arrays = figures
            header["figure_arrays"] = [a for a, _ in fig_arrays]
            arrays += [("fig." + a, v) for a, v in fig_arrays]
    _save_tables(trace, header, arrays)
    return store_cache.save_arrays(path, ident, store_cache.MODEL, k, header, arrays)


TABLES = ("op_table", "kernel_table")
"""``Trace``'s tables kept in the entry: rows of ``stats.Agg`` (the summary's and the app's)."""
AGG_FIELDS = ("name", "kind", "count", "cpu_total_us", "cpu_self_us", "device_total_us", "device_scope_us")


def _save_tables(trace, header: dict, arrays: list) -> None:
    """The op and kernel tables (each row's fields in the header, its nodes as one flat array
    and offsets) and every GPU node's class and library (codes into name lists)."""
    header["tables"] = {}
    for name in TABLES:
        rows = getattr(trace, name)
        header["tables"][name] = [[getattr(r, f) for f in AGG_FIELDS] for r in rows]
        sizes = np.fromiter((r.nodes.size for r in rows), dtype=np.int64, count=len(rows))
        at = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(sizes, out=at[1:])
        flat = np.concatenate([r.nodes for r in rows]) if rows else np.zeros(0, dtype=np.int64)
        arrays += [(f"{name}.nodes", flat), (f"{name}.at", at)]
    kept = []
    for part, values in zip(("class", "library"), trace._gpu_class_libs):
        vals = values.tolist()
        if not all(isinstance(v, str) for v in vals):  # None or other: left to be computed
            return
        names = sorted(set(vals))
        code = {v: j for j, v in enumerate(names)}
        kept.append((part, names, np.fromiter((code[v] for v in vals), dtype=np.int32, count=len(vals))))
    for part, names, codes in kept:
        header[f"gpu_{part}_names"] = names
        arrays.append((f"gpu.{part}", codes))


def _load_tables(header: dict, arr: dict) -> dict:
    """The ``Trace`` attributes ``_save_tables`` kept, by name (cached properties' slots)."""
    from tracetui.model.stats import Agg  # noqa: PLC0415
    out = {}
    for name, rows in (header.get("tables") or {}).items():
        flat, at = arr[f"{name}.nodes"], arr[f"{name}.at"]
        if name not in TABLES or at.shape != (len(rows) + 1,) or (len(rows) and at[-1] != flat.size):
            raise ValueError("a table that does not add up")
        out[name] = [Agg(**dict(zip(AGG_FIELDS, r)), nodes=flat[at[j]:at[j + 1]]) for j, r in enumerate(rows)]
    if "gpu_class_names" in header and "gpu_library_names" in header:
        parts = []
        for p in ("class", "library"):
            names = np.empty(len(header[f"gpu_{p}_names"]), dtype=object)
            names[:] = header[f"gpu_{p}_names"]
            parts.append(names[arr[f"gpu.{p}"]])
        out["_gpu_class_libs"] = (parts[0], parts[1])
    return out


def _figures(fig) -> tuple[dict, list] | None:
    """(the plain values, the arrays) of a ``window_figures.Figures``: every attribute it holds;
    None where one is neither (it could not be written, so the figures are left out)."""
    plain, arrays = {}, []
    for a, v in vars(fig).items():
        if isinstance(v, np.ndarray) and not v.dtype.hasobject:
            arrays.append((a, v))
        elif isinstance(v, (int, float, str)) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            plain[a] = v
        else:
            return None
    return plain, arrays
