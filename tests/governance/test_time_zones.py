"""Each user's time zone: stored on the first visit, chosen on the profile page, used to
read date-time inputs and to show times."""

import datetime as dt
import zoneinfo

import pytest
from django.contrib.auth.models import User

from accounts.models import Profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of(client):
    user = User.objects.create_user("tz-user", password="x")
    client.force_login(user)
    client.user = user
    return client


def test_the_browser_zone_is_stored_once_and_does_not_override_a_choice(client_of):
    answer = client_of.post("/accounts/profile/time-zone/", {"time_zone": "Asia/Tokyo"})
    assert answer.status_code == 200 and answer.json()["stored"] is True
    assert Profile.objects.get(user=client_of.user).time_zone == "Asia/Tokyo"
    answer = client_of.post("/accounts/profile/time-zone/", {"time_zone": "Europe/Paris"})
    assert answer.json() == {"time_zone": "Asia/Tokyo", "stored": False}
    assert Profile.objects.get(user=client_of.user).time_zone == "Asia/Tokyo"


def test_a_name_that_is_not_a_zone_is_refused_naming_the_field(client_of):
    answer = client_of.post("/accounts/profile/time-zone/", {"time_zone": "Mars/Olympus"})
    assert answer.status_code == 400
    assert "time_zone" in answer.json()["errors"]
    page = client_of.post("/accounts/profile/", {"time_zone": "Mars/Olympus"})
    assert page.status_code == 200
    assert page.context["form"].errors["time_zone"]
    assert not Profile.objects.filter(user=client_of.user).exists()


def test_pages_use_the_stored_zone_then_the_browser_cookie_then_utc(client_of):
    assert "Times are shown in UTC" in client_of.get("/accounts/profile/").text
    client_of.cookies["browser_tz"] = "America/New_York"
    assert "Times are shown in America/New_York" in client_of.get("/accounts/profile/").text
    client_of.post("/accounts/profile/", {"time_zone": "Asia/Tokyo"})
    page = client_of.get("/accounts/profile/")
    assert "Times are shown in Asia/Tokyo" in page.text
    assert "data-time-zone-store" not in page.text


def test_the_profile_page_is_for_signed_in_users(client):
    assert client.get("/accounts/profile/").status_code == 302


def test_a_typed_window_is_read_in_the_users_zone(client_of):
    """The form parses in the active zone: 09:00 typed in Tokyo is 00:00 UTC."""
    from django.utils import timezone

    from governance.exceptions.forms import StorableDateTimeField

    with timezone.override(zoneinfo.ZoneInfo("Asia/Tokyo")):
        moment = StorableDateTimeField().clean("2030-01-02T09:00")
    assert moment == dt.datetime(2030, 1, 2, 0, 0, tzinfo=dt.UTC)
