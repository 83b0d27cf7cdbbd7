"""Record a small multi-process job on CPU with torch.distributed (gloo), one rank slowed on purpose.

Each of ``world`` processes trains a DDP MLP and runs explicit collectives (all_reduce,
all_gather, broadcast) under torch.profiler, then writes ``job_rank-N.pt.trace.json``. The slow
rank sleeps before its forward and before each explicit collective, so it arrives last and the
others wait for it. Every step ends with its collectives complete, so the edges of the
recording cut none and every rank records the same collectives.

``comm_heavy``: each step also all-reduces ``COMM_HEAVY_ELEMS`` floats a few times, so the
collectives take most of the step (the case of issue 36: gloo's time must count as
communication). ``device="cuda"``: the model and its gradients live on the GPU (every rank on
``cuda:(rank % device count)``) and gloo still moves them: DDP on GPU ranks over gloo.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WORK_DIM = 512
"""Side of the square matmuls a step runs ``more_work[1]`` times (twice on the heavy rank)."""

COMM_HEAVY_ELEMS = 1 << 21
"""Floats each of ``comm_heavy``'s all-reduces moves (8 MiB): tens of ms a call on gloo over
loopback, against well under a ms of compute in the step."""


def _worker(rank: int, world: int, out: str, port: int, slow_rank: int, slow_s: float, steps: int,
            subgroup: tuple = (), p2p: bool = False, comm_heavy: bool = False, device: str = "cpu",
            late: tuple = (-1, 0.0), more_work: tuple = (-1, 0)) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    dev = torch.device(device if device == "cpu" else f"cuda:{rank % torch.cuda.device_count()}")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(16, 64, device=dev)
    heavy = torch.ones(COMM_HEAVY_ELEMS, device=dev) if comm_heavy else None
    sub = dist.new_group(list(subgroup)) if subgroup else None  # every rank takes part in creating it

    def slow() -> None:
        if rank == slow_rank:
            time.sleep(slow_s)

    work = torch.randn(WORK_DIM, WORK_DIM, device=dev)

    def step() -> None:
        if rank == late[0]:  # starts the step's work late: before any op of the step
            time.sleep(late[1])
        for _ in range(more_work[1] * (2 if rank == more_work[0] else 1)):  # the heavy rank computes twice as long
            torch.mm(work, work)
        slow()
        loss = ddp(x).square().mean()
        loss.backward()            # DDP all-reduces the gradients here
        opt.step()
        opt.zero_grad()
        t = torch.full((1024,), float(rank), device=dev)
        for _ in range(3 if heavy is not None else 0):
            dist.all_reduce(heavy)
        slow()
        dist.all_reduce(t)
        got = [torch.zeros(256, device=dev) for _ in range(world)]
        slow()
        dist.all_gather(got, torch.ones(256, device=dev))
        if sub is not None:  # a subgroup's collective between two of the world's, then a reduce-scatter
            if rank in subgroup:
                dist.all_reduce(torch.ones(2048, dtype=torch.float64), group=sub)
            dist.reduce_scatter_tensor(torch.empty(128), torch.ones(128 * world))
        if p2p:  # a ring of blocking sends: each rank to the next, from the one before (rank 0 first)
            got, mine = torch.empty(512), torch.full((512,), float(rank))
            if rank == 0:
                dist.send(mine, 1 % world)
                dist.recv(got, world - 1)
            else:
                dist.recv(got, rank - 1)
                dist.send(mine, (rank + 1) % world)
        slow()
        dist.broadcast(t, 0)

    step()  # DDP's first iteration (bucket rebuild) stays out of the recording
    dist.barrier()
    path = str(Path(out) / f"job_rank-{rank}.pt.trace.json")
    # one warm-up step then the recorded ones: ProfilerStep#N markers need a schedule; each step
    # ends with its collectives done, so no collective straddles the edge of the recording
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    dist.barrier()
    dist.barrier()
    dist.destroy_process_group()


def record_gloo_job(out_dir, world: int = 3, slow_rank: int = 1, slow_s: float = 0.01,
                    steps: int = 3, subgroup: tuple = (), p2p: bool = False, comm_heavy: bool = False,
                    device: str = "cpu", late: tuple = (-1, 0.0), more_work: tuple = (-1, 0)) -> list[Path]:
    """Run the job and return the rank files, rank order. With ``subgroup`` (ranks), each step
    also runs an all-reduce on a ``new_group`` of those ranks and a reduce-scatter on the world
    (gloo runs it as an all-reduce); with ``p2p``, a ring of send/recv; ``comm_heavy`` and
    ``device``: the module docstring. ``late`` (rank, seconds): that rank sleeps at the start of
    each step, before any op (it starts the step late); ``more_work`` (rank, n): every rank runs ``n``
    matmuls a step before its forward, that rank ``2n`` (it computes longer)."""
    import torch.multiprocessing as mp
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_worker, args=(world, str(out), _free_port(), slow_rank, slow_s, steps, tuple(subgroup), p2p,
                            comm_heavy, device, tuple(late), tuple(more_work)),
             nprocs=world, join=True)
    return [out / f"job_rank-{r}.pt.trace.json" for r in range(world)]


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="record a small gloo job")
    ap.add_argument("out", nargs="?", default="gloo_job")
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--comm-heavy", action="store_true")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    print(record_gloo_job(a.out, world=a.world, steps=a.steps, comm_heavy=a.comm_heavy, device=a.device))
