"""Months and weeks of the signals: a month runs from its first day (UTC); weeks start on
Monday, the month's first week on its first day.
"""

from __future__ import annotations

import datetime as dt


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def next_month(month: dt.date) -> dt.date:
    return (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def previous_month(month: dt.date) -> dt.date:
    return (month.replace(day=1) - dt.timedelta(days=1)).replace(day=1)


def months_back(month: dt.date, count: int) -> list[dt.date]:
    """`count` months ending with `month`, oldest first."""
    months = [month_start(month)]
    while len(months) < count:
        months.insert(0, previous_month(months[0]))
    return months


def month_bounds(month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(month_start(month), dt.time(), tzinfo=dt.UTC)
    return start, dt.datetime.combine(next_month(month), dt.time(), tzinfo=dt.UTC)


def last_full_month(now: dt.datetime) -> dt.date:
    return previous_month(now.astimezone(dt.UTC).date())


def month_weeks(month: dt.date) -> list[dt.date]:
    """The starts of the month's weeks: its first day, then every Monday in it."""
    end = next_month(month)
    weeks = [month]
    day = month + dt.timedelta(days=(7 - month.weekday()) % 7 or 7)
    while day < end:
        weeks.append(day)
        day += dt.timedelta(days=7)
    return weeks


def week_index(weeks: list[dt.date], at: dt.datetime) -> int:
    day = at.astimezone(dt.UTC).date()
    index = 0
    for position, start in enumerate(weeks):
        if start <= day:
            index = position
    return index
