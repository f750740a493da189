"""Exception windows are written for people (issue 28, point 7): a far start is
"in 808 d 22 h", a window's length "50 h 51 m", never "6.98906e+07 h" or "50.8437 h";
the request's page and the decision queue say how far away a window's start and end are.
"""

import datetime as dt
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from core.formatting import hours, relative
from governance.exceptions.services import exception_request_approve, request_validate

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (30.0167 * 3600, "30 h 01 m"),
        (50.8437 * 3600, "50 h 51 m"),
        (29 * 3600, "29 h"),
        (45 * 60, "45 m"),
        (6.98906e07 * 3600, "69,890,600 h"),
        (timedelta(hours=-2, minutes=-30), "-2 h 30 m"),
    ],
)
def test_hours_are_hours_and_minutes_never_a_float(seconds, text):
    assert hours(seconds) == text


@pytest.mark.parametrize(
    ("instant", "text"),
    [
        (NOW + timedelta(days=2, hours=3), "in 2 d 03 h"),
        (NOW - timedelta(minutes=5), "5 m 00 s ago"),
        (NOW, "now"),
        (dt.datetime(9999, 12, 31, 9, 0, tzinfo=dt.UTC), "in 2912108 d 00 h"),
        (None, "—"),
    ],
)
def test_an_instant_is_its_distance_from_now(instant, text):
    assert relative(instant, NOW) == text


def test_a_far_start_and_a_long_window_read_as_people_write(scene):
    # A start in the year 9999, as a date picker allows (what read "6.98906e+07 h").
    start_at = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
    data = scene.capacity(window_start=start_at, window_end=start_at + timedelta(hours=50.8437))
    errors = request_validate(actor=scene.lead, data=data, now=scene.now)
    (start,) = errors["window_start"]
    (end,) = errors["window_end"]
    assert re.match(r"starts in \d+ d \d\d h; urgency 'Launch' allows", start), start
    assert end.startswith("the window is 50 h 51 m long; urgency 'Launch' allows at most 24 h")
    for message in (start, end):
        assert "e+" not in message and "." not in message.split(";")[0]


def test_the_pages_say_how_far_a_window_is(client, scene, exception_owner):
    later = scene.file(
        scene.capacity(
            window_start=scene.now + timedelta(hours=2, minutes=30),
            window_end=scene.now + timedelta(hours=6),
        )
    )
    client.force_login(exception_owner)
    queue = client.get(reverse("decision-queue")).content.decode()
    assert "(in 2 h 29 m)" in queue or "(in 2 h 30 m)" in queue
    exception_request_approve(actor=exception_owner, request=later, now=scene.now)
    page = client.get(reverse("exception-detail", args=[later.pk])).content.decode()
    assert "takes effect at" in page and ("(in 2 h 29 m)" in page or "(in 2 h 30 m)" in page)
