"""Command line: ``tracetui [COMMAND] …``. The commands are the modules in COMMAND_MODULES, each
with ``NAMES``, ``add_parser(subparsers)`` and ``run(args)``: the parser, the dispatch and the list
of words that are commands (not a file to open) all come from that one list. Adding a subcommand
is one module and one entry there (docs/ARCHITECTURE.md)."""
from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from pathlib import Path

from tracetui.cli import diff, gen, mcp, memory, opener, opportunities, ranks, record, skill, summary, tree
from tracetui.cli.common import STDIN_NAMES as _STDIN_NAMES, CliError, count, positive, torch_version  # noqa: F401 - re-exported: the CLI's names
from tracetui.cli.common import FORMATS, error as _error  # noqa: F401
from tracetui.cli.opener import BUNDLED, bundled_default  # noqa: F401 - the bundled ladder, as before

COMMAND_MODULES = (opener, summary, tree, memory, diff, ranks, record, mcp, opportunities, skill, gen)
"""Every subcommand, in the order ``--help`` lists them."""

COMMANDS = {name: m for m in COMMAND_MODULES for name in m.NAMES}
"""Subcommand word -> the module that parses and runs it."""

SUBCOMMANDS = tuple(COMMANDS)


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line errors: a bad argument gets ``tracetui: error: ...`` and
    exit 2 like a bad file, not a usage block (``--help`` still prints it)."""

    def error(self, message: str):
        from tracetui.textsafe import visible
        print(f"tracetui: error: {visible(self.prog)}: {visible(message)} (see {visible(self.prog)} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def _parser(cmd: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: with ``cmd`` (a subcommand word), that command's subparser alone (every
    command's options took ~10 ms to declare, paid by each run of any one); without, all of them
    (``--help`` lists them)."""
    p = _Parser(prog="tracetui", description="Read PyTorch profiler traces in the terminal.")
    from tracetui import __version__
    p.add_argument("--version", action="version", version=f"tracetui {__version__}")
    sub = p.add_subparsers(dest="cmd")
    for m in (COMMANDS[cmd],) if cmd in COMMANDS else COMMAND_MODULES:
        m.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["open"] + argv
    split = getattr(COMMANDS.get(argv[0]), "split_argv", None)  # record: after `--`, the program
    argv, program = split(argv) if split else (argv, None)
    args = _parser(argv[0]).parse_args(argv)
    args.program = program
    if hasattr(signal, "SIGXFSZ"):  # over `ulimit -f`: EFBIG (one line, exit 2), not a silent death
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    restore = _on_sigterm()
    try:
        with _stdin_inputs(args):
            rc = COMMANDS[args.cmd].run(args)
        _finish_output()
        return rc
    except CliError as e:
        _error(str(e))
        return 2
    except KeyboardInterrupt:
        return 130
    except MemoryError:  # a report's own Python allocations under a memory limit (the load says its own)
        _error("out of memory writing the report: raise the memory limit, or write less (--top, --depth)")
        return 2
    except Exception as e:  # the model raises TraceError for bad input; anything else is ours
        output = sys.modules.get("tracetui.report.output")  # not loaded -> nothing was written through it
        if output is not None and isinstance(e, output.OutputError):  # a full disk, a closed pipe ...
            _error(str(e))
            output.abandon()
            return 2
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
        if isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG and e.filename is not None:
            _error(f"{os.fsdecode(e.filename)}: cannot read: {e.strerror}")  # a path the system cannot name
            return 2
        raise
    finally:
        restore()


def _finish_output() -> None:
    """The last flush of stdout, checked (tracetui/report/output.py): a full disk often shows only here."""
    output = sys.modules.get("tracetui.report.output")
    if output is not None:
        output.finish()


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


def max_input_bytes() -> int:
    """The most a trace may take once read: the loader's limit (TRACETUI_MAX_BYTES)."""
    from tracetui.read.load import max_bytes
    return max_bytes()


def read_stdin_trace(folder: Path, stream=None) -> Path:
    """Read a trace from stdin into memory (at most ``max_input_bytes()``), then into a file in
    ``folder`` so the normal load path (gzip detection, two-process decode, repairs) reads it."""
    if stream is None:
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise CliError("-: stdin is closed: nothing to read a trace from")
        stream = sys.stdin.buffer
    limit = max_input_bytes()
    chunks, n = [], 0
    while True:
        try:
            b = stream.read(min(1 << 20, limit + 1 - n))
        except OSError as e:  # EBADF, EIO: stdin open but unreadable
            raise CliError(f"-: cannot read stdin: {e.strerror or e}") from None
        if not b:
            break
        chunks.append(b)
        n += len(b)
        if n - len(b) < 4 <= n:  # the first bytes, as a file's are checked before it is read
            _check_stdin_head(b"".join(chunks)[:4])
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


def _check_stdin_head(head: bytes) -> None:
    """``summary - < /dev/zero`` is refused at once, not after reading to the size limit."""
    from tracetui.read.errors import TraceError
    from tracetui.read.source import check_head
    try:
        check_head(Path("-"), head)
    except TraceError as e:
        raise CliError(f"-: {e.problem}") from None


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
