"""``tracetui tree``: the hierarchy (steps, modules, ops, kernels) as text, nested JSON or rows."""
from __future__ import annotations

import orjson

from tracetui.read.events import KINDS
from tracetui.model.stats import what_it_counts
from tracetui.model.trace import Trace
from tracetui.report.output import US, write_json, emit_report, write_line, write_bytes
from tracetui.textsafe import json_safe, visible


def _node_fields(t: Trace, node: int) -> dict:
    r = t.roll
    out = {"id": int(node), "name": t.name(node), "kind": KINDS[t.tree.kind[node]],
           "cpu_us": r.cpu_total[node] * US, "cpu_self_us": r.cpu_self[node] * US,
           "device_us": r.device[node] * US, "kernels": int(r.kernels[node]),
           "start_us": int(t.tree.start[node]) * US, "dur_us": int(t.tree.dur[node]) * US}
    counts = what_it_counts(t.tree, node)
    if counts:  # a root, thread or step row says what its figures count
        out["counts"] = counts
    return out


def tree_dict(t: Trace, node: int, depth: int | None, keep: set | None, level: int = 0,
              python: bool = False, path_only: set | None = None) -> dict:
    """The subtree as nested dicts (``children`` lists), built with a stack, not recursion: a
    trace can nest thousands of events deep."""
    path_only = path_only or ()
    root = {**_node_fields(t, node), "children": []}
    stack = [(root, node, level)]
    while stack:
        d, n, lv = stack.pop()
        if depth is not None and lv >= depth:
            continue
        for c in _tree_kids(t, n, keep, python):
            cd = {**_node_fields(t, c), "children": []}
            d["children"].append(cd)
            stack.append((cd, c, lv + (c not in path_only)))
    return root


def _dump_tree(doc: dict) -> None:
    """``tree --json``: orjson where the nesting fits its limit (254 levels); deeper trees are
    written node by node from a stack (same fields, same escaping), so no depth breaks the output."""
    try:
        write_json(doc)  # rounds µs to the ns (report/output.round_us) before it tries
        return
    except orjson.JSONEncodeError:
        pass
    out = []
    stack: list = [doc]
    opt = orjson.OPT_SERIALIZE_NUMPY
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):  # a separator or a closing bracket, in order
            out.append(item)
            continue
        fields = orjson.dumps({k: v for k, v in item.items() if k != "children"}, option=opt)
        kids = item["children"]
        out.append(fields[:-1] + b',"children":[')
        stack.append(b"]}")
        for i, c in enumerate(reversed(kids)):
            stack.append(c)
            if i < len(kids) - 1:
                stack.append(b",")
    write_bytes(json_safe(b"".join(out)) + b"\n")


def _tree_kids(t: Trace, node: int, keep: set | None, python: bool) -> list[int]:
    """The children the tree shows: Python frames hidden (their children lifted), as in the app,
    unless ``python``; with a filter, only the kept ones."""
    if python:
        kids = t.tree.children(node)
    else:
        from tracetui.read.events import K
        off, idx = t.tree.children_without(K["python"])
        kids = idx[off[node]:off[node + 1]]
    return [int(c) for c in kids if keep is None or int(c) in keep]


def match_sets(t: Trace, text: str) -> tuple[set, set]:
    """(every node kept by ``--filter text``, the matches and the paths down to them): ``--depth``
    counts the levels under the matches, so a deep match is never cut off."""
    keep = matching_paths(t, text)
    low = text.lower()
    import numpy as np
    tree = t.tree
    hits = [i for i, n in enumerate(tree.names) if low in n.lower()]
    under = np.isin(tree.name_id, hits)
    by_depth = np.argsort(tree.depth, kind="stable")
    starts = np.searchsorted(tree.depth[by_depth], np.arange(1, int(tree.depth.max()) + 1))
    for level in np.split(by_depth, starts)[1:]:
        under[level] |= under[tree.parent[level]]
    matches = set(np.nonzero(np.isin(tree.name_id, hits))[0].tolist())
    return keep, (keep - set(np.nonzero(under)[0].tolist())) | matches


def matching_paths(t: Trace, text: str) -> set:
    """Nodes whose name contains ``text`` (case-insensitive), their ancestors, and everything
    under them: filtering for an op shows what it launched, down to its kernels."""
    low = text.lower()
    hits = [i for i, n in enumerate(t.tree.names) if low in n.lower()]
    if not hits:
        return set()
    import numpy as np
    tree = t.tree
    under = np.isin(tree.name_id, hits)
    keep = set(np.nonzero(under)[0].tolist())
    for n in list(keep):  # the paths down to the matches
        n = int(tree.parent[n])
        while n >= 0 and n not in keep:
            keep.add(n)
            n = int(tree.parent[n])
    by_depth = np.argsort(tree.depth, kind="stable")
    starts = np.searchsorted(tree.depth[by_depth], np.arange(1, int(tree.depth.max()) + 1))
    for level in np.split(by_depth, starts)[1:]:  # parents' level first: a match's subtree
        under[level] |= under[tree.parent[level]]
    keep.update(np.nonzero(under)[0].tolist())
    return keep


def tree_rows(doc: dict) -> list[dict]:
    """A ``tree_dict`` as flat rows in depth-first order, each with its ``parent`` id and ``depth``."""
    rows, stack = [], [(doc, None, 0)]
    while stack:
        node, parent, level = stack.pop()
        rows.append({"id": node["id"], "parent": parent, "depth": level,
                     **{k: v for k, v in node.items() if k not in ("id", "children")},
                     "children": len(node["children"])})
        stack.extend((c, node["id"], level + 1) for c in reversed(node["children"]))
    return rows


def print_tree(t: Trace, depth: int | None = None, text_filter: str | None = None, as_json: bool = False,
               python: bool = False, fmt: str | None = None) -> None:
    """The hierarchy, Python frames hidden unless ``python``; ``depth`` counts the levels shown
    (below the matches, with ``text_filter``). ``fmt`` json, or csv/md (one row per node)."""
    fmt = fmt or ("json" if as_json else "text")
    keep, path_only = match_sets(t, text_filter) if text_filter else (None, set())
    if fmt == "json":
        _dump_tree(tree_dict(t, 0, depth, keep, python=python, path_only=path_only))
        return
    if fmt != "text":  # csv / md: one row per node (``children`` is the count shown under it)
        from tracetui.report.export import records_table
        doc = tree_dict(t, 0, depth, keep, python=python, path_only=path_only)
        emit_report({}, fmt, tables=[records_table("nodes", tree_rows(doc))], title=f"tracetui tree: {t.path.name}")
        return
    stack = [(0, 0, 0)]
    while stack:
        node, level, indent = stack.pop()
        r = t.roll
        kind = KINDS[t.tree.kind[node]]
        dev = f" dev {r.device[node] * US:.1f}µs" if r.device[node] else ""
        ker = f" k={int(r.kernels[node])}" if r.kernels[node] and kind not in ("kernel",) else ""
        cpu = f" cpu {r.cpu_total[node] * US:.1f}µs" if r.cpu_total[node] else ""
        counts = what_it_counts(t.tree, node)
        counts = f" ({counts})" if counts else ""
        write_line(f"{'  ' * indent}{visible(t.name(node))} [{kind}]{cpu}{dev}{ker}{counts}")
        if depth is not None and level >= depth:
            continue
        kids = _tree_kids(t, node, keep, python)
        stack.extend((c, level + (c not in path_only), indent + 1) for c in reversed(kids))
