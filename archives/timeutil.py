"""Capture times: stored as UTC ISO 8601 with microseconds so they sort as text."""

from __future__ import annotations

import calendar
import functools
import re
from datetime import datetime, timedelta, timezone

from .errors import BadInput  # (an ArchiveError: one line for the user)

_DIGITS = re.compile(r"^\d{1,14}$", re.ASCII)


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
        elif _ISO_MONTH.match(text):  # YYYY-MM, which fromisoformat does not take
            try:
                dt = datetime(int(text[:4]), int(text[5:7]), 1)
            except ValueError:
                raise BadInput(f"bad timestamp {value!r}: not a real month") from None
        else:
            try:
                dt = datetime.fromisoformat(text.replace("z", "Z"))
            except ValueError:
                raise BadInput(f"bad timestamp {value!r}: expected ISO 8601 or a 1-14 digit timestamp "
                               "(YYYYMMDDhhmmss or a prefix of it)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc)
    except OverflowError:  # an offset that moves the time out of years 1-9999
        raise BadInput(f"bad timestamp {value!r}: outside the years 1 to 9999 in UTC") from None


_ISO_MONTH = re.compile(r"^\d{4}-\d\d$", re.ASCII)
_ISO_DATE = re.compile(r"^\d{4}-\d\d-\d\d$", re.ASCII)
_ISO_WEEK = re.compile(r"^\d{4}-?W\d\d(?P<day>-?\d)?$", re.ASCII)
# An ISO 8601 date and time; which of minutes, seconds and a fraction it gives.
# The date may be a calendar date (2014-01-26, 20140126) or a week date (2014-W05-3, 2014W053, 2014-W05).
_ISO_TIME = re.compile(r"^(?:\d{4}-\d\d-\d\d|\d{8}|\d{4}-?W\d\d(?:-?\d)?)[T ]\d\d(?P<min>:?\d\d)?(?P<sec>:?\d\d)?"
                       r"(?P<frac>[.,]\d+)?(?:[Zz]|[+-]\d\d(?::?\d\d)?)?$", re.ASCII)


def parse_time_upper(value: str) -> datetime:
    """The latest instant ``value`` names, for an inclusive upper bound (``--until``): every field
    it leaves out takes its latest value (``2014`` is 2014-12-31 23:59:59.999999, ``201402`` ends
    on 28 February, ``2014-01-26`` at midnight, ``2014-01-26T10:00`` at 10:00:59.999999); a
    fraction of a second is exact; ``2014-02`` is the month and ``2014-W05`` the week. Digits are padded with 9s
    and each field then brought into
    range, so a partial field counts too (``20141`` is October to December)."""
    earliest = parse_time(value)  # validates, and gives the answer when nothing is missing
    text = value.strip()
    if _DIGITS.match(text):
        padded = text.ljust(14, "9")
        year, month = int(padded[0:4]), min(max(int(padded[4:6]), 1), 12)
        day = min(max(int(padded[6:8]), 1), calendar.monthrange(year, month)[1])
        hour, minute, second = min(int(padded[8:10]), 23), min(int(padded[10:12]), 59), min(int(padded[12:14]), 59)
        return datetime(year, month, day, hour, minute, second, 999999, tzinfo=timezone.utc)
    # ISO 8601: the start of the period given, plus the period, less a microsecond
    if _ISO_MONTH.match(text):
        year, month = earliest.year, earliest.month
        period = timedelta(days=calendar.monthrange(year, month)[1])
    elif _ISO_DATE.match(text):
        period = timedelta(days=1)
    elif m := _ISO_WEEK.match(text):
        period = timedelta(days=1 if m.group("day") else 7)
    elif (m := _ISO_TIME.match(text)) and not m.group("frac"):
        period = timedelta(seconds=1 if m.group("sec") else 60 if m.group("min") else 3600)
    else:
        return earliest
    try:
        return earliest + period - timedelta(microseconds=1)
    except OverflowError:  # the last period of year 9999 ends with time itself
        return datetime.max.replace(tzinfo=timezone.utc)


def normalize_time(value: str | datetime) -> str:
    """Canonical text form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if isinstance(value, str):
        return _normalize_text(value)
    return _canonical(parse_time(value))


@functools.lru_cache(maxsize=4096)  # records of one crawl share their seconds
def _normalize_text(value: str) -> str:
    return _canonical(parse_time(value))


def _canonical(dt: datetime) -> str:
    # four-digit years whatever the platform's strftime does with years before 1000, so that stored
    # times always sort as text
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%S.%f}Z"


def to_warc_date(stored: str) -> str:
    """WARC 1.1 date for a stored time, dropping a zero fraction to keep second precision readable."""
    if stored.endswith(".000000Z"):
        return stored[: -len(".000000Z")] + "Z"
    return stored


def to_timestamp14(stored: str) -> str:
    """The 14-digit form pywb and CDXJ use."""
    dt = parse_time(stored)
    return f"{dt.year:04d}{dt:%m%d%H%M%S}"


def now() -> str:
    """The current time in canonical form."""
    return normalize_time(datetime.now(timezone.utc))
