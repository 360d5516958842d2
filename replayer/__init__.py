"""Serving an archive: request matching, the replay server, determinism injection. Built in a later issue."""
