"""Capture times: stored as UTC ISO 8601 with microseconds so they sort as text."""

from __future__ import annotations

import calendar
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
                raise BadInput(f"bad timestamp {value!r}: expected ISO 8601 or a 1-14 digit timestamp "
                               "(YYYYMMDDhhmmss or a prefix of it)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


_ISO_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_PAD_UP = "99991231235959"


def parse_time_upper(value: str) -> datetime:
    """The latest instant ``value`` names, for an inclusive upper bound (``--until``): missing fields
    take their latest value, as pywb pads a "to" timestamp (``2014`` is 2014-12-31 23:59:59.999999,
    ``201402`` ends on 28 February, a date alone ends at midnight). A full timestamp is that
    second's last microsecond; an ISO 8601 time with a fraction is exact."""
    earliest = parse_time(value)  # validates, and gives the answer when nothing is missing
    text = value.strip()
    if _DIGITS.match(text):
        padded = text + _PAD_UP[len(text):]  # digit by digit, then each field brought into range
        year, month = int(padded[0:4]), min(max(int(padded[4:6]), 1), 12)
        day = min(max(int(padded[6:8]), 1), calendar.monthrange(year, month)[1])
        hour, minute, second = min(int(padded[8:10]), 23), min(int(padded[10:12]), 59), min(int(padded[12:14]), 59)
        return datetime(year, month, day, hour, minute, second, 999999, tzinfo=timezone.utc)
    if _ISO_DATE.match(text):
        return earliest.replace(hour=23, minute=59, second=59, microsecond=999999)
    if "." not in text and earliest.microsecond == 0:
        return earliest.replace(microsecond=999999)
    return earliest


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
