"""Names from a trace are data: make control characters visible so they can never drive a terminal."""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def visible(s: str) -> str:
    """``s`` with every control/bidi character shown as ``\\xNN`` / ``\\uNNNN`` (ESC -> ``\\x1b``)."""
    if not _CONTROL.search(s):
        return s
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


_JSON_UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")
"""The UTF-8 of the characters ``visible`` shows that a JSON encoder leaves raw: DEL, C1 controls,
zero-width marks, U+2028/U+2029 and bidi overrides (orjson escapes only C0 controls)."""


def json_safe(data: bytes) -> bytes:
    """JSON text with those characters written as ``\\uXXXX`` escapes: the same strings once
    decoded, but none can reorder or hide text in a terminal (or end a line in JavaScript)."""
    if not _JSON_UNSAFE.search(data):
        return data
    return _JSON_UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group().decode("utf-8")), data)
