"""Number formats of the one visual language (pages.md), as plain functions.

Pages, the monthly pack, selectors and the template filters (`{% load ui %}`,
governance.templatetags.ui) all format through here: GPU-hours with one decimal,
durations as `2 h 05 m`, percentages without false precision. A missing value is
shown as an em dash.
"""

from __future__ import annotations

import datetime as dt
import math

MISSING = "—"


def is_missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def duration(seconds) -> str:
    """Seconds (or a timedelta) as the two largest units: `45 s`, `2 h 05 m`, `3 d 04 h`."""
    if is_missing(seconds):
        return MISSING
    if isinstance(seconds, dt.timedelta):
        seconds = seconds.total_seconds()
    total = round(float(seconds))
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days} d {hours:02d} h"
    elif hours:
        text = f"{hours} h {minutes:02d} m"
    elif minutes:
        text = f"{minutes} m {secs:02d} s"
    else:
        text = f"{secs} s"
    return sign + text


def hours(seconds) -> str:
    """Seconds (or a timedelta) in hours and minutes, to set beside a limit given in
    hours: `30 h 01 m`, `29 h`, `45 m`, `1,200 h`. Never a float (`30.0167 h`)."""
    if is_missing(seconds):
        return MISSING
    if isinstance(seconds, dt.timedelta):
        seconds = seconds.total_seconds()
    total = round(float(seconds) / 60)
    sign = "-" if total < 0 else ""
    whole, minutes = divmod(abs(total), 60)
    if not minutes:
        return f"{sign}{whole:,} h"
    if not whole:
        return f"{sign}{minutes} m"
    return f"{sign}{whole:,} h {minutes:02d} m"


def relative(instant, now=None) -> str:
    """An instant as its distance from now, for people: `in 2 d 03 h`, `5 m 00 s ago`,
    `now` (within a second). A missing instant is an em dash."""
    if is_missing(instant):
        return MISSING
    if now is None:
        from django.utils import timezone

        now = timezone.now()
    seconds = round((instant - now).total_seconds())
    if seconds == 0:
        return "now"
    text = duration(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def gpu_hours(gpu_seconds) -> str:
    """GPU-seconds as GPU-hours with one decimal: 44280 -> `12.3`, 4.5e6 -> `1,250.0`."""
    if is_missing(gpu_seconds):
        return MISSING
    return f"{float(gpu_seconds) / 3600:,.1f}"


def percent(fraction) -> str:
    """A fraction (0.42) as a whole percentage (`42%`), never claiming more than it knows.

    A small non-zero value is `<1%` rather than `0%`, and a value just short of one is
    `>99%` rather than `100%`, so "nothing" and "all" are only said when they are true.
    """
    if is_missing(fraction):
        return MISSING
    value = float(fraction) * 100
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude == 0:
        return "0%"
    if magnitude < 1:
        return f"{sign}<1%"
    if 99 < magnitude < 100:
        return f"{sign}>99%"
    return f"{sign}{math.floor(magnitude + 0.5)}%"
