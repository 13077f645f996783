"""Date and time system functions.

Theory of operation: the dialect's date-times are UTC ISO-8601 strings
`YYYY-MM-DDThh:mm:ss.fffffffZ` (seven fractional digits). Internally a
date-time is an int count of 100 ns ticks since 0001-01-01T00:00:00Z, which
makes arithmetic exact. The current time is never read from a clock here: the
`GetCurrent*` functions receive `now_ms` (ms since the Unix epoch) from the
engine, which got it from the caller of `execute`. DateTimeDiff counts the
part boundaries crossed between two instants, like the service. Malformed
strings, unknown parts or out-of-range results give undefined.
`TABLE` maps upper-case name to (function, min_args, max_args, needs_now).
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import date

from regionlab.emulator.core.query.values import NUMBER_TYPES, UNDEFINED

TICKS_PER_MICROSECOND = 10
TICKS_PER_MS = 10_000
TICKS_PER_SECOND = 10_000_000
TICKS_PER_MINUTE = 60 * TICKS_PER_SECOND
TICKS_PER_HOUR = 60 * TICKS_PER_MINUTE
TICKS_PER_DAY = 24 * TICKS_PER_HOUR
UNIX_EPOCH_TICKS = (date(1970, 1, 1).toordinal() - 1) * TICKS_PER_DAY
FRACTION_DIGITS = 7
NANOSECONDS_PER_TICK = 100

_FORMAT = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,7}))?)?)?Z?")

_PART_NAMES = {
    "year": ("year", "yyyy", "yy"), "month": ("month", "mm", "m"), "day": ("day", "dd", "d"),
    "hour": ("hour", "hh"), "minute": ("minute", "mi", "n"), "second": ("second", "ss", "s"),
    "millisecond": ("millisecond", "ms"), "microsecond": ("microsecond", "mcs"),
    "nanosecond": ("nanosecond", "ns"),
}
PARTS = {alias: part for part, aliases in _PART_NAMES.items() for alias in aliases}
_FIXED_TICKS = {
    "day": TICKS_PER_DAY, "hour": TICKS_PER_HOUR, "minute": TICKS_PER_MINUTE, "second": TICKS_PER_SECOND,
    "millisecond": TICKS_PER_MS, "microsecond": TICKS_PER_MICROSECOND,
}


def parse_ticks(text) -> int | None:
    if type(text) is not str:
        return None
    match = _FORMAT.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        days = date(int(year), int(month), int(day)).toordinal() - 1
    except ValueError:
        return None
    hour, minute, second = int(hour or 0), int(minute or 0), int(second or 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    ticks = int((fraction or "0").ljust(FRACTION_DIGITS, "0"))
    return days * TICKS_PER_DAY + hour * TICKS_PER_HOUR + minute * TICKS_PER_MINUTE + second * TICKS_PER_SECOND + ticks


def format_ticks(ticks: int):
    days, rest = divmod(ticks, TICKS_PER_DAY)
    try:
        day = date.fromordinal(days + 1)
    except (ValueError, OverflowError):
        return UNDEFINED
    hour, rest = divmod(rest, TICKS_PER_HOUR)
    minute, rest = divmod(rest, TICKS_PER_MINUTE)
    second, fraction = divmod(rest, TICKS_PER_SECOND)
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{fraction:07d}Z"


def _part(name):
    return PARTS.get(name.lower()) if type(name) is str else None


def _count(value):
    if type(value) not in NUMBER_TYPES or not math.isfinite(value):
        return None
    return int(value)


def _add_months(ticks: int, months: int):
    days, rest = divmod(ticks, TICKS_PER_DAY)
    day = date.fromordinal(days + 1)
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        return None
    clamped = min(day.day, calendar.monthrange(year, month + 1)[1])
    return (date(year, month + 1, clamped).toordinal() - 1) * TICKS_PER_DAY + rest


def date_time_add(part, amount, text):
    part, amount, ticks = _part(part), _count(amount), parse_ticks(text)
    if part is None or amount is None or ticks is None:
        return UNDEFINED
    if part in ("year", "month"):
        result = _add_months(ticks, amount * 12 if part == "year" else amount)
    elif part == "nanosecond":
        result = ticks + amount // NANOSECONDS_PER_TICK
    else:
        result = ticks + amount * _FIXED_TICKS[part]
    return UNDEFINED if result is None or result < 0 else format_ticks(result)


def date_time_part(part, text):
    part, ticks = _part(part), parse_ticks(text)
    if part is None or ticks is None:
        return UNDEFINED
    days, rest = divmod(ticks, TICKS_PER_DAY)
    day = date.fromordinal(days + 1)
    fields = {
        "year": day.year, "month": day.month, "day": day.day,
        "hour": rest // TICKS_PER_HOUR, "minute": rest // TICKS_PER_MINUTE % 60,
        "second": rest // TICKS_PER_SECOND % 60, "millisecond": rest % TICKS_PER_SECOND // TICKS_PER_MS,
        "microsecond": rest % TICKS_PER_SECOND // TICKS_PER_MICROSECOND,
        "nanosecond": rest % TICKS_PER_SECOND * NANOSECONDS_PER_TICK,
    }
    return fields[part]


def _month_index(ticks: int) -> int:
    day = date.fromordinal(ticks // TICKS_PER_DAY + 1)
    return day.year * 12 + day.month - 1


def date_time_diff(part, start, end):
    part, a, b = _part(part), parse_ticks(start), parse_ticks(end)
    if part is None or a is None or b is None:
        return UNDEFINED
    if part == "year":
        return _month_index(b) // 12 - _month_index(a) // 12
    if part == "month":
        return _month_index(b) - _month_index(a)
    if part == "nanosecond":
        return (b - a) * NANOSECONDS_PER_TICK
    unit = _FIXED_TICKS[part]
    return b // unit - a // unit


def date_time_from_parts(year, month, day, hour=0, minute=0, second=0, fraction=0):
    parts = [_count(v) for v in (year, month, day, hour, minute, second, fraction)]
    if any(p is None for p in parts):
        return UNDEFINED
    text = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}".format(*parts[:6])
    ticks = parse_ticks(text) if 0 <= parts[6] < TICKS_PER_SECOND else None
    return UNDEFINED if ticks is None else format_ticks(ticks + parts[6])


def _from_unix_ms(ms):
    ms = _count(ms)
    return UNDEFINED if ms is None else format_ticks(UNIX_EPOCH_TICKS + ms * TICKS_PER_MS)


def _to_unix_ms(text):
    ticks = parse_ticks(text)
    return UNDEFINED if ticks is None else (ticks - UNIX_EPOCH_TICKS) // TICKS_PER_MS


def _to_unix_ticks(text):
    ticks = parse_ticks(text)
    return UNDEFINED if ticks is None else ticks - UNIX_EPOCH_TICKS


def _from_unix_ticks(ticks):
    ticks = _count(ticks)
    return UNDEFINED if ticks is None else format_ticks(UNIX_EPOCH_TICKS + ticks)


TABLE = {
    "GETCURRENTDATETIME": (_from_unix_ms, 0, 0, True),
    "GETCURRENTDATETIMESTATIC": (_from_unix_ms, 0, 0, True),
    "GETCURRENTTIMESTAMP": (lambda now_ms: now_ms, 0, 0, True),
    "GETCURRENTTIMESTAMPSTATIC": (lambda now_ms: now_ms, 0, 0, True),
    "GETCURRENTTICKS": (lambda now_ms: now_ms * TICKS_PER_MS, 0, 0, True),
    "GETCURRENTTICKSSTATIC": (lambda now_ms: now_ms * TICKS_PER_MS, 0, 0, True),
    "DATETIMEADD": (date_time_add, 3, 3, False),
    "DATETIMEPART": (date_time_part, 2, 2, False),
    "DATETIMEDIFF": (date_time_diff, 3, 3, False),
    "DATETIMEFROMPARTS": (date_time_from_parts, 3, 7, False),
    "DATETIMETOTIMESTAMP": (_to_unix_ms, 1, 1, False),
    "TIMESTAMPTODATETIME": (_from_unix_ms, 1, 1, False),
    "DATETIMETOTICKS": (_to_unix_ticks, 1, 1, False),
    "TICKSTODATETIME": (_from_unix_ticks, 1, 1, False),
}
