"""``tracetui record [options] -- python train.py ARGS``: record a program under torch.profiler
without editing it (the profiler side is tracetui/record/boot.py, run inside the program's process).

Accepted programs: ``python [flags] script.py ARGS``, ``python -m module ARGS``, ``script.py ARGS``,
``-m module ARGS``, and ``torchrun [options] script.py|-m module ARGS`` (each worker records itself).
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
"""An interpreter named on the command line (``python``, ``python3``, ``python3.11``)."""

PYTHON_FLAGS_WITH_VALUE = ("-W", "-X", "-Q")
"""Interpreter options that take a value, kept in front of the bootstrap."""


def add_parser(sub) -> None:
    r = sub.add_parser(
        "record", help="run a Python program under torch.profiler, no edit to it: tracetui record -o DIR -- python train.py",
        description="Everything after -- is the program: python script.py ARGS, python -m module ARGS, or "
                    "torchrun [options] script.py ARGS (each rank writes its own trace).")
    r.add_argument("-o", "--output", type=Path, default=Path("traces"), help="folder for the traces (default ./traces)")
    r.add_argument("--wait", type=int, default=1, help="schedule: steps skipped first (default 1)")
    r.add_argument("--warmup", type=int, default=1, help="schedule: steps traced but dropped (default 1)")
    r.add_argument("--active", type=int, default=3, help="schedule: steps recorded (default 3)")
    r.add_argument("--repeat", type=int, default=1, help="schedule: cycles (default 1; 0 = until the end)")
    r.add_argument("--stack", action="store_true", help="with_stack: Python frames")
    r.add_argument("--memory", action="store_true", help="profile_memory: [memory] alloc/free events")
    r.add_argument("--shapes", action="store_true", help="record_shapes: input shapes of ops")
    r.add_argument("--steps", metavar="MARKER", default=None,
                   help="a step ends where a record_function whose name matches the regex MARKER ends "
                        "(default: at each optimizer step)")
    r.add_argument("--open", action="store_true", help="open the app on the trace afterwards (default: print its summary)")


TAKES_VALUE = ("-o", "--output", "--wait", "--warmup", "--active", "--repeat", "--steps")
"""record's options that take a value: the program starts at the first word that is neither."""


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``record OPTS -- PROGRAM`` -> (``record OPTS``, PROGRAM). Without ``--`` the program starts
    at the first word that is not an option of record's or its value (``record -o d python t.py``)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    i = 1
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if a in TAKES_VALUE else 1
    return argv, []


def _python_split(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Interpreter flags (``-u``, ``-X dev``) and what follows them (``-m mod ...`` / ``script ...``)."""
    flags, i = [], 0
    while i < len(tokens) and tokens[i].startswith("-") and tokens[i] not in ("-m", "-c", "-"):
        flags.append(tokens[i])
        if tokens[i] in PYTHON_FLAGS_WITH_VALUE and i + 1 < len(tokens):
            flags.append(tokens[i + 1])
            i += 1
        i += 1
    return flags, tokens[i:]


def _target(rest: list[str], CliError) -> list[str]:
    """``-m mod ARGS`` -> ``module mod ARGS``; ``script.py ARGS`` -> ``script script.py ARGS``."""
    if not rest:
        raise CliError("record: no script or -m module after the interpreter")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise CliError("record: -m needs a module name")
        return ["module", rest[1], *rest[2:]]
    if rest[0] in ("-c", "-"):
        raise CliError("record: runs a script or a module (-c and stdin programs are not supported)")
    return ["script", rest[0], *rest[1:]]


def build_command(program: list[str], CliError) -> tuple[list[str], str]:
    """The command that runs ``program`` with the recorder inside, and its kind (python/torchrun)."""
    from tracetui.record.boot import BOOT  # not at import: the CLI builds record's parser at every start
    if not program:
        raise CliError("record: name the program after --, e.g. tracetui record -o DIR -- python train.py")
    head = os.path.basename(program[0])
    if head == "torchrun" or program[:3] in (["python", "-m", "torch.distributed.run"],
                                             [sys.executable, "-m", "torch.distributed.run"]):
        rest = program[1:] if head == "torchrun" else program[3:]
        return _torchrun(rest, CliError), "torchrun"
    if PYTHON.match(head):
        flags, rest = _python_split(program[1:])
        return [program[0], *flags, "-c", BOOT, *_target(rest, CliError)], "python"
    if program[0] == "-m" or program[0].endswith(".py"):
        return [sys.executable, "-c", BOOT, *_target(program, CliError)], "python"
    raise CliError(f"record: {program[0]}: not a Python program (give python script.py, python -m module, "
                   f"or torchrun ...)")


def _torchrun(rest: list[str], CliError) -> list[str]:
    """torchrun's own options, then ``--no-python`` and our bootstrap in place of the script."""
    from tracetui.record.boot import BOOT
    try:
        from torch.distributed.run import get_args_parser
    except ImportError:
        raise CliError("record: torchrun needs torch in this environment") from None
    try:
        ns = get_args_parser().parse_args(rest)
    except SystemExit:
        raise CliError(f"record: torchrun could not parse: {shlex.join(rest)}") from None
    if ns.no_python:
        raise CliError("record: torchrun --no-python runs no Python program to record")
    n_opts = len(rest) - 1 - len(ns.training_script_args)
    opts = [a for a in rest[:n_opts] if a not in ("-m", "--module")]
    kind = "module" if ns.module else "script"
    return [sys.executable, "-m", "torch.distributed.run", *opts, "--no-python",
            sys.executable, "-c", BOOT, kind, ns.training_script, *ns.training_script_args]


def _traces_of(folder: Path, run: str) -> list[Path]:
    """The traces this run wrote: the ones with its run id in their name (boot.trace_name), never
    another run's that happened to change in the same folder meanwhile."""
    import glob
    return [p for p in folder.glob(f"*.{glob.escape(run)}.rank*.pt.trace.json.gz") if p.is_file()]


def run_record(args, CliError, opener=None) -> int:
    """Run the program under the recorder; report what it wrote; exit with the program's code.
    ``opener(paths)`` opens the app (the CLI passes it when a terminal is there for --open)."""
    import json
    import subprocess

    import time

    from tracetui.record.boot import ENV, run_id
    cmd, kind = build_command(args.program or [], CliError)
    for k in ("wait", "warmup", "active", "repeat"):
        if getattr(args, k) < (1 if k == "active" else 0):
            raise CliError(f"record: --{k} must be at least {1 if k == 'active' else 0}")
    if args.steps is not None:
        try:
            re.compile(args.steps)
        except re.error as e:
            raise CliError(f"record: --steps {args.steps!r}: not a valid regular expression ({e})") from None
    out = args.output.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"record: {args.output}: cannot create folder ({e.strerror or e})") from None
    cfg = {"out": str(out), "wait": args.wait, "warmup": args.warmup, "active": args.active, "repeat": args.repeat,
           "stack": args.stack, "memory": args.memory, "shapes": args.shapes, "steps": args.steps,
           "program": shlex.join(args.program), "run": run_id(time.time(), os.getpid())}
    env = dict(os.environ)
    env[ENV] = json.dumps(cfg)
    root = str(Path(__file__).resolve().parents[2])  # so the program's interpreter finds the bootstrap
    env["PYTHONPATH"] = os.pathsep.join([p for p in (env.get("PYTHONPATH"), root) if p])
    print(f"[tracetui record] {shlex.join(args.program)} -> {out}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        raise CliError(f"record: cannot run {cmd[0]}: {e.strerror or e}") from None
    rc, hung_up = wait_forwarding(proc)
    rc = 128 - rc if rc < 0 else rc  # killed by a signal: the shell's convention
    if hung_up:  # the terminal is gone: nothing to report to
        return rc
    written = sorted(_traces_of(out, cfg["run"]), key=_rank_order)
    if not written:
        print(f"[tracetui record] no trace written (program exit code {rc})", file=sys.stderr)
        return rc
    print(f"[tracetui record] {len(written)} trace(s) in {out} (program exit code {rc}):", file=sys.stderr)
    for p in written:
        print(f"  {p.name}", file=sys.stderr)
    try:
        _afterwards(written[0], args, opener)
    except Exception as e:  # noqa: BLE001 - the summary is extra: the program's exit code stands
        print(f"[tracetui record] cannot show {written[0].name}: {(str(e).splitlines() or [''])[0]}", file=sys.stderr)
    return rc


FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP")
"""Signals sent to ``tracetui record`` that the program gets too (it is never left orphaned)."""

SI_KERNEL = 0x80
"""siginfo code of a signal the kernel sent (a terminal's Ctrl-C reaches the whole foreground
group, the program included, so it is not sent again); ``kill`` gives a code <= 0."""


def wait_forwarding(proc) -> tuple[int, bool]:
    """Wait for the program, passing it each signal in FORWARDED that was sent to us alone (by
    ``kill PID``; a terminal's Ctrl-C already reached it, and a hangup is passed on in any case).
    Returns (its return code, whether we were hung up)."""
    import signal
    sigs = {getattr(signal, n) for n in FORWARDED if hasattr(signal, n)}
    hung_up = False
    if not hasattr(signal, "sigtimedwait"):  # no siginfo here: forward everything
        def forward(signum, frame):
            nonlocal hung_up
            hung_up |= signum == getattr(signal, "SIGHUP", None)
            _send(proc, signum)
        old = {s: signal.signal(s, forward) for s in sigs}
        try:
            return proc.wait(), hung_up
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        while True:
            info = signal.sigtimedwait(sigs, 0.1)
            if info is None:
                if proc.poll() is not None:
                    return proc.returncode, hung_up
                continue
            hup = info.si_signo == signal.SIGHUP
            hung_up |= hup
            if hup or info.si_code != SI_KERNEL:
                _send(proc, info.si_signo)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _send(proc, signum: int) -> None:
    try:
        proc.send_signal(signum)
    except OSError:  # it has just ended
        pass


def _rank_order(p: Path):
    m = re.search(r"\.rank(\d+)", p.name)
    return (int(m[1]) if m else 1 << 30, p.name)


def _afterwards(path: Path, args, opener=None) -> None:
    """The summary of the first rank's trace, or the app on it with --open (on a terminal: the
    CLI passes ``opener`` then; record imports no front end)."""
    if args.open and opener is not None:
        opener([path])
        return
    from tracetui.model import load_trace
    from tracetui.report.summary import print_summary
    sys.stdout.flush()
    print_summary(load_trace(path))
