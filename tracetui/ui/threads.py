"""Thread workers that never hold the process open after the app exits.

Textual runs thread workers in asyncio's default executor, and both asyncio.run and the
interpreter wait for its threads at exit. A load cannot be interrupted inside a decode, so
`q` or Esc during a 1 GB load used to leave the terminal waiting 5-10 s for it to finish.
Here each worker gets its own daemon thread, and shutting down waits for none of them.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor


class DaemonExecutor(ThreadPoolExecutor):
    """One daemon thread per call; ``shutdown`` returns at once (abandoned work dies with the process).

    A ThreadPoolExecutor only by type (asyncio accepts no other as its default executor): its
    pool is never used, so the interpreter's exit hook has no thread of it to join.
    """

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to whoever awaits the future
                future.set_exception(e)

        threading.Thread(target=run, name="tracetui-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None
