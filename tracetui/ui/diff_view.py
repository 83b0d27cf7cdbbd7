"""Placeholder replaced by the diff screen (issue 5)."""
