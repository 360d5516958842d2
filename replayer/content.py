"""Content codings: moved to :mod:`webfreeze.archives.content` (an archive record's ``body()`` undoes
them too); the names stay importable from here for the stages that used them."""

from webfreeze.archives.content import MAX_DECODED, DecodeError, content_encoding, decode_content, decode_for_display

__all__ = ["MAX_DECODED", "DecodeError", "content_encoding", "decode_content", "decode_for_display"]
