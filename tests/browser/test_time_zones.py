"""In real Chromium: each user reads and writes times in their own time zone.

A team lead whose browser is in Asia/Tokyo logs in: the browser's zone is stored in
their profile on the first visit, every date-time input names the zone it is read in,
and the exception window they type (09:00–17:00) comes back as 09:00–17:00 JST. They
change their zone on the profile page, and the same window is shown in the new zone.
axe finds no serious or critical problem on the pages visited, at desktop and phone size.
"""

import datetime as dt
import re
import zoneinfo

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import Profile
from fleet.models import InstanceType
from governance.models import ExceptionRequest
from tests.factories import UrgencyDefinitionFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")


@pytest.fixture(params=[{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                ids=["desktop", "phone"])  # fmt: skip
def browser_context_args(request):
    return {"timezone_id": "Asia/Tokyo", "viewport": request.param}


@pytest.fixture
def lead():
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    person = User.objects.create_user(
        "kenji", password=PASSWORD, first_name="Kenji", last_name="Lead"
    )
    person.groups.add(Group.objects.get_or_create(name="team_leads")[0])
    qs1.team.leads.add(person)
    UrgencyDefinitionFactory(
        name="Customer escalation",
        priority=700,
        max_window_hours=72,
        allowed_kinds=["TEMPORARY_CAPACITY"],
    )
    return {"user": person, "qs1": qs1}


@pytest.mark.slow
def test_a_user_in_tokyo_enters_and_reads_times_in_tokyo(
    page, live_server, login, assert_accessible, lead
):
    login(page, live_server, "kenji", PASSWORD, next="/exceptions/new/")
    expect(page.get_by_role("heading", level=1)).to_have_text("File an exception request")
    # The first visit stored the browser's zone in the profile.
    expect(page.locator("footer")).to_contain_text("Asia/Tokyo")
    page.wait_for_function("() => !document.body.dataset.timeZoneStore")
    assert Profile.objects.get(user=lead["user"]).time_zone == "Asia/Tokyo"

    # Every date-time input names the zone it is read in.
    for field in ("#id_window_start", "#id_window_end"):
        zone = page.locator(field).locator("xpath=..").locator(".field__zone")
        expect(zone).to_have_text("Asia/Tokyo")
    assert_accessible(page)

    tomorrow = (timezone.now().astimezone(TOKYO) + dt.timedelta(days=1)).date()
    page.get_by_role("radio", name="Temporary capacity").check()
    page.locator("#id_urgency").select_option(label="Customer escalation (up to 72 h)")
    page.locator("#id_justification").fill("The launch needs one more instance.")
    page.locator("#id_window_start").fill(f"{tomorrow}T09:00")
    page.locator("#id_window_end").fill(f"{tomorrow}T17:00")
    page.locator("#id_share").select_option(str(lead["qs1"].pk))
    page.locator("#id_instance_type").select_option(
        str(InstanceType.objects.get(name="ml.g5.xlarge").pk)
    )
    page.locator("#id_extra_instances").fill("1")
    page.get_by_role("button", name="Save as draft").click()
    expect(page).to_have_url(re.compile(r"/exceptions/\d+/$"))

    request = ExceptionRequest.objects.get()
    start = dt.datetime.combine(tomorrow, dt.time(9), tzinfo=TOKYO)
    assert request.window_start == start
    assert request.window_end == start + dt.timedelta(hours=8)

    window = page.locator("dt", has_text="Window").locator("xpath=following-sibling::dd[1]")
    expect(window.locator("time").first).to_contain_text("09:00")
    expect(window.locator("time").first).to_contain_text("GMT+9")
    expect(window.locator("time").nth(1)).to_contain_text("17:00")
    assert_accessible(page)

    # Editing the draft shows the window as typed, in the same zone.
    page.get_by_role("link", name="Edit draft").click()
    expect(page.locator("#id_window_start")).to_have_value(f"{tomorrow}T09:00")
    expect(page.locator("#id_window_end")).to_have_value(f"{tomorrow}T17:00")

    # The profile page changes the zone; the window then reads in Paris time.
    page.goto(f"{live_server.url}/accounts/profile/")
    expect(page.get_by_label("Time zone")).to_have_value("Asia/Tokyo")
    assert_accessible(page)
    page.get_by_label("Time zone").select_option("Europe/Paris")
    page.get_by_role("button", name="Save time zone").click()
    expect(page.get_by_role("status")).to_contain_text("Europe/Paris")
    assert Profile.objects.get(user=lead["user"]).time_zone == "Europe/Paris"
    page.goto(f"{live_server.url}/exceptions/{request.pk}/")
    paris = start.astimezone(zoneinfo.ZoneInfo("Europe/Paris"))
    expect(window.locator("time").first).to_contain_text(paris.strftime("%H:%M"))
    page.goto(f"{live_server.url}/exceptions/{request.pk}/edit/")
    expect(page.locator("#id_window_start")).to_have_value(paris.strftime("%Y-%m-%dT%H:%M"))
    expect(
        page.locator("#id_window_start").locator("xpath=..").locator(".field__zone")
    ).to_have_text("Europe/Paris")
    if page.viewport_size["width"] <= 390:
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= 390, f"the edit page is {width} px wide on a phone"
