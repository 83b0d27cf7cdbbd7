"""The read-only tools ``tracetui mcp`` serves, as plain functions over the model (no MCP import
here: tracetui/mcp/server.py registers them with the SDK, tests call them directly too).

Every answer is the CLI's JSON for the same question (same field names and numbers), cut to at
most ``MAX_CHARS`` characters of JSON: a list comes as a page ``{"total", "offset", "count",
"next_offset", "items"}``, and ``next_offset`` (null on the last page) is the continuation to pass
back as ``offset``. Bad input raises ``ToolInputError`` (its text is the message the agent sees).

Every path a tool opens or lists is confined to ``ROOTS`` (``tracetui mcp --root``; by default the
current folder and the paths named on its command line): a path outside them is refused with one
message that says nothing about the file, before anything is opened or even stat'ed.

``TOOLS`` is the table the server registers: one ``Tool(name, function)`` per entry, the
function's signature its input schema and its docstring its description. A report with lists
(``ranks``, ``memory``) becomes a tool of a few lines through ``sectioned`` plus one entry here.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import orjson

MAX_CHARS = 20_000
"""The most characters of JSON one answer may hold (about 5k tokens); lists page to fit."""

MAX_LIMIT = 500
"""The most items one page may ask for (before the size bound cuts it further)."""

CACHE_TRACES = 4
"""Loaded traces kept between calls (a few hundred MB for large traces: keep it small)."""

ARG_CHARS = 400
"""Longest string of an event's args shown by ``node`` before it is cut (Python stacks, shapes)."""


ROOTS: list[Path] = []
"""Folders (or files) the tools may open or list; empty: the current folder. Set by the server."""

OUTSIDE = "outside the folders this server may read (start the server with --root DIR to allow it)"
"""The one refusal for a path out of ROOTS, the same whether it exists or not."""

MAX_DEPTH_ARG = 1_000_000
"""The largest ``depth`` a tree call takes (deeper is the same as this: no tree is that deep)."""


class ToolInputError(ValueError):
    """A call the agent can correct (no such file, node, step, section): its text is the answer."""


def _size(obj) -> int:
    return len(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY))


def page(items: list, offset: int = 0, limit: int = 50, head: dict | None = None, key: str = "items") -> dict:
    """``items[offset:offset + limit]`` with ``head`` beside it, cut until the JSON fits MAX_CHARS.

    A single item too large to fit is shortened (its long strings cut) rather than dropped."""
    total = len(items)
    if offset < 0:
        raise ToolInputError(f"offset must be >= 0 (got {offset})")
    if offset > total:
        raise ToolInputError(f"offset {offset} is past the end: the list has {total} item(s)")
    limit = max(1, min(int(limit), MAX_LIMIT))
    head = _fit(dict(head or {}), MAX_CHARS // 3)  # echoed arguments (a 100k-character filter) cut too
    n = min(limit, max(0, total - offset))
    while True:
        chunk = items[offset:offset + n]
        out = {**head, "total": total, "offset": offset, "count": len(chunk),
               "next_offset": offset + len(chunk) if offset + len(chunk) < total else None, key: chunk}
        if _size(out) <= MAX_CHARS or n <= 1:
            break
        n = max(1, n // 2)
    if _size(out) > MAX_CHARS and chunk:  # one item alone is over the bound: cut it down
        rest = _size({**out, key: []})
        item = chunk[0] if isinstance(chunk[0], dict) else {"value": chunk[0]}
        out[key] = [_fit(item, max(200, MAX_CHARS - rest - 20))]
    return out


def _cut(obj, items: int, chars: int):
    """``obj`` with strings cut to ``chars`` and lists to ``items`` (a last entry says how many more)."""
    if isinstance(obj, str):
        return obj if len(obj) <= chars else obj[:chars] + "…"
    if isinstance(obj, dict):
        return {k: _cut(v, items, chars) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_cut(v, items, chars) for v in obj[:items]] + ([f"… {len(obj) - items} more"] if len(obj) > items else [])
    return obj


CUTS = ((50, 400), (20, 200), (10, 120), (5, 80), (2, 60))
"""(list items, string characters) tried in turn when an answer is over the bound."""


def _fit(d: dict, budget: int | None = None) -> dict:
    """A dict answer within ``budget`` (MAX_CHARS): lists and strings cut step by step, and if that
    is not enough the largest fields dropped, each step said in the answer."""
    budget = budget or MAX_CHARS
    if _size(d) <= budget:
        return d
    note = "lists and strings were cut to fit the size bound; ask a paged tool for the rest"
    for items, chars in CUTS:
        out = {**_cut(d, items, chars), "shortened": note}
        if _size(out) <= budget:
            return out
    dropped = []
    while _size(out) > budget and len(out) > 1:
        k = max((k for k in out if k not in ("shortened", "dropped")), key=lambda k: _size(out[k]))
        out.pop(k)
        dropped.append(k)
        out["dropped"] = dropped
    return out


# ---- paths: confined to ROOTS
def set_roots(paths) -> None:
    """Confine every tool to ``paths`` (folders or files), as absolute paths."""
    ROOTS[:] = [Path(os.path.abspath(os.path.expanduser(str(p)))) for p in paths]


def _under(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def confine(path) -> Path:
    """``path`` as an absolute path when it lies in ROOTS both as written and once its symlinks
    are followed (a link inside pointing out is outside); else the one refusal, OUTSIDE."""
    text = os.path.expanduser(str(path))
    if "\0" in text:
        raise ToolInputError("path: contains a NUL character")
    lexical = Path(os.path.abspath(text))
    roots = ROOTS or [Path.cwd()]
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    inside = any(_under(lexical, r) for r in roots + real_roots)
    if inside:
        try:
            real = Path(os.path.realpath(lexical))
        except (OSError, RuntimeError, ValueError):
            inside = False
        else:
            inside = any(_under(real, r) for r in real_roots)
    if not inside:
        raise ToolInputError(f"{path}: {OUTSIDE}")
    return lexical


GLOB_CHARS = "*?["


def confined_inputs(items) -> list[Path]:
    """The files a list of files, folders and globs names (``tracetui ranks`` inputs), each in
    ROOTS: a glob's fixed folder is checked before it is expanded, and every match after."""
    from tracetui.jobs.ranks import expand_inputs
    from tracetui.read.errors import TraceError
    out = []
    for item in items:
        s = str(item)
        cut = min((s.index(c) for c in GLOB_CHARS if c in s), default=None)
        try:
            confine(s if cut is None else (os.path.dirname(s[:cut]) or "."))
        except ToolInputError:
            raise ToolInputError(f"{s}: {OUTSIDE}") from None
        try:
            found = expand_inputs([s])
        except TraceError as e:
            raise ToolInputError(str(e)) from None
        for f in found:
            try:
                confine(f)
            except ToolInputError:
                raise ToolInputError(f"{s}: {OUTSIDE}") from None
        out += found
    return out


# ---- loading, cached per file version and options
_cache: OrderedDict = OrderedDict()


def load(path: str, steps: str | None = None, torch_version: str | None = None):
    """The trace at ``path`` (a file or a trace folder), loaded once per file version."""
    from tracetui.read.errors import TraceError
    from tracetui.read.load import resolve_input
    from tracetui.model.trace import load_trace
    if not path:
        raise ToolInputError("path: give a trace file or folder")
    from tracetui.model.selftime import parse_version
    if torch_version is not None and parse_version(torch_version) is None:
        raise ToolInputError(f"torch_version: {torch_version!r} is not a torch version such as 2.13")
    given = confine(path)
    try:
        p = resolve_input(given)
        if p != given:  # a folder's newest trace: a link in it may point out
            try:
                confine(p)
            except ToolInputError:
                raise ToolInputError(f"{path}: {OUTSIDE}") from None
        st = p.stat()
    except TraceError as e:
        raise ToolInputError(str(e)) from None
    except OSError as e:
        raise ToolInputError(f"{path}: cannot read: {e.strerror or e}") from None
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size, steps, torch_version)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    try:
        t = load_trace(p, steps=steps, torch_version=torch_version)
    except TraceError as e:
        raise ToolInputError(str(e)) from None
    _cache[key] = t
    from tracetui.read.load import max_bytes
    budget = max_bytes()  # the traces kept between calls together stay within one load's limit
    while len(_cache) > CACHE_TRACES or (len(_cache) > 1 and sum(k[2] for k in _cache) > budget):
        _cache.popitem(last=False)
    return t


# ---- the tools
def open_trace(path: str, steps: str | None = None, torch_version: str | None = None) -> dict:
    """Open a PyTorch profiler trace (.json or .json.gz, or a folder: its newest trace) and describe
    it: device, events, steps and how they were chosen, the CPU self-time rule, provenance, kernel
    classes, load repairs and diagnostics. `steps` is a regex naming the step annotations;
    `torch_version` the torch that recorded it. Every other tool takes the same path."""
    from tracetui.report.summary import summary_dict
    t = load(path, steps, torch_version)
    d = summary_dict(t, top=1)
    out = {k: d[k] for k in ("file", "device", "steps", "events", "step_marker", "self_time_rule", "provenance",
                             "kernel_classes", "diagnostics", "load")}
    out["step_names"] = page([t.name(s) for s in t.steps], 0, 100, key="names")
    out["root"] = 0
    return _fit(out)


def summary(path: str, top: int = 15, steps: str | None = None, torch_version: str | None = None) -> dict:
    """The trace's summary as `tracetui summary --json --top N` gives it: device, steps, kernel
    classes, the top `top` kernels (by device time) and ops (every key_averages() row kind), with
    diagnostics. Per-step figures: step_breakdown; all kernels or ops: kernels / ops (paged)."""
    from tracetui.report.summary import summary_dict
    top = max(1, min(int(top), 100))
    d = summary_dict(load(path, steps, torch_version), top=top)
    d["per_step"] = {"count": len(d["per_step"]), "see": "step_breakdown"}
    d["first_step_kernels"] = {"count": len(d["first_step_kernels"]), "see": "tree from the first step's id"}
    return _fit(d)


def tree(path: str, node: int = 0, depth: int = 2, filter: str | None = None, offset: int = 0, limit: int = 100,
         steps: str | None = None, torch_version: str | None = None) -> dict:
    """The hierarchy under node `node` (0: the root) down to `depth` levels, as rows in depth-first
    order with id, parent, depth, name, kind, cpu_us, cpu_self_us, device_us, kernels, start_us,
    dur_us and children (how many shown under it). `filter` keeps nodes whose name contains the text
    (case-insensitive), the paths to them and what is under them. Paged: pass next_offset as offset.
    The numbers are those of `tracetui tree --json`. `path_to_node` is the node's breadcrumb."""
    from tracetui.report.tree import matching_paths, tree_dict, tree_rows
    t = load(path, steps, torch_version)
    node = _node_id(t, node)
    depth = max(0, min(int(depth), MAX_DEPTH_ARG))
    keep = matching_paths(t, filter) if filter else None
    if keep is not None and node not in keep:
        return page([], 0, 1, head={"node": node, "filter": filter, "path_to_node": _ancestors(t, node)}, key="rows")
    rows = tree_rows(tree_dict(t, node, depth, keep))
    return page(rows, offset, limit, head={"node": node, "depth": depth, "filter": filter,
                                           "path_to_node": _ancestors(t, node)}, key="rows")


def node(path: str, id: int, steps: str | None = None, torch_version: str | None = None) -> dict:
    """Everything about one node by id (from tree, kernels or ops): its numbers, its breadcrumb, its
    event args; for GPU work the kernel's class, library, launching op chain and module; for a
    launch or op, how much GPU work it enqueued."""
    from tracetui.read.events import KINDS
    from tracetui.report.summary import attribution
    from tracetui.report.tree import tree_dict
    t = load(path, steps, torch_version)
    i = _node_id(t, id)
    d = tree_dict(t, i, 0, None)
    d["children"] = int(len(t.tree.children(i)))
    d["path_to_node"] = _ancestors(t, i)
    kind = KINDS[t.tree.kind[i]]
    if kind in ("kernel", "memcpy", "memset"):
        info = t.kernel_info(i)
        d["class"], d["library"] = info.klass, info.library
        d.update(attribution(t, i))
        launcher = t.launcher(i)
        d["launched_by"] = None if launcher is None else {"id": int(launcher), "name": t.name(launcher)}
    elif i:
        gpu = t.gpu_descendants(i)
        d["gpu_work"] = {"count": int(len(gpu)), "first_ids": [int(g) for g in gpu[:10]]}
    try:
        args = t.args(i) if i else {}
    except Exception:  # noqa: BLE001 - a damaged args object is shown as missing, not an error
        args = {}
    d["args"] = _cut(args, 50, ARG_CHARS) if isinstance(args, dict) else {}
    return _fit(d)


def kernels(path: str, name: str | None = None, offset: int = 0, limit: int = 50,
            steps: str | None = None, torch_version: str | None = None) -> dict:
    """GPU kernels (memcpy/memset too) aggregated by name, by device time: count, total_us,
    mean_us, class, library, and `ids` (the first nodes, for node/tree). `name` keeps names that
    contain the text (case-insensitive). Rows as in `summary --json --top 0`; paged."""
    return _agg_page(path, "kernels", name, None, offset, limit, steps, torch_version)


def ops(path: str, name: str | None = None, kind: str | None = None, offset: int = 0, limit: int = 50,
        steps: str | None = None, torch_version: str | None = None) -> dict:
    """CPU-side events aggregated by name as key_averages() does: count, cpu_total_us, cpu_self_us,
    device_total_us, kind (op, annotation, step, runtime, module, python), and `ids` (the first
    nodes). An op recorded twice, nested, the inner its parent's only child (autocast's
    re-dispatch) is one call, as torch merges it. device_total_us is key_averages()'s;
    device_scope_us adds kernels launched outside any op and, for a step, every thread's work.
    `name` filters by substring, `kind` by kind. Rows as in `summary --json --top 0`; paged."""
    return _agg_page(path, "ops", name, kind, offset, limit, steps, torch_version)


def step_breakdown(path: str, step: str | None = None, offset: int = 0, limit: int = 20,
                   steps: str | None = None, torch_version: str | None = None) -> dict:
    """Per-step breakdown over each step's window (all threads and streams): window, GPU busy,
    other work (other_steps_us: GPU work the step did not launch), idle split (host wait / kernel wait / other), busy by kernel class, exposed and
    overlapped communication, launch and sync CPU, kernels, verdict and its reason; plus the step's
    node id. `step`: one step by name (e.g. ProfilerStep#3) or index (0 = first). Rows as
    `summary --json` per_step; paged."""
    from tracetui.report.summary import step_dict
    t = load(path, steps, torch_version)
    chosen = t.steps
    if step is not None and str(step) != "":
        s = str(step)
        if s.lstrip("-").isdigit():
            k = int(s)
            if not -len(chosen) <= k < len(chosen):
                raise ToolInputError(f"step {k}: the trace has {len(chosen)} step(s)")
            chosen = [chosen[k]]
        else:
            chosen = [i for i in chosen if t.name(i) == s]
            if not chosen:
                raise ToolInputError(f"no step named {s!r} (steps: {', '.join(t.name(i) for i in t.steps[:10])}"
                                     f"{' …' if len(t.steps) > 10 else ''})")
    end = min(len(chosen), offset + max(1, min(int(limit), MAX_LIMIT)))
    rows = [None] * len(chosen)
    for j in range(offset, end):  # only the page's steps are computed
        rows[j] = {"id": int(chosen[j]), **step_dict(t, chosen[j])}
    out = page(rows, offset, limit, head={"step_marker": t.step_choice.description}, key="steps")
    return out


_diff_cache: OrderedDict = OrderedDict()


def diff(a: str, b: str, section: str = "kernels", offset: int = 0, limit: int = 50,
         steps: str | None = None, torch_version: str | None = None) -> dict:
    """Align trace `a` with trace `b` (e.g. eager vs torch.compile) and report, per step: the two
    sides (kernels, device and CPU µs per step) and one `section`: kernels (aligned, with status
    same/faster/slower/new/removed/fused), fused (what each fused kernel replaces and saves),
    removed_ops, added_ops, chains (dispatch chains that changed). As `tracetui diff --json`; paged."""
    from tracetui.compare.changes import diff_dict
    from tracetui.compare.diff import diff_traces
    ta, tb = load(a, steps, torch_version), load(b, steps, torch_version)
    key = (id(ta), id(tb))
    if key not in _diff_cache:
        from tracetui.compare.verdict import comparability, facts, verdict
        doc = diff_dict(diff_traces(ta, tb))
        doc["verdict"], doc["comparability"] = verdict(doc), comparability(facts(ta), facts(tb))  # as diff --json
        _diff_cache[key] = doc
        while len(_diff_cache) > CACHE_TRACES:
            _diff_cache.popitem(last=False)
    return sectioned(_diff_cache[key], section, offset, limit)


def opportunities(path: str, offset: int = 0, limit: int = 20, steps: str | None = None,
                  torch_version: str | None = None) -> dict:
    """Fusion opportunities of one trace, as `tracetui opportunities --json --top 0`: chains of
    pointwise/norm/reduction kernels (one stream, one module scope) ranked by the µs per step a
    fusion would save at the trace's own HBM bandwidth, each with module, ops, kernels and bytes;
    the head has the bandwidth and its source (measured or nominal). Paged."""
    from tracetui.model.opportunities import opportunities as find
    o = find(load(path, steps, torch_version))
    head = {k: v for k, v in o.items() if k != "chains"}
    return page(o["chains"], offset, limit, head=head, key="chains")


def memory(path: str, section: str | None = "ops", offset: int = 0, limit: int = 50,
           steps: str | None = None, torch_version: str | None = None) -> dict:
    """Memory of a profile_memory trace, as `tracetui memory --json --top 0`: the head (file,
    instants) and one `section`: devices (peak per device and what was live at it), steps (peak per
    step), ops (per-op statistics, TensorBoard plugin definitions). Sizes in bytes; paged."""
    from tracetui.model.memory import memory_dict
    return sectioned(memory_dict(load(path, steps, torch_version), top=0), section, offset, limit)


def ranks(paths: list[str], section: str | None = "per_rank", offset: int = 0, limit: int = 50,
          steps: str | None = None, torch_version: str | None = None) -> dict:
    """The ranks of one job (rank files, a folder or a glob), as `tracetui ranks --json`: the head
    (world size, clock reference, the likely straggler) and one `section`: per_rank (offsets,
    waits, times last), steps (per rank and step), collectives (matched across ranks: each rank's
    wait, latency, bus bandwidth), diagnostics. Times in µs, sizes in bytes; paged."""
    from tracetui.jobs.ranks import analyze_tables, load_job
    from tracetui.read.errors import TraceError
    if isinstance(paths, str):
        paths = [paths]
    files = confined_inputs(paths)
    key = ("ranks", tuple(str(f) for f in files), steps, torch_version)
    if key not in _diff_cache:
        try:
            job, tables = load_job(files, load_opts={"steps": steps, "torch_version": torch_version})
        except TraceError as e:
            raise ToolInputError(str(e)) from None
        _diff_cache[key] = analyze_tables(job, tables)
        while len(_diff_cache) > CACHE_TRACES:
            _diff_cache.popitem(last=False)
    return sectioned(_diff_cache[key], section, offset, limit)


def sectioned(doc: dict, section: str | None, offset: int = 0, limit: int = 50) -> dict:
    """A CLI JSON report as one answer: its scalar fields (cut to fit) as the head, ``sections``
    with the length of each list field, and one page of the list ``section`` (none: the head only).
    How a report tool (diff here; ranks, memory) answers without a layout of its own."""
    lists = {k: v for k, v in doc.items() if isinstance(v, list)}
    if section is not None and section not in lists:
        raise ToolInputError(f"section {section!r}: one of {', '.join(lists)}")
    head = _fit({k: v for k, v in doc.items() if k not in lists}, MAX_CHARS // 3)
    head["sections"] = {k: len(v) for k, v in lists.items()}
    head["section"] = section
    if section is None:
        return head
    return page(lists[section], offset, limit, head=head, key=section)


# ---- helpers
def _node_id(t, i) -> int:
    try:
        i = int(i)
    except (TypeError, ValueError):
        raise ToolInputError(f"node id {i!r} is not an integer") from None
    if not 0 <= i < len(t.tree.kind):
        raise ToolInputError(f"no node {i} (ids run 0..{len(t.tree.kind) - 1})")
    return i


def _ancestors(t, i: int) -> list[dict]:
    """The breadcrumb root..i. Bounded whatever the tree holds: at most one entry per node, and
    a parent seen before (a cycle in a damaged tree) ends it."""
    out, seen, parent = [], set(), t.tree.parent
    while 0 <= i < len(parent) and i not in seen:
        seen.add(i)
        out.append({"id": int(i), "name": t.name(i)})
        i = int(parent[i])
    return out[::-1]


def _agg_page(path, which, name, kind, offset, limit, steps, torch_version) -> dict:
    from tracetui.report.summary import summary_dict
    t = load(path, steps, torch_version)
    rows = summary_dict(t, top=0)[which]
    table = {a.name: a for a in (t.kernel_table if which == "kernels" else t.op_table)}
    if name:
        low = name.lower()
        rows = [r for r in rows if low in r["name"].lower()]
    if kind:
        rows = [r for r in rows if r.get("kind") == kind]
    rows = [{**r, "ids": [int(n) for n in table[r["name"]].nodes[:5]]} if r["name"] in table else r for r in rows]
    return page(rows, offset, limit, head={"filter": name, "kind": kind}, key=which)


@dataclass(frozen=True)
class Tool:
    """One row of the server's tool table: the function's signature is the input schema."""
    name: str
    fn: Callable[..., dict]


TOOLS: list[Tool] = [
    Tool("open_trace", open_trace),
    Tool("summary", summary),
    Tool("tree", tree),
    Tool("node", node),
    Tool("kernels", kernels),
    Tool("ops", ops),
    Tool("step_breakdown", step_breakdown),
    Tool("diff", diff),
    Tool("memory", memory),
    Tool("ranks", ranks),
    Tool("opportunities", opportunities),
]
"""Every tool the server offers, in the order it lists them."""
