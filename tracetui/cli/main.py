"""Command line: open (default), summary, tree, diff, gen. Every subcommand shares tracetui.model."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from tracetui.cli.common import CliError, count, positive, torch_version  # noqa: F401 - re-exported: the CLI's names
from tracetui.cli.common import interactive as _interactive

SUBCOMMANDS = ("open", "summary", "tree", "diff", "gen", "memory", "ranks", "index", "record", "mcp",
               "opportunities", "skill")
FORMATS = ("text", "json", "csv", "md")  # tracetui.report.export.FORMATS, kept here so --help imports nothing
REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED = REPO_ROOT / "traces"


BUNDLED_LADDER = ("mlp_eager", "mlp_compile", "mlp_max_autotune", "mlp_triton", "mlp_fused")
"""The MLP ladder `tracetui` opens with no arguments, in this order (rungs not bundled are left out)."""


def bundled_default() -> list[Path]:
    """The bundled MLP ladder: eager → compile (→ max-autotune) → triton → fused."""
    pair = [BUNDLED / "mlp_eager.json.gz", BUNDLED / "mlp_compile.json.gz"]
    if not all(p.exists() for p in pair):
        raise CliError(f"no bundled traces in {BUNDLED} (pass a trace file)")
    return [p for p in (BUNDLED / f"{n}.json.gz" for n in BUNDLED_LADDER) if p.exists()]


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line errors: a bad argument gets ``tracetui: error: ...`` and
    exit 2 like a bad file, not a usage block (``--help`` still prints it)."""

    def error(self, message: str):
        from tracetui.textsafe import visible
        print(f"tracetui: error: {visible(self.prog)}: {visible(message)} (see {visible(self.prog)} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tracetui", description="Read PyTorch profiler traces in the terminal.")
    from tracetui import __version__
    p.add_argument("--version", action="version", version=f"tracetui {__version__}")
    sub = p.add_subparsers(dest="cmd")
    lo = argparse.ArgumentParser(add_help=False)  # how a trace is read: every reading subcommand
    lo.add_argument("--steps", metavar="REGEX", default=None,
                    help="annotations matching REGEX are the steps (default: ProfilerStep#N, else a "
                         "numbered step-like record_function such as train_step_3)")
    lo.add_argument("--torch-version", metavar="X.Y", default=None, type=torch_version,
                    help="torch version that recorded the trace, for its CPU self-time rule "
                         "(default: the recorded one, else <= 2.12)")
    o = sub.add_parser("open", parents=[lo], help="open the explorer (the default command)")
    o.add_argument("traces", nargs="*", type=Path,
                   help="trace file(s) or trace folder; two open a diff, more a ladder; - reads stdin")
    fo = argparse.ArgumentParser(add_help=False)  # how a report is written: every reporting subcommand
    fo.add_argument("--format", choices=FORMATS, default=None,
                    help="text (default), json (schema in README), csv (one table) or md (Markdown tables)")
    fo.add_argument("--table", default=None, metavar="NAME",
                    help="csv/md: the table to write (default csv: the main one; md: all)")
    s = sub.add_parser("summary", parents=[lo, fo], help="device, steps, GPU busy/idle, top ops and kernels, diagnostics")
    s.add_argument("trace", type=Path, help="trace file or folder; - reads stdin")
    s.add_argument("--json", action="store_true", help="same as --format json")
    s.add_argument("--top", type=count, default=15, help="rows in the op and kernel tables (0: all)")
    t = sub.add_parser("tree", parents=[lo, fo], help="the hierarchy as indented text")
    t.add_argument("trace", type=Path, help="trace file or folder; - reads stdin")
    t.add_argument("--depth", type=count, default=None, help="levels shown under the root (or under the matches)")
    t.add_argument("--filter", default=None, help="keep the nodes whose name contains TEXT, the paths to them and what is under them")
    t.add_argument("--json", action="store_true", help="same as --format json")
    t.add_argument("--python", action="store_true", help="show Python frames (hidden, as in the app; --depth counts what is shown)")
    m = sub.add_parser("memory", parents=[lo, fo], help="profile_memory: peaks per device and step, what held them, "
                                                     "per-op table; with two traces, the memory diff A → B")
    m.add_argument("trace", type=Path)
    m.add_argument("trace_b", type=Path, nargs="?", default=None,
                   help="a second trace: per step and device, the peak in A and B and what held it, A vs B")
    m.add_argument("--json", action="store_true", help="machine-readable output (schema in README)")
    m.add_argument("--top", type=count, default=10, help="rows per table (0: all)")
    d = sub.add_parser("diff", parents=[lo, fo], help="align two traces and report what changed and what fusion "
                                                   "removed; three or more: a ladder (A → B → C …)")
    d.add_argument("traces", nargs="+", type=Path, metavar="TRACE", help="two traces, or a series of them")
    d.add_argument("--top", type=count, default=10, help="changes shown per kind (0: all); a ladder's per neighbour: 3")
    g = d.add_mutually_exclusive_group()
    g.add_argument("--text", action="store_true", help="print the report instead of opening the app")
    g.add_argument("--json", action="store_true", help="print the report as JSON (schema in README)")
    from tracetui.cli.gate import add_gate_args
    add_gate_args(d)
    _rank_parsers(sub, lo, fo)
    _record_parsers(sub)
    from tracetui.cli.opportunities import add_parser as _opportunities_parser  # tracetui/cli/opportunities.py
    _opportunities_parser(sub, lo, count)
    sub.add_parser("skill", help="print SKILL.md: how a coding agent should drive tracetui (commands, exit codes, caps)")
    gen = sub.add_parser("gen", help="record a bundled workload under torch.profiler (needs torch)")
    gen.add_argument("workload", nargs="?", choices=("linear", "mlp", "transformer"))
    gen.add_argument("--impl", default="eager", choices=("eager", "compile", "triton", "fused"))
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
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["open"] + argv
    if argv and argv[0] == "record":  # everything after `--` is the program, untouched by argparse
        from tracetui.record.launcher import split_argv
        argv, program = split_argv(argv)
    else:
        program = None
    args = _parser().parse_args(argv)
    args.program = program
    restore = _on_sigterm()
    try:
        with _stdin_inputs(args):
            return _dispatch(args)
    except CliError as e:
        _error(str(e))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # the model raises TraceError for bad input; anything else is ours
        errors = sys.modules.get("tracetui.read.errors")  # not loaded -> cannot be a TraceError
        if errors is not None and isinstance(e, errors.TraceError):
            _error(f"{_STDIN_NAMES.get(str(e.path), e.path)}: {e.problem}")
            return 2
        pool = sys.modules.get("tracetui.jobs.pool")
        if pool is not None and isinstance(e, pool.WorkerLost):  # e.g. the OOM killer took a worker
            _error(str(e))
            return 2
        from tracetui.report.export import UnknownTable
        if isinstance(e, UnknownTable):
            _error(f"--table: {e}")
            return 2
        raise
    finally:
        restore()


def _on_sigterm():
    """On SIGTERM, kill the forked decode helpers first (atexit, which does on Ctrl-C, never runs
    when the default action kills us; a helper went on for 5-8 s), then die of the signal as
    usual. Returns what puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    me = os.getpid()

    def terminate(signum, frame) -> None:
        if os.getpid() == me:  # not in a helper: its copy of the list names its siblings
            forked = sys.modules.get("tracetui.read.forked")
            if forked is not None:
                forked._kill_live()
            for pid in _children():  # one forked a moment ago, not yet listed by forked.py
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _children() -> set[int]:
    """This process's child processes (Linux; elsewhere none are found, and none are forked)."""
    pids: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(x) for x in f.read().split())
        except (OSError, ValueError):
            pass
    return pids


def _error(msg: str) -> None:
    """The one line bad input gets: file names made visible (no escapes, no line breaks)."""
    from tracetui.textsafe import visible
    print(f"tracetui: error: {visible(msg)}", file=sys.stderr)


_STDIN_NAMES: dict = {}
"""Temporary file -> the name the user gave (``-``), so errors name what the user typed."""


def max_input_bytes() -> int:
    """The most a trace may take once read: the loader's limit (TRACETUI_MAX_BYTES)."""
    from tracetui.read.load import max_bytes
    return max_bytes()


def read_stdin_trace(folder: Path, stream=None) -> Path:
    """Read a trace from stdin into memory (at most ``max_input_bytes()``), then into a file in
    ``folder`` so the normal load path (gzip detection, two-process decode, repairs) reads it."""
    stream = stream if stream is not None else sys.stdin.buffer
    limit = max_input_bytes()
    chunks, n = [], 0
    while True:
        b = stream.read(min(1 << 20, limit + 1 - n))
        if not b:
            break
        chunks.append(b)
        n += len(b)
        if n > limit:
            raise CliError(f"-: trace on stdin is larger than the {limit:,}-byte limit "
                           f"(set TRACETUI_MAX_BYTES to raise it)")
    if not n:
        raise CliError("-: empty input on stdin")
    data = b"".join(chunks)
    path = folder / "-"  # the name the user gave: the tree's root and the reports say it
    path.write_bytes(data)
    _STDIN_NAMES[str(path)] = "-"
    return path


class _stdin_inputs:
    """Replace a ``-`` trace argument by stdin's contents (one ``-`` at most: stdin reads once)."""

    def __init__(self, args):
        self.args, self.tmp = args, None

    def __enter__(self):
        a = self.args
        slots = [k for k in ("trace", "trace_b", "a", "b") if str(getattr(a, k, None)) == "-"]
        multi = [i for i, p in enumerate(getattr(a, "traces", None) or []) if str(p) == "-"]
        if len(slots) + len(multi) > 1:
            raise CliError("-: stdin can be read once: pass - for one trace only")
        if slots or multi:
            import tempfile
            self.tmp = tempfile.TemporaryDirectory(prefix="tracetui-stdin-")
            path = read_stdin_trace(Path(self.tmp.name))
            for k in slots:
                setattr(a, k, path)
            for i in multi:
                a.traces[i] = path
            a.stdin_used = True
        return self

    def __exit__(self, *exc):
        if self.tmp is not None:
            self.tmp.cleanup()
        return False


def _announce_folder(path: Path) -> None:
    """A tensorboard_trace_handler folder holds one trace per file: say which one we open."""
    if Path(path).is_dir():
        from tracetui.read.load import folder_traces, resolve_input
        found = folder_traces(path)
        chosen = resolve_input(path)
        if len(found) > 1:
            from tracetui.textsafe import visible
            print(f"tracetui: {visible(str(path))}: opening the newest of {len(found)} traces, "
                  f"{visible(chosen.name)} (pass a file to choose another)", file=sys.stderr)


def _load_opts(args) -> dict:
    """The load_trace() options every reading subcommand shares."""
    if args.steps is not None:
        import re
        try:
            re.compile(args.steps)
        except re.error as e:
            raise CliError(f"--steps {args.steps!r}: not a valid regular expression ({e})") from None
    return {"steps": args.steps, "torch_version": args.torch_version}


def _dispatch(args) -> int:
    from tracetui.cli.ranks import opens_job
    job = args.cmd == "open" and opens_job(args.traces)  # ranks of one job: the job view, not a diff
    if job:
        from tracetui.cli.ranks import refuse_index_options
        refuse_index_options(args.traces, args, CliError)
    for p in [getattr(args, "trace", None)] + list(getattr(args, "traces", None) or []):
        if p is not None and not job:
            _announce_folder(p)
    if args.cmd == "gen":
        return _gen(args)
    if args.cmd in ("ranks", "index"):
        return _ranks(args)
    if args.cmd == "record":
        from tracetui.record.launcher import run_record
        return run_record(args, CliError, opener=_open if _interactive() else None)
    if args.cmd == "mcp":
        from tracetui.mcp.server import serve
        return serve(args, CliError)
    if args.cmd == "summary":
        return _summary(args.trace, args)
    if args.cmd == "opportunities":
        from tracetui.cli.opportunities import run
        return run(args, load)
    if args.cmd == "skill":
        from tracetui.cli.skill import run as skill
        return skill()
    if args.cmd == "memory":
        from tracetui.report.output import fmt_of
        from tracetui.report.memory import print_memory, print_memory_diff
        if args.trace_b is not None:
            print_memory_diff(load(args.trace, args), load(args.trace_b, args), top=args.top, fmt=fmt_of(args),
                              table=args.table)
            return 0
        print_memory(load(args.trace, args), top=args.top, fmt=fmt_of(args), table=args.table)
        return 0
    if args.cmd == "tree":
        from tracetui.report.output import fmt_of
        from tracetui.report.tree import print_tree
        if args.table not in (None, "nodes"):
            raise CliError(f"tree: --table {args.table!r}: its one table is nodes")
        print_tree(load(args.trace, args), depth=args.depth, text_filter=args.filter, fmt=fmt_of(args),
                   python=args.python)
        return 0
    if args.cmd == "diff":
        if len(args.traces) < 2:
            raise CliError("diff: give two traces, or three or more for a ladder")
        if args.text or args.json or args.format or args.gate is not None or not _interactive():
            return _diff_report(args.traces, args)
        return _open(args.traces, diff=True, load_opts=_load_opts(args))
    traces = args.traces or bundled_default()  # none: the bundled ladder (eager, compile, ... on an H200)
    if not _interactive() and not job:  # a pipe or a file: the report the app would open on, never escape codes
        if len(traces) >= 2:
            return _diff_report(traces, args)
        return _summary(traces[0], args)
    if getattr(args, "stdin_used", False):
        _terminal_stdin()
    return _open(traces, diff=len(traces) >= 2, load_opts=_load_opts(args), job=job)


def _terminal_stdin() -> None:
    """After a trace was read from a pipe on stdin, take keys from the controlling terminal."""
    import os
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
    except OSError:
        raise CliError("-: no terminal to read keys from after reading stdin "
                       "(use `tracetui summary -` in a pipeline)") from None
    os.dup2(fd, 0)
    os.close(fd)


def load(path, args):
    """``load_trace`` with the command's options; a trace read from stdin is called ``-``."""
    from tracetui.model import load_trace
    t = load_trace(path, **_load_opts(args))
    if str(t.path) in _STDIN_NAMES:
        t.path = Path(_STDIN_NAMES[str(t.path)])
    return t


def _summary(path, args) -> int:
    from tracetui.report.output import fmt_of
    from tracetui.report.summary import print_summary
    print_summary(load(path, args), top=getattr(args, "top", 15), fmt=fmt_of(args),
                  table=getattr(args, "table", None))
    return 0


def _diff_report(paths: list, args) -> int:
    """Two traces: the diff report; three or more: the ladder (per step, and why each rung differs)."""
    from tracetui.report.output import fmt_of
    top = getattr(args, "top", 10)
    traces = [load(p, args) for p in paths]
    if len(traces) == 2:
        from tracetui.cli.gate import report_two
        return report_two(traces, args, fmt_of(args), top, getattr(args, "table", None))
    if getattr(args, "gate", None) is not None:
        raise CliError("diff: --gate compares two traces (A, then B), not a ladder")
    from tracetui.compare.ladder import ladder
    from tracetui.report.ladder import print_ladder
    fmt = fmt_of(args)
    ld = ladder(traces, top=top if top != 10 else 3)
    names = [Path(p).name.split(".")[0] for p in paths]
    if fmt in ("csv", "md"):  # rungs, steps, changes, cpu_changes (csv: rungs unless --table)
        from tracetui.report.output import emit_report
        from tracetui.report.ladder import ladder_tables
        emit_report(ld, fmt, table=getattr(args, "table", None), first="rungs", tables=ladder_tables(ld, names),
                    title="tracetui diff (ladder)")
        return 0
    print_ladder(ld, names, as_json=fmt == "json")
    return 0


def _open(paths: list[Path], diff: bool = False, load_opts: dict | None = None, job: bool = False) -> int:
    if job:  # several ranks of one job, a folder of them, or an index: the job view
        from tracetui.ui.app import TraceApp
        app = TraceApp(list(paths), load_opts=load_opts, job=True)
        app.run()
        if app.failure is not None:  # no rank could be read: the line `tracetui ranks` prints, exit 2
            _error(app.failure)
        return app.return_code or 0
    from tracetui.read.load import resolve_input
    resolved = [resolve_input(p) for p in paths]  # fail fast with a one-line error, before the UI starts
    early = None
    if len(resolved) == 1:  # a large file starts decoding (or gunzipping) while Textual imports
        from tracetui.model.trace import start_load
        early = start_load(resolved[0])
    try:
        from tracetui.ui.app import TraceApp
        app = TraceApp(resolved, diff=diff and len(resolved) >= 2, early=early, load_opts=load_opts)
        app.run()
    finally:
        if early is not None:
            early.cancel()
    if app.failure is not None:  # the pop-up is gone with the screen: the same line the CLI prints
        _error(app.failure)
    return app.return_code or 0  # 2 after a load error, 1 after a crash


def _record_parsers(sub) -> None:
    """``record`` (tracetui/record/launcher.py) and ``mcp`` (tracetui/mcp/server.py)."""
    from tracetui.record.launcher import add_parser
    add_parser(sub)
    m = sub.add_parser("mcp", help="Model Context Protocol server over stdio: read-only tools for agents (needs tracetui[mcp])")
    m.add_argument("--max-chars", type=int, default=None, help="bound on one answer's size (default 20000)")
    m.add_argument("--root", action="append", metavar="DIR",
                   help="a folder the tools may open or list (repeatable; default: the current folder); "
                        "paths named after the options are allowed too")
    m.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help="read/gunzip limit per trace, e.g. 512M (default: TRACETUI_MAX_BYTES, else 512M)")
    m.add_argument("paths", nargs="*", help="trace files or folders the tools may also read")


def _gen(args) -> int:
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
        out_dir = args.output or BUNDLED
        for wl, impl, stack in ladder():
            if impl in ("triton", "fused") and device != "cuda":
                print(f"[tracetui gen] skipping {wl}/{impl}: needs CUDA", file=sys.stderr)
                continue
            jobs.append((ws[wl], impl, stack, out_dir / ladder_filename(wl, impl, stack)))
    else:
        if not args.workload:
            raise CliError("gen: name a workload (linear, mlp, transformer) or pass --all")
        name = f"{args.workload}_train" if args.train and args.workload == "mlp" else args.workload
        out = args.output or Path(ladder_filename(name, args.impl, args.with_stack))
        jobs.append((ws[args.workload], args.impl, args.with_stack, out))
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
        from tracetui.textsafe import visible
        print(visible(str(path)))
    if failed:
        raise CliError(f"{len(failed)} of {len(jobs)} recordings failed: " + "; ".join(failed))
    return 0


def _rank_parsers(sub, lo, fo) -> None:
    """``ranks`` and ``index``: the job-level subcommands (tracetui/cli/ranks.py)."""
    from tracetui.cli.ranks import add_parsers
    add_parsers(sub, lo, fo)


def _ranks(args) -> int:
    from tracetui.cli.ranks import run
    return run(args, _load_opts(args), CliError)
