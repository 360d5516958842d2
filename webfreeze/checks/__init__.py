"""Checks on archives and runs: replay check, replay coverage, drift."""
