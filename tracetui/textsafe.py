"""Names from a trace are data: make control characters visible so they can never drive a terminal."""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def visible(s: str) -> str:
    """``s`` with every control/bidi character shown as ``\\xNN`` / ``\\uNNNN`` (ESC -> ``\\x1b``)."""
    if not _CONTROL.search(s):
        return s
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)
