"""Row caps on JSON answers: which lists a ``--top N`` cut, said in one line on stderr.

Every capped JSON answer (``summary``, ``memory``, ``diff``, ``opportunities``) prints
``tracetui: truncated: <list> <shown> of <total>, ... (--top 0: all)`` on stderr when a cap cut
rows, and nothing when it did not: stdout stays one JSON document an agent can parse."""
from __future__ import annotations

import sys

from tracetui.textsafe import visible


def walk_caps(shown, full, path: str = "") -> list[tuple[str, int, int]]:
    """(path, rows shown, rows in all) of every list of ``full`` that ``shown`` (the same
    document with a cap) holds fewer rows of; dicts are walked key by key, the items of lists
    of the same length in order (a cut list's items are not compared: it may be reordered)."""
    out: list = []
    if isinstance(shown, dict) and isinstance(full, dict):
        for k, v in shown.items():
            if k in full:
                out += walk_caps(v, full[k], f"{path}.{k}" if path else str(k))
    elif isinstance(shown, list) and isinstance(full, list):
        if len(shown) < len(full):
            out.append((path, len(shown), len(full)))
            return out  # a cut list may be ordered otherwise: its items are not compared
        for i, (a, b) in enumerate(zip(shown, full)):
            if isinstance(a, (dict, list)):
                out += walk_caps(a, b, f"{path}[{i}]")
    return out


def note_truncated(caps: list[tuple[str, int, int]], flag: str = "--top 0") -> bool:
    """Print the one stderr line for ``caps`` (none: print nothing); True when something was cut."""
    if not caps:
        return False
    caps = sorted(caps, key=lambda c: c[0].count(".") + c[0].count("["))  # top-level lists first
    parts = ", ".join(f"{visible(p)} {a:,} of {b:,}" for p, a, b in caps[:8])
    more = f", and {len(caps) - 8} more lists" if len(caps) > 8 else ""
    print(f"tracetui: truncated: {parts}{more} ({flag}: all)", file=sys.stderr)
    return True
