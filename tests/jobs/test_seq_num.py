"""NCCL ranks whose kernels carry ``seq_num`` (kineto#1296): collectives matched by it, not by their
order, when a rank's recording lacks one the others hold; and NCCL's kernel names old and new
(``ncclKernel_*``, ``ncclDevKernel_*``, HTA#360) read as communication. Synthetic ranks written here,
references computed from their JSON."""
from __future__ import annotations

from pathlib import Path

import pytest

from .gpu_rank import MAIN, GpuRank
from .test_ranks import ns, ranks_json

NAMES = {"new": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "old": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"}


def nccl_rank(path: Path, rank: int, world: int, seqs: list, stream: int, kname: str, seq_key: str | None = "seq_num"):
    """A GPU rank of ``len(seqs)`` steps: a GEMM, then an all-reduce whose NCCL kernel carries its
    sequence number under ``seq_key`` (None: none); a step whose seq is None has no collective."""
    r = GpuRank(stream)
    x, launch = r.x, r.launch
    for k, seq in enumerate(seqs):
        t = 1000.0 + k * 3000
        x("user_annotation", f"ProfilerStep#{k}", MAIN, t, 2500)
        launch("aten::mm", t + 20, "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_TNT", t + 40, 400 + 30 * rank)
        if seq is not None:
            at = t + 700 + (37 * rank + 53 * k) % 300
            args = {"Process Group Name": "0", "Collective name": "allreduce", "dtype": "Float",
                    "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": world}
            if seq_key:
                args[seq_key] = seq
            launch("c10d::allreduce_", at - 30, kname, at, 500, **args)
    return r.write(path, rank, world)


def _kernels(doc: dict, prefix: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith(prefix)]


def test_seq_num_matches_what_order_would_shift(tmp_path, capsys):
    """Rank 1's recording lacks collective 0: by order its first would pair with rank 0's first,
    every match one off; by ``seq_num`` each pairs with its own, waits as the raw JSON says."""
    d = tmp_path / "job"
    d.mkdir()
    docs = {0: nccl_rank(d / "rank0.json", 0, 2, [0, 1, 2, 3], 7, NAMES["new"]),
            1: nccl_rank(d / "rank1.json", 1, 2, [None, 1, 2, 3], 13, NAMES["new"])}
    out = ranks_json(capsys, d)
    assert out["matched_by"] == {"0": "seq"}
    start = {r: {e["args"]["seq_num"]: ns(e["ts"]) for e in _kernels(doc, "ncclDevKernel")} for r, doc in docs.items()}
    both = sorted(set(start[0]) & set(start[1]))
    assert both == [1, 2, 3]
    got = {c["index"]: c for c in out["collectives"] if c["ranks"] == 2}
    assert sorted(got) == both
    for k in both:
        latest = max(start[r][k] for r in start)
        assert {p["rank"]: round(p["wait_us"] * 1000) for p in got[k]["per_rank"]} == \
            {r: latest - start[r][k] for r in start}
        assert got[k]["last_rank"] == max(start, key=lambda r: start[r][k])


def test_without_seq_num_the_same_ranks_match_by_order(tmp_path, capsys):
    """The control: the same ranks with no sequence number are matched by order (and said to be
    unreliable, since the ranks hold different numbers of collectives)."""
    d = tmp_path / "job"
    d.mkdir()
    nccl_rank(d / "rank0.json", 0, 2, [0, 1, 2, 3], 7, NAMES["new"], seq_key=None)
    nccl_rank(d / "rank1.json", 1, 2, [None, 1, 2, 3], 13, NAMES["new"], seq_key=None)
    out = ranks_json(capsys, d)
    assert out["matched_by"] == {"0": "order"}
    assert any("different numbers of collectives" in x for x in out["diagnostics"])


@pytest.mark.parametrize("which", sorted(NAMES))
def test_nccl_kernel_names_are_communication(tmp_path, capsys, which):
    """Either NCCL naming: each step's communication is the union of its NCCL kernels (raw JSON),
    its compute the GEMM's, and every NCCL kernel is a collective."""
    d = tmp_path / "job"
    d.mkdir()
    docs = {r: nccl_rank(d / f"rank{r}.json", r, 2, [0, 1, 2], 7, NAMES[which]) for r in (0, 1)}
    out = ranks_json(capsys, d)
    prefix = NAMES[which].split("_")[0]
    assert len(out["collectives"]) == 3 and all(c["ranks"] == 2 for c in out["collectives"])
    for s in out["steps"]:
        doc = docs[s["rank"]]
        step = next(e for e in doc["traceEvents"] if e["name"] == s["name"])
        lo, hi = ns(step["ts"]), ns(step["ts"]) + ns(step["dur"])
        comm = [e for e in _kernels(doc, prefix) if lo <= ns(e["ts"]) < hi]
        gemm = [e for e in _kernels(doc, "nvjet") if lo <= ns(e["ts"]) < hi]
        assert round(s["comm_us"] * 1000) == sum(ns(e["dur"]) for e in comm) > 0
        assert round(s["compute_us"] * 1000) == sum(ns(e["dur"]) for e in gemm) > 0
