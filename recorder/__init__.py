"""Capturing live traffic into an archive: the recording proxy (mitmproxy addon), crawls and
scripted sessions. What stops a recording is a :class:`~webfreeze.recorder.errors.RecordError`
(``errors``), not an ArchiveError."""
