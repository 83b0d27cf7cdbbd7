"""Collectives matched across ranks: the unpaired point-to-point rows set aside, a subgroup's
gloo collectives placed in their group, and each collective given the key that names it on every
rank (``Seq``, ``Comms Id``, else its order in its group).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetui.jobs.placement import spans

UNRECORDED = "default"
"""The group of collectives whose records name none (gloo's annotations, an NCCL annotation
without its kernel): the default process group, and any subgroup ``backend_groups`` cannot place."""


def _without_unpaired_p2p(coll: dict) -> tuple[dict, dict]:
    """``coll`` without the point-to-point rows no id pairs (a backend annotation's send/recv with
    no group, sequence or comms id), and how many each rank had. Matched by order with the
    world's collectives, a send on rank 0 to rank 1 was 'the same collective' as unrelated
    sends and recvs on every other rank, with waits and a last arriver (``STRAGGLER_SQL`` drops
    the same rows)."""
    drop = [i for i, (kind, src, g, seq, cid) in enumerate(zip(coll.get("kind", []), coll.get("source", []),
                                                               coll.get("group", []), coll.get("seq", []),
                                                               coll.get("comms_id", [])))
            if kind == "p2p" and src == "annotation" and not g and seq < 0 and not cid]
    if not drop:
        return coll, {}
    counts: dict = {}
    for i in drop:
        counts[coll["rank"][i]] = counts.get(coll["rank"][i], 0) + 1
    gone = set(drop)
    return {k: [v for i, v in enumerate(vals) if i not in gone] for k, vals in coll.items()}, counts


def _subgroups_not_told_apart(info: dict, coll: dict) -> list[str]:
    """The process groups smaller than the job that ``pg_config`` lists but that no collective was
    placed in, when the backend's annotations name no group (gloo): their collectives, if any
    ran, sit in the default group's order (``backend_groups`` needs a signature that only their
    ranks hold; without ``record_shapes`` every all-reduce looks alike)."""
    if not any(src == "annotation" and not g for src, g in zip(coll.get("source", []), coll.get("group", []))):
        return []
    n = len(set(info.get("rank", [])))
    names = {str(g["name"]) for gl in (info.get("groups") or []) for g in (gl or [])
             if isinstance(g, dict) and g.get("ranks") and len(set(g["ranks"])) < n and str(g["name"]) != "0"}
    # "0": torch's default group, the world (a generated job may still list its source's world)
    missing = sorted(names - {str(g) for g in coll.get("group", []) if g})
    if not missing:
        return []
    return [f"process group(s) {', '.join(missing)} (smaller than the job, in pg_config) hold no collective "
            f"told apart as theirs: any they ran are matched in the default group's order (record with "
            f"record_shapes=True so their sizes tell them apart)"]


def backend_groups(info: dict, coll: dict, world: int | None = None) -> dict:
    """``coll`` with the process group filled in where the backend's annotations leave it out.

    gloo's ``gloo:*`` annotations carry no group, and gloo runs each process group on its own
    worker threads, so a subgroup's collectives interleave with the default group's. A collective
    signature (name, dtype, size) held by exactly the ranks of one process group smaller than the
    job (``distributedInfo.pg_config``; members absent from the job left out, so a subgroup with
    one member left still takes that rank's collectives out of the world's order) is that group's: its
    rows get the group's name and size (an all-gather's size, reckoned with the world size, is
    rescaled to the group's). Everything else keeps no group. ``STRAGGLER_SQL`` does the same."""
    free = [i for i, (src, g) in enumerate(zip(coll.get("source", []), coll.get("group", []))) if src == "annotation" and not g]
    # the ranks that hold such collectives: a rank with none (its annotations cut away) must not
    # make the world's collectives look like those of a subgroup of the others
    present = sorted({coll["rank"][i] for i in free})
    groups = info.get("groups") or [[] for _ in info.get("rank", [])]
    by_set: dict = {}
    sizes: dict = {}
    for gl in groups:
        for g in gl or []:
            rs = tuple(r for r in sorted(set(g["ranks"])) if r in set(present))
            if 1 <= len(rs) < len(present):  # one present member: the others are missing from the folder
                by_set[rs] = min(by_set.get(rs, g["name"]), g["name"])
                sizes[(rs, g["name"])] = len(g["ranks"])
    if not by_set or not coll.get("rank"):
        return coll
    holders: dict = {}
    for i in free:
        holders.setdefault((coll["name"][i], coll["dtype"][i], coll["msg_bytes"][i]), set()).add(coll["rank"][i])
    out = {**coll, "group": list(coll["group"]), "group_size": list(coll["group_size"]),
           "msg_bytes": list(coll["msg_bytes"])}
    world = world or len(present)
    for i in free:
        rs = tuple(sorted(holders[(coll["name"][i], coll["dtype"][i], coll["msg_bytes"][i])]))
        if rs in by_set:
            name = by_set[rs]
            n = sizes[(rs, name)]
            out["group"][i] = name
            if out["group_size"][i] <= 0:
                out["group_size"][i] = n
                m = out["msg_bytes"][i]
                if coll["kind"][i] == "all_gather" and m > 0 and m % world == 0:
                    out["msg_bytes"][i] = m // world * n
    return out


def match_keys(coll: dict) -> tuple[list, dict]:
    """The key that matches each collective across ranks, and how each group was matched.

    Per group (``Process Group Name``; NCCL kernels without one by their stream, since each
    communicator has its own; annotations with none in ``UNRECORDED``, after ``backend_groups``
    placed a subgroup's): ``seq`` when every record of the
    group has ``Seq``, ``comms_id`` when every one has ``Comms Id``, else ``order``, the ordinal
    in start order on its rank.
    """
    n = len(coll["rank"])
    group = [g if g else (f"stream {s}" if src == "kernel" and s >= 0 else UNRECORDED)
             for g, s, src in zip(coll["group"], coll["stream"], coll["source"])]
    by_group: dict = {}
    for i in range(n):
        by_group.setdefault(group[i], []).append(i)
    how = {}
    keys = [None] * n
    for g, idx in by_group.items():
        if all(coll["seq"][i] >= 0 for i in idx):
            how[g] = "seq"
            for i in idx:
                keys[i] = (g, "seq", coll["seq"][i])
        elif all(coll["comms_id"][i] for i in idx):
            how[g] = "comms_id"
            for i in idx:
                keys[i] = (g, "id", coll["comms_id"][i])
        else:
            how[g] = "order"
            per_rank: dict = {}
            for i in sorted(idx, key=lambda i: (coll["rank"][i], coll["start_ns"][i], coll["end_ns"][i])):
                k = per_rank.get(coll["rank"][i], 0)
                per_rank[coll["rank"][i]] = k + 1
                keys[i] = (g, "order", k)
    return keys, how


def _key_str(k) -> str:
    g, how, v = k
    return f"{g or 'default'}#{v}" if how == "order" else f"{g or 'default'} {how} {v}"



@dataclass
class Matched:
    """The job's collectives (columns, every rank), each one's key, how each group was matched,
    and per key the rows of its ranks; ``rank``, ``start`` and ``end`` as int64 arrays."""
    coll: dict
    keys: list
    how: dict
    by_key: dict
    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray


def prepare(info: dict, coll: dict, world: int | None, diags: list[str]) -> dict:
    """The collectives to match: unpaired point-to-point rows left out (``_without_unpaired_p2p``,
    as ``STRAGGLER_SQL``'s first step), a subgroup's annotations placed (``backend_groups``);
    what could not be done is said in ``diags``."""
    coll, p2p = _without_unpaired_p2p(coll)
    coll = backend_groups(info, coll, world)
    diags += _subgroups_not_told_apart(info, coll)
    if p2p:
        diags.append(f"{sum(p2p.values())} point-to-point transfer(s) left out of matching and waits "
                     f"(gloo's send/recv annotations name no peer; " + ", ".join(f"rank {r}: {n}" for r, n in sorted(p2p.items()))
                     + "): a send pairs with one rank's recv, not with every rank's")
    return coll


def match(coll: dict, diags: list[str]) -> Matched:
    """Every collective's key (``match_keys``) and the rows of each key; a key held twice by one
    rank is said."""
    keys, how = match_keys(coll) if coll.get("rank") else ([], {})
    by_key: dict = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    for k, rows in by_key.items():
        rs = [coll["rank"][i] for i in rows]
        if len(set(rs)) != len(rs):
            diags.append(f"collective {_key_str(k)} appears more than once on rank(s) "
                         f"{spans(sorted({r for r in rs if rs.count(r) > 1}))}")
    arr = lambda c: np.array(coll.get(c, []), dtype=np.int64)  # noqa: E731
    return Matched(coll, keys, how, by_key, arr("rank"), arr("start_ns"), arr("end_ns"))


def unequal_counts(m: Matched, diags: list[str]) -> list[str]:
    """Groups whose ranks hold different numbers of collectives (said in ``diags``); returned, the
    reasons the matching cannot be trusted (a group matched by order shifts after a gap)."""
    expected: dict = {}
    for k, rows in m.by_key.items():
        expected.setdefault(k[0], set()).update(m.coll["rank"][i] for i in rows)
    unsure = []
    for g, members in expected.items():
        per = {r: 0 for r in members}
        for k, rows in m.by_key.items():
            if k[0] == g:
                for i in rows:
                    per[m.coll["rank"][i]] += 1
        if len(set(per.values())) > 1:
            diags.append(f"group {g or 'default'}: ranks hold different numbers of collectives: "
                         + ", ".join(f"rank {r}: {c}" for r, c in sorted(per.items())))
            if m.how.get(g) == "order":  # one collective missing on a rank shifts every match after it
                unsure.append(f"group {g or 'default'} is matched by order and its ranks hold different "
                              f"numbers of collectives (a rank cut short, or one the others lack)")
    return unsure


def unlike_kinds(m: Matched) -> list[str]:
    """The reasons the matching cannot be trusted where a group matched by order pairs collectives
    of different kinds across ranks (an all-reduce with an all-to-all): NCCL runs a communicator's
    collectives in one order on every rank, so the order is off (a sampled or cut recording), and
    the waits and last arrivers of those pairs compare unrelated collectives."""
    out = []
    for g in sorted({k[0] for k in m.by_key if m.how.get(k[0]) == "order"}, key=str):
        keys = [k for k in m.by_key if k[0] == g]
        unlike = [k for k in keys if len({m.coll["kind"][i] for i in m.by_key[k]}) > 1]
        if unlike:
            kinds = sorted({m.coll["kind"][i] for k in unlike for i in m.by_key[k]})
            out.append(f"group {g or 'default'} is matched by order and {len(unlike)} of {len(keys)} of its "
                       f"collectives pair different kinds across ranks ({', '.join(kinds)}): the ranks' "
                       f"orders differ (a sampled or cut recording)")
    return out


def group_members(m: Matched) -> dict:
    """Per group, the ranks that hold any of its collectives."""
    out: dict = {}
    for k, rows in m.by_key.items():
        out.setdefault(k[0], set()).update(m.coll["rank"][i] for i in rows)
    return out
