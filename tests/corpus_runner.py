"""Run corpus cases through the CLI (summary, tree --json, diff) and the app, in one process whose
address space is capped, so a case that eats memory (a gzip bomb, a link to /dev/zero, where
unfixed) fails alone instead of taking the machine.

    python tests/corpus_runner.py MANIFEST.json RESULTS.json

Each command of each case gets a time limit (SIGALRM in the CLI, a deadline in the app) and its
peak resident memory is measured from a reset high-water mark (/proc/self/clear_refs).
"""
from __future__ import annotations

import asyncio
import io
import json
import resource
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ADDRESS_SPACE = 3 << 30
"""The runner's whole address space: above what the corpus needs, below what hurts the machine."""


class Timeout(BaseException):
    """A command ran past its limit (BaseException: the CLI's own handlers must not catch it)."""


def _alarm(signum, frame):
    raise Timeout()


def _kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> int:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    return _kb("VmRSS")


def _deep_loads(text: str):
    """json.loads of a `tree --json` thousands of levels deep: the recursion limit is raised for the
    test's own parse only (the CLI under test runs with the default)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        return json.loads(text)
    finally:
        sys.setrecursionlimit(old)


def _names(tree: dict) -> Counter:
    c, stack = Counter(), [tree]
    while stack:
        n = stack.pop()
        c[n["name"]] += 1
        stack.extend(n["children"])
    return c


def run_cli(argv: list[str], limit: float) -> dict:
    from tracetui.cli.main import main
    out, err = io.BytesIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    wrapper = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stdout, sys.stderr = wrapper, err
    base = _reset_peak()
    t0 = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        rc = main(argv)
    except Timeout:
        rc = "timeout"
    except MemoryError:
        rc = "memory"
    except SystemExit as e:
        rc = e.code
    except BaseException:  # noqa: BLE001 - a traceback is the finding
        rc = "exception"
        err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        wrapper.flush()
        wrapper.detach()  # keep the BytesIO open: dropping the wrapper would close it
        sys.stdout, sys.stderr = saved
    return {"rc": rc, "out": out.getvalue().decode("utf-8", "replace"), "err": err.getvalue(),
            "s": time.perf_counter() - t0, "mb": (_kb("VmHWM") - base) / 1024}


async def _app(path: Path, limit: float) -> dict:
    from tracetui.ui.app import TraceApp
    from tracetui.ui.explorer import ExplorerScreen
    app = TraceApp([path])
    got: dict = {}

    async def drive(pilot):
        while app.failure is None and app.return_code is None and not isinstance(app.screen, ExplorerScreen):
            await pilot.pause(0.02)
        if app.return_code is not None:  # it crashed
            return
        await pilot.pause()
        got["screen"] = type(app.screen).__name__
        got["errors"] = [n.message for n in app._notifications if n.severity == "error"]
        got["failure"] = app.failure
        await pilot.press("q")

    async with app.run_test(size=(80, 24)) as pilot:
        try:
            await asyncio.wait_for(drive(pilot), limit)
        except asyncio.TimeoutError:
            got["rc"] = "timeout"
            app.exit()
    got.setdefault("rc", app.return_code)
    if got["rc"] == 1:
        got["rc"] = "exception"  # Textual printed the traceback
    return got


def run_app(path: str, limit: float) -> dict:
    from tracetui.model import TraceError
    from tracetui.read.load import resolve_input
    try:
        resolved = resolve_input(Path(path))  # as the CLI does before it starts the app
    except TraceError as e:
        return {"rc": 2, "before_app": str(e), "s": 0.0, "mb": 0.0}
    except BaseException:  # noqa: BLE001
        return {"rc": "exception", "err": traceback.format_exc(), "s": 0.0, "mb": 0.0}
    base = _reset_peak()
    t0 = time.perf_counter()
    try:
        got = asyncio.run(_app(resolved, limit))
    except MemoryError:
        got = {"rc": "memory"}
    except BaseException:  # noqa: BLE001
        got = {"rc": "exception", "err": traceback.format_exc()}
    got.update(s=time.perf_counter() - t0, mb=(_kb("VmHWM") - base) / 1024)
    return got


def main() -> None:
    manifest = json.loads(Path(sys.argv[1]).read_text())
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    signal.signal(signal.SIGALRM, _alarm)
    results = {}
    for case in manifest["cases"]:
        r, limit = {}, case["limit"]
        for cmd, argv in (("summary", ["summary", case["path"], "--json", "--top", "0"]),
                          ("tree", ["tree", case["path"], "--json"]),
                          ("diff", ["diff", case["path"], manifest["base"], "--json"])):
            got = run_cli(argv, limit)
            if cmd == "tree" and got["rc"] == 0:
                try:
                    got["names"] = dict(_names(_deep_loads(got.pop("out"))))
                except ValueError:
                    pass
            elif cmd == "summary" and got["rc"] == 0:
                try:
                    d = json.loads(got["out"])
                    got.update(file=d["file"], repairs=d["load"]["repairs"], events=d["events"])
                except (ValueError, KeyError, TypeError):
                    pass
            got["out"] = got.get("out", "")[:2000]
            r[cmd] = got
            if got["rc"] in ("timeout", "memory"):
                break  # the rest would only repeat it
        if case["app"] and all(v["rc"] not in ("timeout", "memory") for v in r.values()):
            r["app"] = run_app(case["path"], limit)
        results[case["name"]] = r
    Path(sys.argv[2]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
