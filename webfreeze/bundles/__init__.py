"""Bundles: one file holding a benchmark and its runs (``pack``: pack, verify, read), re-run with no
network (``run``), with no credential in it (``redaction``)."""
