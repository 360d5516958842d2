"""Errors a user can cause with an archive; the CLI prints them as one line."""

from webfreeze.common.errors import WebfreezeError


class ArchiveError(WebfreezeError):
    """A problem with an archive or an input file, explained in one line."""


class ArchiveLocked(ArchiveError):
    """Another process has the archive open for writing."""


class BadInput(ArchiveError):
    """An input file (WARC, ARC, WACZ) is malformed, truncated, lying or dangerous."""
