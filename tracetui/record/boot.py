"""Inside the recorded process: start torch.profiler, run the user's program unchanged, write the trace.

``tracetui record`` starts ``python -c BOOT script|module TARGET ARGS`` with the settings in the
environment (``TRACETUI_RECORD``, JSON). Under torchrun each worker is such a process, so each rank
records itself (``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` from torchrun's environment). Steps are
taken at each optimizer step (torch's global optimizer step hooks: no edit to the program) or at
the exit of each ``record_function`` whose name matches the marker the user named.
"""
from __future__ import annotations

import datetime as _dt
import gzip
import json
import os
import platform
import re
import runpy
import socket
import sys
import traceback
from pathlib import Path

ENV = "TRACETUI_RECORD"
"""Environment variable carrying the recorder's settings from ``tracetui record`` to the process."""

BOOT = "import tracetui.record.boot as b; b.main()"
"""What ``python -c`` runs: the bootstrap, before the user's program."""

PROVENANCE_KEY = "tracetui"
"""Top-level trace key with how the trace was made (the key ``tracetui gen`` writes too)."""


def trace_name(host: str, rank: int, cycle: int | None) -> str:
    """``<host>.rank<R>[.cycle<k>].pt.trace.json.gz``: rank and host in the name, as tools that
    read a folder of ranks (tracetui ranks, HTA) expect; a cycle index only when repeating."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    return f"{safe}.rank{rank}{'' if cycle is None else f'.cycle{cycle}'}.pt.trace.json.gz"


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


class Recorder:
    """torch.profiler around the whole program, stepped by optimizer steps or a marker."""

    def __init__(self, cfg: dict):
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule
        self.torch, self.cfg = torch, cfg
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
        self.world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.host = socket.gethostname()
        self.out = Path(cfg["out"])
        self.cuda = torch.cuda.is_available()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.repeat = int(cfg.get("repeat", 1))
        self.prof = profile(
            activities=acts,
            schedule=schedule(wait=int(cfg.get("wait", 1)), warmup=int(cfg.get("warmup", 1)),
                              active=int(cfg.get("active", 3)), repeat=self.repeat),
            on_trace_ready=self._ready, record_shapes=bool(cfg.get("shapes")),
            profile_memory=bool(cfg.get("memory")), with_stack=bool(cfg.get("stack")), with_modules=True)
        self.cycle = 0
        self.steps = 0
        self.written: list[str] = []
        self._first_opt = None
        self._undo = []

    # ---- steps
    def _step(self) -> None:
        self.steps += 1
        self.prof.step()

    def _opt_hook(self, opt, args, kwargs) -> None:
        """One step per step of the first optimizer seen (a GAN's two optimizers: one step)."""
        if self._first_opt is None:
            self._first_opt = id(opt)
        if id(opt) == self._first_opt:
            self._step()

    def _install_steps(self) -> None:
        marker = self.cfg.get("steps")
        if marker:
            rx = re.compile(marker)
            from torch.autograd.profiler import record_function
            orig = record_function.__exit__
            rec = self

            def __exit__(self, *exc):  # noqa: N807 - patched onto record_function
                r = orig(self, *exc)
                if rx.search(getattr(self, "name", "") or ""):
                    rec._step()
                return r
            record_function.__exit__ = __exit__
            self._undo.append(lambda: setattr(record_function, "__exit__", orig))
        else:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            h = register_optimizer_step_post_hook(self._opt_hook)
            self._undo.append(h.remove)

    # ---- life
    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self._install_steps()
        self.prof.start()

    def stop(self) -> None:
        """Stop the profiler: a cycle still recording (the program failed or ended mid-cycle) is
        written with the steps it has."""
        for undo in self._undo:
            undo()
        try:
            self.prof.stop()
        except Exception as e:  # noqa: BLE001 - the program's own exit code matters more
            print(f"[tracetui record] rank {self.rank}: profiler did not stop cleanly: {e}", file=sys.stderr)
        if not self.written:
            why = ("no optimizer step was taken" if not self.cfg.get("steps")
                   else f"no record_function matching {self.cfg['steps']!r} ended") if self.steps == 0 else \
                  f"{self.steps} step(s) were taken, fewer than the schedule's wait + warmup"
            print(f"[tracetui record] rank {self.rank}: nothing recorded: {why}", file=sys.stderr)

    def provenance(self) -> dict:
        torch = self.torch
        c = self.cfg
        return {
            "recorder": "record", "torch": torch.__version__,
            "cuda": torch.version.cuda if self.cuda else None,
            "device": torch.cuda.get_device_name(self.local_rank % max(1, torch.cuda.device_count()))
            if self.cuda else (platform.processor() or "cpu"),
            "device_type": "cuda" if self.cuda else "cpu",
            "rank": self.rank, "local_rank": self.local_rank, "world_size": self.world, "host": self.host,
            "schedule": {k: int(c.get(k, d)) for k, d in (("wait", 1), ("warmup", 1), ("active", 3), ("repeat", 1))},
            "step_marker": f"record_function:{c['steps']}" if c.get("steps") else "optimizer",
            "with_stack": bool(c.get("stack")), "record_shapes": bool(c.get("shapes")),
            "profile_memory": bool(c.get("memory")), "cycle": self.cycle,
            "program": c.get("program"), "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }

    def _ready(self, prof) -> None:
        """Write this cycle's trace with provenance, atomically (a temporary name, then rename)."""
        cycle = self.cycle
        self.cycle += 1
        name = trace_name(self.host, self.rank, None if self.repeat == 1 else cycle)
        final = self.out / name
        raw = self.out / f".{name}.{os.getpid()}.json.tmp"
        tmp = self.out / f".{name}.{os.getpid()}.tmp"
        try:
            prof.export_chrome_trace(str(raw))
            doc = json.loads(raw.read_text(encoding="utf-8", errors="replace"))
            doc[PROVENANCE_KEY] = self.provenance()
            with gzip.open(tmp, "wb", compresslevel=6) as f:
                f.write(json.dumps(doc, separators=(",", ":")).encode())
            os.replace(tmp, final)
            self.written.append(str(final))
            print(f"[tracetui record] rank {self.rank}: wrote {final}", file=sys.stderr, flush=True)
        finally:
            for p in (raw, tmp):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass


def main() -> None:
    """``python -c BOOT script|module TARGET ARGS...``: run TARGET as ``python TARGET ARGS`` (or
    ``python -m TARGET ARGS``) would, under the recorder; exit with the program's exit code."""
    mode, target, *rest = sys.argv[1:]
    cfg = json.loads(os.environ.pop(ENV, "{}") or "{}")  # the program's own children are not recorded
    cfg.setdefault("out", ".")
    rec = Recorder(cfg)
    rec.start()
    code = 0
    try:
        sys.argv = [target, *rest]
        if mode == "module":
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException as e:  # noqa: BLE001 - reported as Python would, then the trace is still written
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>", runpy.__file__):
            tb = tb.tb_next  # the bootstrap's own frames are noise in the program's traceback
        traceback.print_exception(type(e), e, tb)
        code = 1
    finally:
        rec.stop()
    sys.stdout.flush()
    sys.exit(code)
