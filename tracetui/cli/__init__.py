"""Argument parsing and dispatch for the `tracetui` command."""
