"""When the next leadership pack is made, said truly on every day of the month (issue 28,
point 9): beat makes last month's pack on the first at PACK_HOUR_UTC, so on the 1st before
that hour the first pack is made today, after it on the first of next month; on the last
day of a month (31 December and 29 February too) it is tomorrow. A fixed clock throughout.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from celery.schedules import crontab
from django.urls import reverse
from django.utils import timezone

from core.celery import app
from governance.dashboards import views
from governance.dashboards.pack import PACK_HOUR_UTC, pack_schedule

UTC = dt.UTC
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")


def at(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "run", "month", "day"),
    [
        # The 1st before the hour: last month's pack is made today.
        (at(2026, 12, 1, 3, 0), at(2026, 12, 1, 6), dt.date(2026, 11, 1), "today"),
        # The 1st after the hour: this month's pack, on the first of next month.
        (
            at(2026, 12, 1, 7, 0),
            at(2027, 1, 1, 6),
            dt.date(2026, 12, 1),
            "on Friday 1 January 2027",
        ),
        # The hour itself has passed: the run is the next one.
        (
            at(2026, 12, 1, 6, 0),
            at(2027, 1, 1, 6),
            dt.date(2026, 12, 1),
            "on Friday 1 January 2027",
        ),
        # The last day of a month, 31 December and 29 February: tomorrow.
        (at(2026, 11, 30, 12, 0), at(2026, 12, 1, 6), dt.date(2026, 11, 1), "tomorrow"),
        (at(2026, 12, 31, 23, 59), at(2027, 1, 1, 6), dt.date(2026, 12, 1), "tomorrow"),
        (at(2028, 2, 29, 10, 0), at(2028, 3, 1, 6), dt.date(2028, 2, 1), "tomorrow"),
        # Mid-month.
        (
            at(2026, 12, 15, 9, 0),
            at(2027, 1, 1, 6),
            dt.date(2026, 12, 1),
            "on Friday 1 January 2027",
        ),
    ],
)
def test_the_next_pack_is_said_on_the_right_day(now, run, month, day):
    schedule = pack_schedule(now=now, tz=UTC)
    assert schedule.at == run
    assert schedule.month == month
    assert schedule.day == day
    assert schedule.overdue is None


def test_today_and_tomorrow_are_the_readers_days():
    # 29 Feb 22:00 UTC is 1 March 07:00 in Tokyo: the 06:00 UTC run is at 15:00 there, today.
    assert pack_schedule(now=at(2028, 2, 29, 22, 0), tz=TOKYO).day == "today"
    assert pack_schedule(now=at(2028, 2, 29, 22, 0), tz=UTC).day == "tomorrow"
    # 30 Nov 14:00 UTC is still 30 Nov in Tokyo (23:00): the run is tomorrow there too.
    assert pack_schedule(now=at(2026, 11, 30, 14, 0), tz=TOKYO).day == "tomorrow"


def test_a_pack_beat_missed_today_is_overdue():
    after = at(2026, 12, 1, 7, 0)
    missed = pack_schedule(now=after, made=set(), tz=UTC)
    assert missed.overdue == dt.date(2026, 11, 1)
    assert missed.due_at == at(2026, 12, 1, 6)
    assert pack_schedule(now=after, made={dt.date(2026, 11, 1)}, tz=UTC).overdue is None
    assert pack_schedule(now=at(2026, 12, 1, 5, 59), made=set(), tz=UTC).overdue is None
    assert pack_schedule(now=at(2026, 12, 2, 7, 0), made=set(), tz=UTC).overdue is None


def test_the_hour_is_beats():
    entry = app.conf.beat_schedule["dashboard-monthly-pack"]
    assert entry["schedule"] == crontab(minute=0, hour=PACK_HOUR_UTC, day_of_month=1)


class FixedClock:
    """The dashboard views' `timezone`, with `now` fixed."""

    def __init__(self, now: dt.datetime):
        self._now = now

    def now(self) -> dt.datetime:
        return self._now


@pytest.fixture
def storage(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def dashboard_text(client, monkeypatch, now: dt.datetime) -> str:
    monkeypatch.setattr(views, "timezone", FixedClock(now))
    response = client.get(reverse("dashboard"))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    ("now", "words"),
    [
        (
            at(2026, 12, 1, 3, 0),
            "the first, of November 2026, is made and emailed to leadership today",
        ),
        (at(2026, 11, 30, 12, 0), "of November 2026, is made and emailed to leadership tomorrow"),
        (at(2026, 12, 31, 12, 0), "of December 2026, is made and emailed to leadership tomorrow"),
        (at(2028, 2, 29, 12, 0), "of February 2028, is made and emailed to leadership tomorrow"),
        (
            at(2026, 12, 1, 7, 0),
            "of December 2026, is made and emailed to leadership on Friday 1 January 2027",
        ),
    ],
)
def test_the_dashboard_says_when_the_first_pack_is_made(
    client, monkeypatch, leadership, storage, now, words
):
    client.force_login(leadership)
    page = dashboard_text(client, monkeypatch, now)
    assert words in page
    assert "first day of next month" not in page


def test_the_dashboard_says_a_missed_pack_is_late(client, monkeypatch, leadership, storage):
    client.force_login(leadership)
    page = dashboard_text(client, monkeypatch, at(2026, 12, 1, 9, 0))
    assert "The pack of November 2026 is late." in page
    assert 'datetime="2026-12-01T06:00:00Z"' in page
    assert "is late." not in dashboard_text(client, monkeypatch, at(2026, 12, 1, 5, 0))
    assert "is late." not in dashboard_text(client, monkeypatch, at(2026, 12, 2, 9, 0))


@pytest.mark.parametrize(("role", "button"), [("admin", True), ("leadership", False)])
def test_no_figures_names_recompute_only_to_who_has_it(client, request, role, button):
    client.force_login(request.getfixturevalue(role))
    page = client.get(reverse("dashboard"), {"month": "2020-01"}).content.decode()
    assert "No figures for this month" in page
    assert ("Recompute January 2020 now" in page) is button
    assert ("“Recompute”" in page) is button


def test_the_real_clock_is_the_default(client, leadership, storage):
    client.force_login(leadership)
    page = client.get(reverse("dashboard")).content.decode()
    expected = pack_schedule(now=timezone.now())
    assert f"of {expected.month:%B %Y}, is made" in page
