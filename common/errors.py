"""The base of the errors a user can cause; the CLI prints any of them as one line and exits 1."""


class WebfreezeError(Exception):
    """A problem a user can cause (a bad file, a path that cannot be written, a port in use),
    explained in one line."""


class OutputError(WebfreezeError):
    """An output file that cannot or must not be written (it is an input, it exists, its folder is
    missing or read-only, the disk is full)."""
