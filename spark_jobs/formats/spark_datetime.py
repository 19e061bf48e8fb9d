"""Spark's rules for reading a JSON string as a DATE or a TIMESTAMP, as ``from_json`` applies them
with its default options (no ``dateFormat`` / ``timestampFormat``; parsing fallback on).

These are the rules of Spark's ``CAST(string AS DATE / TIMESTAMP)`` (``DateTimeUtils.stringToDate``
and ``stringToTimestamp``), tried a second time with the first ``GMT`` removed, and for dates a
third time as a number of days since 1970 (a Spark 1.5 format, read on the Julian calendar before
1582-10-15). Ported from Spark's source and checked against Spark itself by
``tests/formats/test_json_conformance.py``:

- dates: ``[+-]yyyy[yyy]``, ``…-[m]m``, ``…-[m]m-[d]d`` and anything after that date and a space or
  ``T``; leading and trailing white space and control characters are trimmed.
- timestamps: the date forms, then ``[h]h[:[m]m[:[s]s[.fraction]]]`` after a space or ``T``, then a
  zone: ``Z``, ``[+-]h[h][[:]mm[[:]ss]]``, ``UTC``/``GMT``/``UT`` with or without an offset, a
  region (``America/New_York``) or one of Java's short ids (``PST``). Fraction digits past the
  sixth are dropped; without a zone the session's time zone applies (a time in a zone's gap moves
  forward by the gap, an ambiguous one takes the earlier offset, as Java's ``ZonedDateTime.of``).

Two deliberate differences (``None`` here, so the record is quarantined), named in docs/formats.md:
a time without a date (``T10:00:00``, ``10:00:00``), which Spark dates to the day of the run (so a
replay would write another value), and an epoch number of seconds whose microseconds overflow a
64-bit integer (Spark wraps it around silently).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

_MICROS_PER_DAY = 86_400_000_000
_LONG = (-(2**63), 2**63 - 1)
_MAX_OFFSET_S = 18 * 3600
# java.time.ZoneId.SHORT_IDS, which Spark passes to ZoneId.of.
_SHORT_IDS = {
    "EST": "-05:00", "MST": "-07:00", "HST": "-10:00", "ACT": "Australia/Darwin", "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires", "ART": "Africa/Cairo", "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka", "CAT": "Africa/Harare", "CNT": "America/St_Johns",
    "CST": "America/Chicago", "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan", "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}
_OFFSET = re.compile(r"[+-](?:\d|\d\d(?::\d\d(?::\d\d)?|\d\d(?:\d\d)?)?)")
_REGION = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+")
# Regions that are UTC for all time: read as the offset, so Arrow can read local times in them.
_UTC_REGIONS = frozenset({"Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0",
                          "Etc/GMT-0", "Etc/Greenwich", "UCT", "Universal", "Zulu", "GMT0", "Greenwich"})
_JULIAN_SWITCH_DAY = -141427  # 1582-10-15, the first day of the Gregorian calendar
# Java's Character.isWhitespace and isISOControl: what UTF8String.trimAll removes from both ends.
_TRIMMED = "".join(map(chr, range(0x21))) + "".join(map(chr, range(0x7F, 0xA0))) + \
    "\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2008\u2009\u200a\u2028\u2029\u205f\u3000"


class Zone:
    """A zone a local date-time is read in: a fixed offset, or a region's rules."""

    def __init__(self, offset_s: int | None = None, region: ZoneInfo | None = None):
        self.offset_s, self.region = offset_s, region

    def epoch_seconds(self, days: int, second_of_day: int) -> int:
        if self.region is None:
            return days * 86_400 + second_of_day - (self.offset_s or 0)
        # zoneinfo needs years 1 to 9999; the rules of the Gregorian calendar repeat every 400 years.
        shift = 0
        year = _civil(days)[0]
        if year > 9999:
            shift = (year - 9600) // 400 * 146_097
        elif year < 1:
            shift = (year - 400) // 400 * 146_097
        local = datetime(1970, 1, 1) + timedelta(days=days - shift, seconds=second_of_day)
        offset = local.replace(tzinfo=self.region).utcoffset()  # fold 0: the earlier offset of an overlap
        assert offset is not None
        # In a gap, fold 0 gives the offset before the transition: the time moves forward by the gap.
        return days * 86_400 + second_of_day - int(offset.total_seconds())


UTC = Zone(0)


@lru_cache(maxsize=256)
def zone(zone_id: str) -> Zone | None:
    """Spark's ``getZoneId``: ``ZoneId.of`` with the short ids, after fixing ``+h:mm`` and ``+hh:m``."""
    zone_id = re.sub(r"([+-])(\d):", r"\g<1>0\2:", zone_id, count=1)
    zone_id = re.sub(r"([+-])(\d\d):(\d)$", r"\1\2:0\3", zone_id, count=1)
    zone_id = _SHORT_IDS.get(zone_id, zone_id)
    if zone_id == "Z":
        return UTC
    if zone_id[:1] in "+-" and zone_id:
        return _offset(zone_id)
    for prefix in ("UTC", "GMT", "UT"):
        if zone_id.startswith(prefix):
            rest = zone_id[len(prefix):]
            if not rest:
                return UTC
            if rest[0] in "+-":
                return _offset(rest)
            break
    if not _REGION.fullmatch(zone_id) or zone_id in ("localtime", "posixrules", "Factory"):
        return None
    if zone_id in _UTC_REGIONS:
        return UTC
    try:
        return Zone(region=ZoneInfo(zone_id))
    except (ValueError, OSError, KeyError, ImportError):  # not a key, or no zone of that name
        return None


def _offset(text: str) -> Zone | None:
    """``ZoneOffset.of``: ``+h``, ``+hh``, ``+hh:mm``, ``+hhmm``, ``+hh:mm:ss`` or ``+hhmmss``, at most 18:00."""
    if _OFFSET.fullmatch(text) is None:
        return None
    digits = text[1:].replace(":", "")
    h, m, s = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    total = h * 3600 + m * 60 + s
    if h > 18 or m > 59 or s > 59 or total > _MAX_OFFSET_S:
        return None
    return Zone(-total if text[0] == "-" else total)


def _trim(text: str) -> str:
    return text.strip(_TRIMMED)


def string_to_date(text: str) -> int | None:
    """Days since 1970-01-01 (``DateTimeUtils.stringToDate``), or None."""
    b = _trim(text)
    if not b:
        return None
    segments, sign, i, value, digits, j = [1, 1, 1], 1, 0, 0, 0, 0
    if b[0] in "+-":
        sign, j = (-1 if b[0] == "-" else 1), 1
    while j < len(b) and i < 3 and b[j] not in " T":
        c = b[j]
        if i < 2 and c == "-":
            if not _date_digits(i, digits):
                return None
            segments[i], value, digits, i = value, 0, 0, i + 1
        elif "0" <= c <= "9":
            value, digits = value * 10 + ord(c) - 48, digits + 1
        else:
            return None
        j += 1
    if not _date_digits(i, digits) or (i < 2 and j < len(b)):
        return None
    segments[i] = value
    return _days(sign * segments[0], segments[1], segments[2])


def _date_digits(segment: int, digits: int) -> bool:
    return 4 <= digits <= 7 if segment == 0 else 0 < digits <= 2


def json_date(text: str) -> int | None:
    """A JSON string as ``from_json`` reads a DATE: the CAST rules, then without ``GMT``, then as days."""
    days = string_to_date(text)
    if days is None and "GMT" in text:
        days = string_to_date(text.replace("GMT", "", 1))
    if days is None and re.fullmatch(r"[+-]?[0-9]+", text):
        number = int(text)
        if -(2**31) <= number < 2**31:
            days = _julian_to_gregorian(number)
    return days


def _timestamp_parts(text: str) -> tuple[list[int], str | None, bool] | None:
    """``DateTimeUtils.parseTimestampString``: the 7 fields, the zone text, whether only a time."""
    b = _trim(text)
    if not b:
        return None
    segments = [1, 1, 1, 0, 0, 0, 0]
    i = value = digits = fraction_digits = j = 0
    tz: str | None = None
    just_time = False
    sign: int | None = None
    if b[0] in "+-":
        sign, j = (-1 if b[0] == "-" else 1), 1
    while j < len(b):
        c = b[j]
        if "0" <= c <= "9":
            if i == 6:
                fraction_digits += 1
            if i != 6 or digits < 6:
                value = value * 10 + ord(c) - 48
            digits += 1
            j += 1
            continue
        if j == 0 and c == "T":
            just_time, i = True, i + 3
        elif i < 2:
            if c == "-":
                if not _ts_digits(i, digits):
                    return None
                segments[i], value, digits, i = value, 0, 0, i + 1
            elif i == 0 and c == ":" and sign is None:
                just_time = True
                if not _ts_digits(3, digits):
                    return None
                segments[3], value, digits, i = value, 0, 0, 4
            else:
                return None
        elif i == 2:
            if c not in " T" or not _ts_digits(i, digits):
                return None
            segments[i], value, digits, i = value, 0, 0, i + 1
        elif i in (3, 4):
            if c != ":" or not _ts_digits(i, digits):
                return None
            segments[i], value, digits, i = value, 0, 0, i + 1
        elif i in (5, 6):
            if not _ts_digits(i, digits):
                return None
            segments[i], value, digits, i = value, 0, 0, i + 1
            if not (c == "." and i == 6):
                tz = b[j:]
                j = len(b) - 1
                if i == 6:
                    i += 1
        else:
            return None
        j += 1
    if i >= 7:
        if not (digits <= 2):
            return None
    else:
        if not _ts_digits(i, digits):
            return None
        segments[i] = value
    while fraction_digits < 6:
        segments[6] *= 10
        fraction_digits += 1
    segments[0] *= sign or 1
    return segments, tz, just_time


def _ts_digits(segment: int, digits: int) -> bool:
    if segment == 0:
        return 4 <= digits <= 6
    return segment == 6 or 0 < digits <= 2


def string_to_timestamp(text: str, session: Zone, *, allow_zone: bool = True) -> int | None:
    """Microseconds since the epoch (``DateTimeUtils.stringToTimestamp``), or None. Without
    ``allow_zone`` (TIMESTAMP_NTZ) a zone makes the string invalid and the result is local time."""
    parts = _timestamp_parts(text)
    if parts is None:
        return None
    (year, month, day, hour, minute, second, micros), tz, just_time = parts
    if just_time:
        return None  # deliberate: Spark takes today's date, which a replay would not reproduce
    at = session
    if tz is not None:
        if not allow_zone:
            return None
        found = zone(tz.strip())
        if found is None:
            return None
        at = found
    days = _days(year, month, day)
    if days is None or hour > 23 or minute > 59 or second > 59:
        return None
    seconds = (days * 86_400 + hour * 3600 + minute * 60 + second) if not allow_zone else \
        at.epoch_seconds(days, hour * 3600 + minute * 60 + second)
    result = seconds * 1_000_000 + micros
    return result if _LONG[0] <= result <= _LONG[1] else None


def json_timestamp(text: str, session: Zone) -> int | None:
    """A JSON string as ``from_json`` reads a TIMESTAMP: the CAST rules, then without ``GMT``."""
    micros = string_to_timestamp(text, session)
    if micros is None and "GMT" in text:
        micros = string_to_timestamp(text.replace("GMT", "", 1), session)
    return micros


def epoch_seconds_to_micros(seconds: int) -> int | None:
    """A JSON integer in a TIMESTAMP column: seconds since the epoch (None where Spark would wrap)."""
    micros = seconds * 1_000_000
    return micros if _LONG[0] <= micros <= _LONG[1] else None


def _days(year: int, month: int, day: int) -> int | None:
    """Days since 1970-01-01 of a proleptic Gregorian date, or None if there is no such date."""
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day > (29 if leap else 28) if month == 2 else day > (30 if month in (4, 6, 9, 11) else 31):
        return None
    # Howard Hinnant's days_from_civil
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of days since 1970-01-01."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def _julian_to_gregorian(days: int) -> int | None:
    """``RebaseDateTime.rebaseJulianToGregorianDays``: the Julian calendar's date of ``days``, as a
    proleptic Gregorian date (the same before 1582-10-15, where the calendars agree from then on)."""
    if days >= _JULIAN_SWITCH_DAY:
        return days
    # Julian calendar date of the Julian Day Number (Meeus), astronomical years (0 = 1 BC)
    jdn = days + 2_440_588
    c = jdn + 32_082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    day = e - (153 * m + 2) // 5 + 1
    month = m + 3 - 12 * (m // 10)
    year = d - 4800 + m // 10
    return _days(year, month, day)


def session_zone(time_zone: str) -> Zone:
    """The session's time zone (``spark.sql.session.timeZone``), as Spark reads that setting."""
    found = zone(time_zone)
    if found is None:
        raise ValueError(f"unknown time zone {time_zone!r}")
    return found
