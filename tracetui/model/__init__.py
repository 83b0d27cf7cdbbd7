"""Pure analysis layer: load, link, roll up, decode names, diff. Never imports Textual or Rich."""
from tracetui.read.errors import TraceError
from tracetui.model.trace import Trace, load_trace

__all__ = ["Trace", "TraceError", "load_trace"]
