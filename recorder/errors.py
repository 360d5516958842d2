"""The recorder's errors: what stops a recording (a proxy that cannot listen, a start page that
fails, a session script that breaks), each explained in one line.

They are not :class:`~webfreeze.archives.ArchiveError`: the archive is fine when a crawl's seed is
unreachable. An ArchiveError raised while recording (a locked or damaged archive) still comes
through as itself.

::

    WebfreezeError
    └── RecordError
        ├── ProxyError          the recording proxy cannot listen or start
        ├── SiteUnreachable     the probe of a start URL failed (network error, 4xx/5xx answer)
        ├── CrawlError          a bad --scope or --screenshots value
        │   └── SeedFailed      the crawl's first page could not be recorded
        └── SessionScriptError  a session script that is missing, cannot load, or fails
"""

from __future__ import annotations

from webfreeze.common.errors import WebfreezeError


class RecordError(WebfreezeError):
    """A recording could not start or go on (also: a start URL that is not a valid http(s) URL)."""


class ProxyError(RecordError):
    """The recording proxy cannot listen or start. (A malformed ``--resolve`` entry is
    :class:`webfreeze.common.resolve.ResolveError`.)"""


class SiteUnreachable(RecordError):
    """A start URL fetched through the recording proxy failed: a network error or a 4xx/5xx answer."""


class CrawlError(RecordError):
    """A crawl's settings are unusable (a ``--scope`` that is not a regular expression, an unknown
    ``--screenshots`` value)."""


class SeedFailed(CrawlError):
    """The crawl's first page could not be recorded: the crawl stops, and an archive it made is
    removed again (an existing archive keeps what the failed attempt recorded, no page record)."""

    discard = True  # read by recording_into: a recording whose start failed publishes nothing


class SessionScriptError(RecordError):
    """A session's script is missing, cannot be loaded, defines no ``run(page)``, or failed while
    driving the page; also a session given neither a script nor ``--headed``. ``recorded``: the
    steps logged before a script failed while driving the page (its exchanges stay in the archive,
    ``--redact`` still redacts them, passwords typed among these steps included), else None."""

    def __init__(self, message: str, recorded: list | None = None):
        super().__init__(message)
        self.recorded = recorded
