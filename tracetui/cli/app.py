"""Handing over to the app (tracetui/ui): one trace, a diff, a ladder or a job view. The commands
that open it (open, diff, record --open) call ``open_app``; the app never imports the CLI."""
from __future__ import annotations

from pathlib import Path

from tracetui.cli.common import CliError, error


def open_app(paths: list[Path], diff: bool = False, load_opts: dict | None = None, job: bool = False) -> int:
    from tracetui.cli.common import STDIN_NAMES
    if load_opts and any(str(p) in STDIN_NAMES for p in paths):  # a temporary copy of stdin: nothing to reopen
        load_opts = {**load_opts, "cache": False}
    if job:  # several ranks of one job, a folder of them, or an index: the job view
        from tracetui.ui.app import TraceApp
        app = TraceApp(list(paths), load_opts=load_opts, job=True)
        app.run()
        if app.failure is not None:  # no rank could be read: the line `tracetui ranks` prints, exit 2
            error(app.failure)
        return app.return_code or 0
    from tracetui.read.load import resolve_input
    resolved = [resolve_input(p) for p in paths]  # fail fast with a one-line error, before the UI starts
    early = None
    if len(resolved) == 1:  # a large file starts decoding (or gunzipping) while Textual imports
        from tracetui.model.trace import start_load
        early = start_load(resolved[0], cache=(load_opts or {}).get("cache", False))
    try:
        from tracetui.ui.app import TraceApp
        app = TraceApp(resolved, diff=diff and len(resolved) >= 2, early=early, load_opts=load_opts)
        app.run()
    finally:
        if early is not None:
            early.cancel()
    if app.failure is not None:  # the pop-up is gone with the screen: the same line the CLI prints
        error(app.failure)
    return app.return_code or 0  # 2 after a load error, 1 after a crash


def terminal_stdin() -> None:
    """After a trace was read from a pipe on stdin, take keys from the controlling terminal."""
    import os
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
    except OSError:
        raise CliError("-: no terminal to read keys from after reading stdin "
                       "(use `tracetui summary -` in a pipeline)") from None
    os.dup2(fd, 0)
    os.close(fd)
