"""Textual front end: renders tracetui.model, computes nothing the CLI could not."""
