"""Capture times: stored as UTC ISO 8601 with microseconds so they sort as text."""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

from .errors import BadInput  # (an ArchiveError: one line for the user)

_DIGITS = re.compile(r"^\d{1,14}$")


def parse_time(value: str | datetime) -> datetime:
    """Parse an ISO 8601 date or a 1-14 digit WARC/pywb timestamp into an aware UTC datetime.

    A short digit string is padded the way pywb does: missing fields take their earliest value.
    """
    if isinstance(value, datetime):
        dt = value
    else:
        text = value.strip()
        if _DIGITS.match(text):
            padded = text + "00000101000000"[len(text):] if len(text) < 14 else text
            try:
                dt = datetime.strptime(padded, "%Y%m%d%H%M%S")
            except ValueError:
                raise BadInput(f"bad timestamp {value!r}: expected up to 14 digits YYYYMMDDhhmmss "
                               "that make a real date, or ISO 8601") from None
        else:
            try:
                dt = datetime.fromisoformat(text.replace("z", "Z"))
            except ValueError:
                raise BadInput(f"bad timestamp {value!r}: expected ISO 8601 or 14 digits") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def normalize_time(value: str | datetime) -> str:
    """Canonical text form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if isinstance(value, str):
        return _normalize_text(value)
    return parse_time(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@functools.lru_cache(maxsize=4096)  # records of one crawl share their seconds
def _normalize_text(value: str) -> str:
    return parse_time(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_warc_date(stored: str) -> str:
    """WARC 1.1 date for a stored time, dropping a zero fraction to keep second precision readable."""
    if stored.endswith(".000000Z"):
        return stored[: -len(".000000Z")] + "Z"
    return stored


def to_timestamp14(stored: str) -> str:
    """The 14-digit form pywb and CDXJ use."""
    return parse_time(stored).strftime("%Y%m%d%H%M%S")


def now() -> str:
    """The current time in canonical form."""
    return normalize_time(datetime.now(timezone.utc))
