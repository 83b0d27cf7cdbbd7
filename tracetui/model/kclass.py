"""The class of GPU activity, per instance: each kernel launch is classed with its own launching
op (``taxonomy.classify``), and a name's class in a table is the class that holds most of its time.

A kernel name is not one class: MIOpen's ``batched_transpose_*`` under ``aten::convolution`` is
conv work, the same name under no op (no runtime link) is decided by its name alone.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from tracetui.read.events import K, KINDS, kind_mask
from tracetui.model.names import KernelName, decode_kernel


class KernelClasses:
    """Mixed into ``Trace``: needs ``tree``, ``store``, ``launcher``, ``launching_op``, ``name``,
    ``kind``, ``_gpu_nodes`` and ``_gpu_ancestors``."""

    def kernel_info(self, i: int) -> KernelName:
        """What GPU node ``i`` is: class and library from its launching op, then its name (taxonomy.py)."""
        kind = self.kind(i)
        launcher = self.launcher(i)
        op = self.launching_op(i)
        user_triton = bool(launcher is not None and self.name(launcher).startswith("cuLaunchKernel") and op is None)
        return decode_kernel(self.name(i), kind, user_triton=user_triton,
                             launching_op=self.name(op) if op is not None else None)

    def kernel_classes(self, nodes: np.ndarray) -> list[str]:
        """``kernel_info(n).klass`` of each GPU node in ``nodes``, classifying each (name, launching
        op, kind, launched as a user Triton kernel) once: the timeline colours every kernel of a step
        (100k on a large one), and ``kernel_info`` per node took ~20 µs."""
        return self._class_lib_columns(nodes)[0].tolist()

    def kernel_class_libs(self, nodes: np.ndarray) -> list[tuple[str, str]]:
        """``(kernel_info(n).klass, kernel_info(n).library)`` of each GPU node in ``nodes``, each
        distinct (name, launching op, kind, user kernel) classified once (``kernel_classes``)."""
        klass, library = self._class_lib_columns(nodes)
        return list(zip(klass.tolist(), library.tolist()))

    def _class_lib_columns(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``kernel_class_libs`` as two object arrays (classes, libraries), aligned with ``nodes``."""
        t = self.tree
        nodes = np.asarray(nodes, dtype=np.int64)
        if not nodes.size:
            return np.zeros(0, dtype=object), np.zeros(0, dtype=object)
        par = t.parent[nodes]
        p = np.maximum(par, 0)
        launcher = (par > 0) & kind_mask(t.kind[p], [K["runtime"], K["op"], K["annotation"]])
        culaunch = launcher & self._culaunch_names[t.name_id[p]]
        # the launching op: the first op along the ancestors (innermost); None when the activity
        # has no External id or no op lies above it
        op_node = self._first_op_above(nodes)
        has_op = (op_node >= 0) & (self.store.ext[t.ev[nodes]] > 0)
        op_id = np.where(has_op, t.name_id[np.maximum(op_node, 0)], -1).astype(np.int64)
        user = culaunch & ~has_op
        n_names = len(t.names) + 1
        key = ((t.name_id[nodes].astype(np.int64) * n_names + op_id + 1) * 16 + t.kind[nodes]) * 2 + user
        uniq, inv = np.unique(key, return_inverse=True)
        names = self.tree.names
        from tracetui.model.taxonomy import classify  # noqa: PLC0415 - compiled at import (~8 ms): a load alone never classifies
        klass, library = np.empty(uniq.size, dtype=object), np.empty(uniq.size, dtype=object)
        for j, k in enumerate(uniq.tolist()):
            rest, u = divmod(k, 2)
            rest, kd = divmod(rest, 16)
            nid, oid = divmod(rest, n_names)
            klass[j], library[j] = classify(names[nid], KINDS[kd], names[oid - 1] if oid else None, bool(u))[:2]
        inv = inv.ravel()
        return klass[inv], library[inv]

    def _first_op_above(self, nodes: np.ndarray) -> np.ndarray:
        """The innermost op among each node's containment ancestors (-1: none), within the 128
        levels ``_gpu_ancestors`` holds: a climb that stops at the first op (a kernel's is two
        or three levels up) instead of the whole ancestor matrix (~5 ms on 20k kernels)."""
        cp, kind = self.tree.cparent, self.tree.kind
        out = np.full(nodes.size, -1, dtype=np.int64)
        at, cur = np.arange(nodes.size), cp[nodes]
        for _ in range(128):
            live = cur >= 0
            at, cur = at[live], cur[live]
            if not cur.size:
                break
            hit = kind[cur] == K["op"]
            out[at[hit]] = cur[hit]
            at, cur = at[~hit], cp[cur[~hit]]
        return out

    @cached_property
    def _gpu_class_libs(self) -> tuple[np.ndarray, np.ndarray]:
        return self._class_lib_columns(self._gpu_nodes)

    @cached_property
    def _class_names(self) -> list[str]:
        """The distinct classes of the GPU nodes, sorted (``_gpu_class_codes`` index them)."""
        return sorted(set(self.gpu_classes.tolist()))

    @cached_property
    def _gpu_class_codes(self) -> np.ndarray:
        """``gpu_classes`` as indices into ``_class_names`` (whole-array grouping by class)."""
        names = self._class_names
        code = {c: i for i, c in enumerate(names)}
        classes = self.gpu_classes.tolist()
        return np.fromiter(map(code.__getitem__, classes), dtype=np.int64, count=len(classes))

    @cached_property
    def gpu_classes(self) -> np.ndarray:
        """The class of every GPU node (aligned with ``_gpu_nodes``), decoded once per trace: the
        step windows, the rank tables and the collectives all ask for them."""
        return self._gpu_class_libs[0]

    @cached_property
    def gpu_libraries(self) -> np.ndarray:
        """``kernel_info(n).library`` of every GPU node (aligned with ``_gpu_nodes``)."""
        return self._gpu_class_libs[1]

    def nodes_of_class(self, klass: str) -> np.ndarray:
        """The GPU nodes of one class (``gemm``, ``attention`` ...), in node order: what a search
        for the class finds (the nvjet GEMMs' names never say gemm)."""
        return np.asarray(self._gpu_nodes, dtype=np.int64)[self.gpu_classes == klass]

    def classes_of(self, nodes: np.ndarray) -> np.ndarray:
        """``gpu_classes`` of some GPU nodes."""
        nodes = np.asarray(nodes, dtype=np.int64)
        return self.gpu_classes[np.searchsorted(self._gpu_nodes, nodes)] if nodes.size else np.zeros(0, dtype=object)

    @cached_property
    def _culaunch_names(self) -> np.ndarray:
        return np.array([n.startswith("cuLaunchKernel") for n in self.tree.names], dtype=bool)

    def row_classes(self, nodes: np.ndarray) -> dict[str, float]:
        """Device µs of each class among one name's instances (a kernel-table row's ``nodes``),
        biggest first: one entry when every instance has the same class."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if not nodes.size:
            return {}
        cls = self.classes_of(nodes)
        dur = self.tree.dur[nodes].astype(np.float64)
        out: dict[str, float] = {}
        for c, d in zip(cls.tolist(), dur.tolist()):
            out[c] = out.get(c, 0.0) + d / 1e3
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def row_info(self, nodes: np.ndarray) -> tuple[KernelName, dict[str, float]]:
        """(what one name is, its classes' µs): the name is decoded at an instance of the class
        that holds most of its time, so class and library agree with the row's time."""
        classes = self.row_classes(nodes)
        nodes = np.asarray(nodes, dtype=np.int64)
        if not classes:
            return self.kernel_info(int(nodes[0])), classes
        top = next(iter(classes))
        at = nodes[self.classes_of(nodes) == top][0]
        return self.kernel_info(int(at)), classes

    def table_classes(self, rows: list[np.ndarray]) -> list[tuple[str, str, dict[str, float], dict[str, int]]]:
        """For each kernel-table row's ``nodes``: ``row_info``'s class and library, its
        ``row_classes`` and the instances per class, every row at once: per row, ``row_info``
        (three ``classes_of`` and a ``kernel_info``) took ~50 µs, most of a summary of 10^6
        distinct kernel names (issue 44.15). Class and library are ``gpu_classes`` and
        ``gpu_libraries`` at the row's first instance of its biggest class."""
        if not rows:
            return []
        lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        nodes = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows])
        at = np.searchsorted(self._gpu_nodes, nodes)
        # one (row, class) pair per row and class its instances have, in order of first instance
        # (the order the per-instance loop this replaced filled its dicts in): sums by bincount,
        # which adds each instance's µs in node order, as that loop did
        n_cls = len(self._class_names)
        key = np.repeat(np.arange(len(rows), dtype=np.int64), lens) * n_cls + self._gpu_class_codes[at]
        pairs, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.ravel()
        us = np.bincount(inv, weights=self.tree.dur[nodes].astype(np.float64) / 1e3, minlength=pairs.size).tolist()
        count = np.bincount(inv, minlength=pairs.size).tolist()
        order = np.argsort(first, kind="stable")  # rows ascend with first instance too
        row_of = (pairs // n_cls)[order].tolist()
        names, lib = self._class_names, self.gpu_libraries[at]
        out: list = [None] * len(rows)
        for j, r in zip(order.tolist(), row_of):
            c = names[pairs[j] % n_cls]
            if out[r] is None:
                out[r] = ({}, {}, [])
            out[r][0][c] = us[j]
            out[r][1][c] = count[j]
            out[r][2].append((us[j], int(first[j])))
        result = []
        for by_us, counts, firsts in out:
            top = max(firsts, key=lambda f: f[0])[1] if len(firsts) > 1 else firsts[0][1]  # the first biggest
            by_us = dict(sorted(by_us.items(), key=lambda kv: -kv[1])) if len(by_us) > 1 else by_us
            result.append((self.gpu_classes[at[top]], lib[top], by_us, counts))
        return result
