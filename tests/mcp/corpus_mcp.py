"""The bad-input corpus (tests/corpus.py) through `tracetui mcp`, the server run under
``prlimit --as=3G``: every tool call on every case must be answered within 10 s (a result or a
tool error with a message), the server must stay up, and each case's peak memory is measured
(the server's VmHWM, reset before each case through /proc/PID/clear_refs).

    python tests/mcp/corpus_mcp.py [OUT.json]

Prints one line per case (calls, errors, peak MiB) and the worst; exit 1 on a hang, a crash or
an unanswered call.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ADDRESS_SPACE = 3 << 30
"""The server's address space (prlimit --as), as issue 35 asks."""

CALL_SECONDS = 10
"""The longest one call may take before it counts as a hang."""

CALLS = (("open_trace", {}), ("summary", {"top": 5}), ("tree", {"depth": 50, "limit": 500}),
         ("node", {"id": 1}), ("node", {"id": 3}), ("kernels", {}), ("ops", {}), ("step_breakdown", {}),
         ("memory", {"section": "devices"}))
"""What each case is asked (node 1 and 3: a thread and, usually, its first event)."""


class Server:
    def __init__(self, root: Path):
        cmd = [sys.executable, "-m", "tracetui", "mcp", "--root", str(root)]
        if shutil.which("prlimit"):
            cmd = ["prlimit", f"--as={ADDRESS_SPACE}", "--"] + cmd
        self.p = subprocess.Popen(cmd, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.next_id = 1
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "corpus", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def request(self, method: str, params: dict, timeout: float = 60) -> dict | None:
        self.next_id += 1
        i = self.next_id
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
        self.p.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = self.p.stdout.readline()
            if not line:
                return None  # the server died
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg
        return None

    def reset_peak(self) -> None:
        Path(f"/proc/{self._pid()}/clear_refs").write_text("5")

    def peak(self) -> int:
        for line in Path(f"/proc/{self._pid()}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
        return 0

    def _pid(self) -> int:
        """The server's own PID (prlimit execs it, so it is the child's)."""
        return self.p.pid

    def close(self) -> None:
        self.p.stdin.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()


def run(out: Path | None = None, call_seconds: float = CALL_SECONDS) -> int:
    from tests.corpus import all_cases
    failures, rows = [], []
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cases = all_cases()
        paths = {}
        for c in cases:
            folder = root / c.name
            folder.mkdir()
            paths[c.name] = c.make(folder)
        server = Server(root)
        t_all = time.monotonic()
        for c in cases:
            server.reset_peak()
            errors, slowest = 0, 0.0
            for tool, extra in CALLS:
                t0 = time.monotonic()
                r = server.request("tools/call", {"name": tool, "arguments": {"path": str(paths[c.name]), **extra}},
                                   timeout=call_seconds)
                slowest = max(slowest, time.monotonic() - t0)
                if r is None:
                    failures.append(f"{c.name}: {tool}: no answer within {call_seconds} s"
                                    + (" (the server died)" if server.p.poll() is not None else ""))
                    if server.p.poll() is not None:
                        server = Server(root)
                    continue
                if "error" in r:
                    failures.append(f"{c.name}: {tool}: JSON-RPC error {r['error']}")
                    continue
                res = r["result"]
                text = res["content"][0]["text"] if res.get("content") else ""
                if res.get("isError"):
                    errors += 1
                    if "internal error" in text or text.strip() == f"Error executing tool {tool}":
                        failures.append(f"{c.name}: {tool}: {text[:200]}")
            peak = server.peak()
            rows.append({"case": c.name, "errors": errors, "slowest_s": round(slowest, 2), "peak_bytes": peak})
            print(f"{c.name:40s} errors {errors}/{len(CALLS)}  slowest {slowest:5.2f} s  peak {peak / 2**20:7.1f} MiB",
                  flush=True)
        server.close()
    worst = max(rows, key=lambda r: r["peak_bytes"])
    print(f"\n{len(rows)} cases x {len(CALLS)} calls in {time.monotonic() - t_all:.0f} s under prlimit --as={ADDRESS_SPACE}; "
          f"worst peak {worst['peak_bytes'] / 2**20:.1f} MiB ({worst['case']}); "
          f"slowest call {max(r['slowest_s'] for r in rows):.2f} s; {len(failures)} failure(s)")
    for f in failures:
        print("FAIL", f)
    if out:
        out.write_text(json.dumps({"rows": rows, "failures": failures}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
