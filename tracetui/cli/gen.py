"""``tracetui gen WORKLOAD``: record a bundled workload under torch.profiler (needs torch)."""
from __future__ import annotations

import sys
from pathlib import Path

from tracetui.cli.common import CliError

NAMES = ("gen",)


def add_parser(sub) -> None:
    gen = sub.add_parser("gen", help="record a bundled workload under torch.profiler (needs torch)")
    gen.add_argument("workload", nargs="?", choices=("linear", "mlp", "transformer"))
    gen.add_argument("--impl", default="eager",
                     choices=("eager", "compile", "triton", "fused", "fused-compile", "fused-graphs"))
    gen.add_argument("--all", action="store_true", help="record the whole ladder into -o DIR")
    gen.add_argument("--device", choices=("cuda", "cpu"), default=None)
    gen.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None)
    gen.add_argument("--no-stack", dest="with_stack", action="store_false",
                     help="skip Python stacks (eager nn.Module scopes need them on torch <= 2.11)")
    gen.add_argument("--active", type=int, default=3, help="profiled steps")
    gen.add_argument("--mode", default=None, help="torch.compile mode with --impl compile, e.g. max-autotune-no-cudagraphs")
    gen.add_argument("--step-marker", choices=("profiler", "record_function"), default="profiler",
                     help="ProfilerStep#N (schedule) or record_function('train_step_<i>') with no ProfilerStep")
    gen.add_argument("--memory", action="store_true", help="profile_memory=True: [memory] alloc/free events")
    gen.add_argument("--backward-thread", action="store_true",
                     help="CPU: run backward on a torch thread, as CUDA autograd does (transformer)")
    gen.add_argument("--train", action="store_true",
                     help="mlp: a training step (forward, loss, backward, AdamW); --impl fused uses its fused backward")
    for name in ("batch", "seq", "dim", "hidden", "in-features", "out-features", "heads", "layers", "vocab"):
        gen.add_argument(f"--{name}", type=int, default=None)
    gen.add_argument("-o", "--output", type=Path, default=None, help="file (or folder with --all)")


def run(args) -> int:
    try:
        import torch
    except ImportError:
        raise CliError("`tracetui gen` needs torch: pip install -e '.[gen]'") from None
    from tracetui.workloads.models import workloads
    from tracetui.workloads.record import default_device, ladder, ladder_filename, record
    sizes = {k: getattr(args, k) for k in ("batch", "seq", "dim", "hidden", "in_features", "out_features",
                                           "heads", "layers", "vocab")}
    dtype = getattr(torch, args.dtype) if args.dtype else None
    device = args.device or default_device()
    if args.train and (args.all or args.workload != "mlp"):
        raise CliError("gen: --train is for the mlp workload (transformer always trains)")
    ws = workloads(device=device, train_mlp=args.train, **sizes)
    options = dict(mode=args.mode, step_marker=args.step_marker, memory=args.memory,
                   backward_thread=args.backward_thread)
    jobs = []
    if args.all:
        from tracetui.cli.opener import BUNDLED
        out_dir = args.output or BUNDLED
        for wl, impl, stack in ladder():
            if (impl == "triton" or impl.startswith("fused")) and device != "cuda":
                print(f"[tracetui gen] skipping {wl}/{impl}: needs CUDA", file=sys.stderr)
                continue
            jobs.append((ws[wl], impl, stack, out_dir / ladder_filename(wl, impl, stack)))
    else:
        if not args.workload:
            raise CliError("gen: name a workload (linear, mlp, transformer) or pass --all")
        name = f"{args.workload}_train" if args.train and args.workload == "mlp" else args.workload
        out = args.output or Path(ladder_filename(name, args.impl, args.with_stack))
        jobs.append((ws[args.workload], args.impl, args.with_stack, out))
    from tracetui.atomic import UnsafeTarget, target_kind
    for *_, out in jobs:  # -o a block device, socket or folder: one line before any recording
        try:
            target_kind(out)
        except UnsafeTarget as e:
            raise CliError(f"gen: -o {e}") from None
    failed = []
    for i, (w, impl, stack, out) in enumerate(jobs):
        print(f"[tracetui gen] ({i + 1}/{len(jobs)}) {w.name}/{impl}{' +stack' if stack else ''}", file=sys.stderr)
        try:
            path = record(w, impl, out, device=device, dtype=dtype, with_stack=stack, active=args.active, **options)
        except ValueError as e:
            if len(jobs) == 1:
                raise CliError(str(e)) from None
            failed.append(f"{w.name}/{impl}: {e}")
            continue
        except Exception as e:  # --all keeps recording the other rungs, then reports this one
            if len(jobs) == 1:
                raise
            failed.append(f"{w.name}/{impl}: {type(e).__name__}: {e}")
            continue
        from tracetui.report.output import write_line
        write_line(str(path))
    if failed:
        raise CliError(f"{len(failed)} of {len(jobs)} recordings failed: " + "; ".join(failed))
    return 0
