"""Inside the recorded process: start torch.profiler, run the user's program unchanged, write the trace.

``tracetui record`` starts ``python -c BOOT script|module TARGET ARGS`` with the settings in the
environment (``TRACETUI_RECORD``, JSON). Under torchrun each worker is such a process, so each rank
records itself (``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` from torchrun's environment). Steps are
taken at each optimizer step (torch's global optimizer step hooks: no edit to the program) or at
the exit of each ``record_function`` whose name matches the marker the user named.
"""
from __future__ import annotations

import datetime as _dt
import glob
import gzip
import json
import os
import platform
import pkgutil
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


def trace_name(host: str, rank: int, cycle: int | None, run: str | None = None) -> str:
    """``<host>.<run>.rank<R>[.cycle<k>].pt.trace.json.gz``: rank and host in the name, as tools that
    read a folder of ranks (tracetui ranks, HTA) expect; the run (``run_id``, one per ``tracetui
    record``) so that two runs into one folder never share a name; a cycle index only when repeating."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    run_part = f".{re.sub(r'[^A-Za-z0-9_-]', '_', run)}" if run else ""
    return f"{safe}{run_part}.rank{rank}{'' if cycle is None else f'.cycle{cycle}'}.pt.trace.json.gz"


def run_id(now: float, pid: int) -> str:
    """One ``tracetui record`` run: its start (UTC, to the second) and the launcher's PID, unique
    among the runs of one host at a time, and sorting by start."""
    import time
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + f"-{pid}"


def place(tmp: Path, final: Path) -> None:
    """Move a finished trace to its name, never over a file that is there (a hard link fails
    with EEXIST where a rename would replace): a recording is never lost to another one."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise FileExistsError(f"{final.name} is already there: not replaced") from None
    except OSError:  # no hard links on this file system: check, then rename
        if os.path.lexists(final):
            raise FileExistsError(f"{final.name} is already there: not replaced") from None
        os.replace(tmp, final)
        return
    os.unlink(tmp)


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
        self.failures: list[str] = []  # what went wrong in the recorder (never raised into the program)
        self.aside: str | None = None  # why the recorder stopped early (the program's own profiler, a failure)
        self._own = False  # True while our own profiler calls run (the profiler guard lets them through)
        self._first_opt = None
        self._undo = []  # step hooks, removed when stepping aside
        self._unguard = []  # the profiler guard, removed at the end

    # ---- steps
    def _call(self, what: str, fn) -> None:
        """One call into our profiler: marked as ours, and any failure kept, not raised into the program."""
        self._own = True
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the recorder must never change the program's course
            self.failures.append(f"profiler {what} failed: {_why(e)}")
            self.step_aside(self.failures[-1], stop=False)
        finally:
            self._own = False

    def _step(self) -> None:
        if self.aside is None:
            self.steps += 1
            self._call("step", self.prof.step)

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

    def _guard_profilers(self) -> None:
        """Step aside when the program starts a profiler of its own: Kineto holds one session per
        process, and two at once crash the process (exit 139) and lose the program's trace.
        Every torch profiler (torch.profiler.profile, torch.autograd.profiler.profile, emit_nvtx,
        emit_itt) starts through ``autograd.profiler.profile._prepare_trace``/``_start_trace`` or
        ``_run_on_profiler_start``; ours are told apart by ``self._own``."""
        from torch.autograd import profiler as ap
        rec = self

        def guarded(orig):
            def call(*args, **kwargs):
                if not rec._own and rec.aside is None:
                    rec.step_aside("the program started its own torch.profiler")
                return orig(*args, **kwargs)
            return call
        for owner, name in ((ap.profile, "_prepare_trace"), (ap.profile, "_start_trace"), (ap, "_run_on_profiler_start")):
            orig = getattr(owner, name, None)
            if orig is not None:
                setattr(owner, name, guarded(orig))
                self._unguard.append(lambda owner=owner, name=name, orig=orig: setattr(owner, name, orig))

    def step_aside(self, why: str, stop: bool = True) -> None:
        """Stop recording for good, say why, and let the program run on untouched (a cycle being
        recorded is written with the steps it has)."""
        if self.aside is not None:
            return
        self.aside = why
        for undo in self._undo:
            undo()
        if stop:
            self._own = True
            try:
                self.prof.stop()
            except Exception as e:  # noqa: BLE001
                self.failures.append(f"profiler stop failed: {_why(e)}")
            finally:
                self._own = False
        print(f"[tracetui record] rank {self.rank}: {why}: tracetui record steps aside after {self.steps} step(s)"
              f"; the program runs on unrecorded", file=sys.stderr, flush=True)

    # ---- life
    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self._guard_profilers()
        self._install_steps()
        self._call("start", self.prof.start)

    def stop(self, started: bool = True) -> None:
        """Stop the profiler: a cycle still recording (the program failed or ended mid-cycle) is
        written with the steps it has. Says what was recorded, or why nothing was."""
        if self.aside is None:
            for undo in self._undo:
                undo()
            self._call("stop", self.prof.stop)
        for undo in self._unguard:
            undo()
        if self.written:
            return
        if not started:
            why = "the program did not start"
        elif self.failures:
            why = self.failures[-1]
        elif self.aside is not None:
            why = self.aside
        elif self.steps == 0:
            why = ("no optimizer step was taken" if not self.cfg.get("steps")
                   else f"no record_function matching {self.cfg['steps']!r} ended")
        else:
            why = f"{self.steps} step(s) were taken, fewer than the schedule's wait + warmup"
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
            "program": c.get("program"), "run": c.get("run"), "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }

    def _ready(self, prof) -> None:
        """Write this cycle's trace with provenance, atomically (a temporary name, then rename).
        A failure (full disk, ``ulimit -f``) is said and kept, never raised into the program, and
        leaves no temporary behind (Kineto's own ``.tmp`` beside ours included)."""
        cycle = self.cycle
        self.cycle += 1
        name = trace_name(self.host, self.rank, None if self.repeat == 1 else cycle, self.cfg.get("run"))
        final = self.out / name
        stem = f".{name}.{os.getpid()}"
        raw = self.out / f"{stem}.json.tmp"
        tmp = self.out / f"{stem}.tmp"
        try:
            prof.export_chrome_trace(str(raw))
            if not raw.is_file():  # Kineto says so only in its log ("Failed to write to log file!")
                raise OSError(f"the profiler could not write its JSON into {self.out} (a full disk or a file size limit?)")
            doc = json.loads(raw.read_text(encoding="utf-8", errors="replace"))
            doc[PROVENANCE_KEY] = self.provenance()
            with gzip.open(tmp, "wb", compresslevel=6) as f:
                f.write(json.dumps(doc, separators=(",", ":")).encode())
            place(tmp, final)
            self.written.append(str(final))
            print(f"[tracetui record] rank {self.rank}: wrote {final}", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - the program's run and exit code come first
            self.failures.append(f"writing {final} failed after {self.steps} step(s): {_why(e)}")
            print(f"[tracetui record] rank {self.rank}: {self.failures[-1]}", file=sys.stderr, flush=True)
        finally:
            for p in self.out.glob(f"{glob.escape(stem)}.*"):
                try:
                    p.unlink()
                except OSError:
                    pass


def _why(e: BaseException) -> str:
    """An exception as one line: ``[Errno 27] File too large`` or ``Type: message``."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror} (errno {e.errno})"
    text = (str(e).splitlines() or [""])[0]
    if isinstance(e, OSError) and text:
        return text
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


BOOT_FILES = {__file__, runpy.__file__, pkgutil.__file__, "<frozen runpy>"}
"""Frames of the bootstrap and of runpy: not the program's."""


def never_started(e: BaseException) -> bool:
    """True when ``e`` came before any line of the program ran: a missing script or module, or a
    syntax error in the script itself (its traceback holds only runpy's and our frames)."""
    tb = e.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name not in BOOT_FILES and not name.startswith("<frozen importlib"):
            return False
        tb = tb.tb_next
    return True


def _not_started_message(e: BaseException, mode: str, target: str) -> int:
    """Python's own message for a program that could not start, and its exit code."""
    exe = sys.executable or "python"
    if mode == "script" and isinstance(e, OSError):
        print(f"{exe}: can't open file {os.path.abspath(target)!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
        return 2
    if isinstance(e, ImportError) and not isinstance(e, SyntaxError):
        print(f"{exe}: {e}", file=sys.stderr)
        return 1
    traceback.print_exception(type(e), e, None)  # a SyntaxError prints its file, line and caret
    return 1


def _start(cfg: dict):
    """The recorder, started; None (and a line saying why) when it cannot start: the program then
    runs unrecorded rather than not at all."""
    try:
        rec = Recorder(cfg)
        rec.start()
        return rec
    except Exception as e:  # noqa: BLE001
        print(f"[tracetui record] cannot start the profiler ({_why(e)}): the program runs unrecorded",
              file=sys.stderr, flush=True)
        return None


def main() -> None:
    """``python -c BOOT script|module TARGET ARGS...``: run TARGET as ``python TARGET ARGS`` (or
    ``python -m TARGET ARGS``) would, under the recorder; exit with the program's exit code."""
    mode, target, *rest = sys.argv[1:]
    cfg = json.loads(os.environ.pop(ENV, "{}") or "{}")  # the program's own children are not recorded
    cfg.setdefault("out", ".")
    rec = _start(cfg)
    code, started = 0, True
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
        if never_started(e):  # a missing script or module, a syntax error: said as Python says it
            started = False
            code = _not_started_message(e, mode, target)
        else:
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename in BOOT_FILES:
                tb = tb.tb_next  # the bootstrap's own frames are noise in the program's traceback
            traceback.print_exception(type(e), e, tb)
            code = 1
    finally:
        if rec is not None:
            rec.stop(started)
    sys.stdout.flush()
    sys.exit(code)
