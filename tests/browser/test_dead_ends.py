"""Dead ends, in real Chromium at desktop and phone size:

- a team lead files a request with a window years ahead: refused, the start field named;
  then submits a proper one and withdraws it before it is decided: a draft again, to edit;
- an admin switches a what-if workload to the Philly trace without touching the start
  shown for the recorded period: the Philly window starts on 2017-10-01, no "upload the
  file again"; a run of it then completes and shows results with unclipped values.
axe finds no serious or critical problem on the pages visited.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from fleet.models import InstanceType
from governance.models import ExceptionRequest, WhatIfComparison
from governance.whatif import tasks
from tests.factories import UrgencyDefinitionFactory, UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"


@pytest.fixture(params=[{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                ids=["desktop", "phone"])  # fmt: skip
def browser_context_args(request):
    return {"viewport": request.param}


CLIPPED = """() => [...document.querySelectorAll(
    '.whatif__shares .table-wrap, .whatif__results .table-wrap')]
  .filter(wrap => wrap.scrollWidth > wrap.clientWidth + 1)
  .map(wrap => wrap.querySelector('caption').textContent.trim())"""


def fits(page):
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"{page.url} is {width} px wide"


@pytest.mark.slow
def test_a_far_window_is_refused_and_a_submitted_request_is_withdrawn(
    page, live_server, login, assert_accessible
):
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    lead = User.objects.create_user("lee", password=PASSWORD)
    lead.groups.add(Group.objects.get_or_create(name="team_leads")[0])
    qs1.team.leads.add(lead)
    UrgencyDefinitionFactory(
        name="Customer escalation", priority=700, max_window_hours=48,
        allowed_kinds=["TEMPORARY_CAPACITY"],
    )  # fmt: skip
    login(page, live_server, "lee", PASSWORD, next="/exceptions/new/")
    page.get_by_role("radio", name="Temporary capacity").check()
    page.locator("#id_urgency").select_option(label="Customer escalation (up to 48 h)")
    page.locator("#id_justification").fill("Launch week.")
    page.locator("#id_window_start").fill("2031-03-01T09:00")
    page.locator("#id_window_end").fill("2031-03-01T17:00")
    page.locator("#id_share").select_option(str(qs1.pk))
    page.locator("#id_instance_type").select_option(
        str(InstanceType.objects.get(name="ml.g5.xlarge").pk)
    )
    page.locator("#id_extra_instances").fill("1")
    page.get_by_role("button", name="Submit for decision").click()
    expect(page.locator("#id_window_start_error")).to_contain_text(
        "allows a window to start at most 48 h ahead"
    )
    assert not ExceptionRequest.objects.exists()
    assert_accessible(page)
    fits(page)

    start = timezone.localtime() + dt.timedelta(hours=2)
    page.locator("#id_window_start").fill(start.strftime("%Y-%m-%dT%H:%M"))
    page.locator("#id_window_end").fill((start + dt.timedelta(hours=8)).strftime("%Y-%m-%dT%H:%M"))
    page.get_by_role("button", name="Submit for decision").click()
    expect(page.locator(".exc-title .chip")).to_have_text("Submitted")
    assert_accessible(page)
    fits(page)

    page.get_by_role("button", name="Withdraw request").click()
    expect(page.get_by_role("status")).to_contain_text("withdrawn: it is a draft again")
    expect(page.locator(".exc-title .chip")).to_have_text("Draft")
    expect(page.locator(".exc-timeline")).to_contain_text("Withdrawn to a draft by the requester")
    expect(page.get_by_role("link", name="Edit draft")).to_be_visible()
    assert ExceptionRequest.objects.get().state == ExceptionRequest.State.DRAFT
    assert_accessible(page)


@pytest.mark.slow
def test_switching_a_whatif_workload_to_philly_keeps_the_philly_start(
    page, live_server, login, assert_accessible, monkeypatch
):
    queued = []
    monkeypatch.setattr(tasks.run_comparison, "delay", lambda pk: queued.append(pk))
    aws_sample_queue()
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    login(page, live_server, "platform", PASSWORD, next=reverse("whatif-list"))
    page.get_by_label("Queue").select_option(label="aws-sample")
    page.get_by_label("Title").fill("Philly week")
    page.get_by_role("button", name="Clone the current policy").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Philly week")

    page.get_by_role("radio", name="A window of the Philly trace").check()
    page.get_by_label("Days").fill("1")
    page.get_by_label("GPU demand scale (traces)").fill("0.1")
    page.get_by_role("button", name="Use this workload").click()
    expect(page.get_by_role("status")).to_contain_text("of the Philly trace from 2017-10-01")
    expect(page.locator("#workload-problems")).to_have_count(0)
    expect(page.locator("#id_start")).to_have_value("2017-10-01")
    # No Philly team is named like an AWS share: they are listed, left out, until mapped.
    expect(page.locator("#mapping-left-out")).to_contain_text("mapped to no share")
    assert_accessible(page)
    page.get_by_label("Share for 11cb48").select_option("qs1")
    page.get_by_label("Share for 6214e9").select_option("qs2")
    page.get_by_role("button", name="Use this mapping").click()
    expect(page.get_by_role("status")).to_contain_text("Mapping saved")
    expect(page.locator("#id_start")).to_have_value("2017-10-01")

    page.get_by_role("button", name="Run the comparison").click()
    comparison = WhatIfComparison.objects.get(title="Philly week")
    expect(page.locator("progress")).to_be_visible()
    assert queued == [comparison.pk]
    assert tasks.run_comparison(comparison.pk) == WhatIfComparison.Status.DONE
    expect(page.get_by_role("heading", name="What changes with the draft")).to_be_visible(
        timeout=15_000
    )
    # No value is cut off: at desktop size no what-if table needs scrolling in its card.
    if page.viewport_size["width"] > 390:
        clipped = page.evaluate(CLIPPED)
        assert clipped == [], clipped
    assert re.search(r"jobs replayed", page.locator("main").inner_text())
    assert_accessible(page)
    fits(page)
