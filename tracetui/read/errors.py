"""The one exception bad input raises: its text is the one-line message the user sees."""
from __future__ import annotations


class TraceError(Exception):
    """A trace that cannot be read: ``str(e)`` is ``"<file>: <problem>"``, fit for one line."""

    def __init__(self, path, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")

    def __reduce__(self):  # rebuilt from (path, problem) when it crosses a process pool
        return (TraceError, (self.path, self.problem))
