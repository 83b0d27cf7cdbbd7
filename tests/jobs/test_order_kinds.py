"""Ranks matched by order whose collectives pair an all-reduce with an all-to-all: the order is off
(a sampled or cut recording, HTA's ``trace_filter_sampled_rank-0/1``), so every wait and the last
arriver of those pairs compare unrelated collectives. The straggler is withheld, as it is when the
ranks hold different numbers of collectives, and the reason is said. Synthetic ranks written here;
the pairs whose kinds differ are worked out from their JSON."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PEER

from .gpu_rank import MAIN, GpuRank
from .test_ranks import ranks_json

STREAM = 7
KERNEL = {"allreduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
          "all_to_all": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"}
C10D = {"allreduce": "c10d::allreduce_", "all_to_all": "c10d::alltoall_base_"}


def nccl_rank(path: Path, rank: int, world: int, order: list[list[str]], late_us: float) -> dict:
    """A GPU rank of ``len(order)`` steps: a GEMM, then the step's collectives in the order given
    (NCCL kernels with their metadata, no sequence number), each ``late_us`` after rank 0's time."""
    r = GpuRank(STREAM)
    x, launch = r.x, r.launch
    for k, names in enumerate(order):
        t = 1000.0 + k * 5000
        x("user_annotation", f"ProfilerStep#{k}", MAIN, t, 4500)
        launch("aten::mm", t + 20, "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_TNT", t + 40, 400)
        for j, name in enumerate(names):
            at = t + 700 + 1500 * j + late_us
            args = {"Process Group Name": "0", "Collective name": name, "dtype": "Float",
                    "In msg nelems": 1024 * (j + 1), "Out msg nelems": 1024 * (j + 1), "Group size": world}
            launch(C10D[name], at - 30, KERNEL[name], at, 500, **args)
    return r.write(path, rank, world)


def _names_in_order(doc: dict) -> list[str]:
    """The ``Collective name`` of each NCCL kernel of a rank, in start order (the raw JSON)."""
    ks = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")),
                key=lambda e: e["ts"])
    return [e["args"]["Collective name"] for e in ks]


def test_order_pairing_unlike_collectives_names_no_straggler(tmp_path, capsys):
    d = tmp_path / "job"
    d.mkdir()
    steps = [["allreduce", "all_to_all"]] * 3
    docs = {0: nccl_rank(d / "rank0.json", 0, 2, steps, 0.0),
            # rank 1 arrives 300 µs late at everything, and in its second step runs the two swapped
            1: nccl_rank(d / "rank1.json", 1, 2, [steps[0], steps[1][::-1], steps[2]], 300.0)}
    a, b = (_names_in_order(docs[r]) for r in (0, 1))
    assert len(a) == len(b)  # equal counts: the check that exists already does not fire
    unlike = sum(x != y for x, y in zip(a, b))
    assert unlike == 2
    out = ranks_json(capsys, d)
    assert out["matched_by"] == {"0": "order"}
    said = [x for x in out["diagnostics"] if "disagree on name" in x]
    assert len(said) == unlike, out["diagnostics"]
    assert out["straggler"]["rank"] is None, out["straggler"]
    assert "not reliable" in out["straggler"]["evidence"]
    assert f"{unlike} of {len(a)}" in out["straggler"]["evidence"]


def test_order_pairing_like_collectives_still_names_the_late_rank(tmp_path, capsys):
    """The control: the same ranks without the swap name rank 1, late at every collective."""
    d = tmp_path / "job"
    d.mkdir()
    steps = [["allreduce", "all_to_all"]] * 3
    for r, late in ((0, 0.0), (1, 300.0)):
        nccl_rank(d / f"rank{r}.json", r, 2, steps, late)
    out = ranks_json(capsys, d)
    assert out["matched_by"] == {"0": "order"}
    assert not [x for x in out["diagnostics"] if "disagree on name" in x]
    assert out["straggler"]["rank"] == 1, out["straggler"]


@pytest.mark.skipif(not (PEER / "trace_filter_sampled_rank-0.json.gz").is_file(), reason="../shared/peer-traces absent")
def test_sampled_ranks_of_hta_name_no_straggler(capsys):
    """HTA's two sampled ranks: their stream-84 collectives run in other orders (the sampling), so
    order pairs all-reduces with all-to-alls; no straggler is named on that."""
    out = ranks_json(capsys, PEER / "trace_filter_sampled_rank-0.json.gz", PEER / "trace_filter_sampled_rank-1.json.gz")
    assert any("disagree on name" in x for x in out["diagnostics"])
    assert out["straggler"]["rank"] is None, out["straggler"]
    assert "not reliable" in out["straggler"]["evidence"]
