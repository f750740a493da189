"""On a phone (390 px) the main tables are cards, in real Chromium (issue 28, point 10).

The queues' usage (overview and a queue's page), the jobs list and the dashboard's team
table stack each row into a card whose cells are led by their column's name, instead of
a table that scrolls sideways: neither the page nor the table's region scrolls. At
1440 px the same markup is a table. A job's "What holds it" takes the card's width on a
phone, and an exception owner meets the impact preview before Approve and Deny (on the
screen and in the document's order). axe runs at both widths on every page visited.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from core.celery import app
from demo.organisation import seed_demo
from fleet.models import Job, JobQueue, QuotaShare
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month
from governance.models import ExceptionRequest
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from tests.factories import UserFactory, aws_sample_queue, job_definition
from tests.governance.dashboards.conftest import load_into_db, scenario_document

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "phone-cards-pw-1"
SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}

# Each region that holds a stacked table: does it scroll sideways, and how are its rows
# laid out? (display of the body rows, the labels its cells show before their values).
REGIONS = """(selector) => [...document.querySelectorAll(selector)].map((table) => {
  const region = table.closest(".table-wrap");
  const rows = [...table.tBodies[0].rows];
  const labelled = [...table.querySelectorAll("tbody [data-label]")];
  return {
    scrollWidth: region.scrollWidth,
    clientWidth: region.clientWidth,
    rowDisplay: [...new Set(rows.map((row) => getComputedStyle(row).display))],
    headVisible: table.tHead.getBoundingClientRect().height > 1,
    labels: [...new Set(labelled.map((cell) =>
      getComputedStyle(cell, "::before").content.replace(/^"|"$/g, "")))],
    rows: rows.length,
    // The room each cell keeps for its label on the left (a label pushed out of the
    // card by a later padding rule would leave the values unnamed).
    labelRoom: Math.min(...labelled.filter((cell) => !cell.classList.contains("stack-wide"))
      .map((cell) => parseFloat(getComputedStyle(cell).paddingLeft))),
  };
})"""


@pytest.fixture(params=sorted(SIZES))
def size(request):
    return request.param


@pytest.fixture
def browser_context_args(size):
    return {"viewport": SIZES[size]}


@pytest.fixture
def demo():
    """The demo organisation, and last month's figures of a replayed scenario, so the
    dashboard has a team table."""
    users = seed_demo(password=PASSWORD)
    month = last_full_month(timezone.now())
    origin = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
    load_into_db(
        scenario_document("01-walkthrough-borrow-reclaim-priority.json"),
        origin=origin,
        queue_name="replayed",
    )
    rollups_refresh(month=month)
    return users


def stacked(page, selector: str) -> list[dict]:
    regions = page.evaluate(REGIONS, selector)
    assert regions, f"no {selector} on {page.url}"
    return regions


def assert_cards(page, selector: str, size: str, labels: set[str]) -> None:
    assert page.evaluate("document.scrollingElement.scrollWidth") <= SIZES[size]["width"]
    for region in stacked(page, selector):
        assert region["rows"] > 0
        if size == "phone":
            assert region["scrollWidth"] <= region["clientWidth"], (page.url, region)
            assert region["rowDisplay"] == ["block"], region  # each row a card
            assert not region["headVisible"], region
            assert labels <= set(region["labels"]), region["labels"]
            assert region["labelRoom"] >= 100, region  # the labels show beside the values
        else:
            assert region["rowDisplay"] == ["table-row"], region
            assert region["headVisible"], region
            assert region["labels"] == ["none"], region  # no label before a table's cell


@pytest.mark.slow
def test_usage_jobs_and_teams_are_cards_on_a_phone(
    page, live_server, login, assert_accessible, demo, size
):
    login(page, live_server, "admin", PASSWORD)
    aws = JobQueue.objects.get(name__icontains="aws")
    usage = {"Strategy", "Borrow limit", "In-share preemption", "State", "Use of its limits"}
    for path in ("/queues/", f"/queues/{aws.pk}/"):
        page.goto(path)
        expect(page.locator(".shares-table").first).to_be_visible()
        assert_cards(page, ".shares-table", size, usage)
        assert_accessible(page)

    page.goto("/jobs/")
    expect(page.locator(".jobs-table")).to_be_visible()
    assert_cards(
        page,
        ".jobs-table",
        size,
        {"Runs", "Queue / share", "Team", "State", "Place in its share's queue", "Submitted"},
    )
    assert_accessible(page)
    # The filters swap the list in with htmx: the fragment is cards too.
    page.get_by_label("State").select_option(label="Running")
    page.wait_for_url(lambda url: "state=" in url)
    expect(page.locator(".jobs-table tbody tr").first).to_be_visible()
    assert_cards(page, ".jobs-table", size, {"State", "Team"})

    page.goto("/dashboard/")
    expect(page.locator(".dashboard__teams")).to_be_visible()
    assert_cards(
        page,
        ".dashboard__teams",
        size,
        {"GPU-hours delivered", "Fairness", "Entitlement honoured", "p90 wait", "Still waiting"},
    )
    assert_accessible(page)


@pytest.fixture
def waiting_job(settings):
    """On the AWS sample queue, qs1 runs two jobs (one borrowed) and a third waits."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert app.conf.task_always_eager
    queue = aws_sample_queue()
    train = job_definition(
        queue,
        name="train",
        command=["python", "train.py"],
        instance_type=queue.capacities.get().instance_type,
        expected_duration=360_000,
    )
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    with transaction.atomic():
        for name in ("within", "borrower"):
            job_submit(data=JobData(share=qs1, name=name, revision=train))
    scheduling_pass(queue_id=queue.pk)
    job_submit(data=JobData(share=qs1, name="finetune", revision=train))
    scheduling_pass(queue_id=queue.pk)
    lead = UserFactory(username="lin", password=PASSWORD, roles=["team_leads"])
    qs1.team.leads.add(lead)
    job = Job.objects.get(name="finetune")
    assert job.state == Job.State.RUNNABLE
    return job


def test_what_holds_a_job_reads_across_the_card(
    page, live_server, login, assert_accessible, waiting_job, size
):
    login(page, live_server, "lin", PASSWORD, next=f"/jobs/{waiting_job.pk}/")
    blocker = page.locator("[data-blocker]")
    expect(blocker).to_contain_text("holds")
    box = blocker.bounding_box()
    card = page.locator("[data-wait]").bounding_box()
    # The value takes the card's width (less its padding), not the column left beside a
    # long fact name: about 40 characters a line on a phone, not one to three words.
    assert box["width"] >= 0.8 * card["width"] if size == "phone" else box["width"] > 500
    line = float(blocker.evaluate("(el) => parseFloat(getComputedStyle(el).lineHeight)"))
    words = len(blocker.inner_text().split())
    assert box["height"] / line <= max(2, words / 4), (box, line, words)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= SIZES[size]["width"]
    assert_accessible(page)


def test_an_owner_reads_the_impact_before_deciding(
    page, live_server, login, assert_accessible, demo, size
):
    pending = ExceptionRequest.objects.get(state=ExceptionRequest.State.SUBMITTED)
    login(page, live_server, "owner", PASSWORD, next=f"/exceptions/{pending.pk}/")
    impact = page.get_by_role("complementary", name="Impact preview")
    approve = page.get_by_role("button", name="Approve")
    deny = page.get_by_role("button", name="Deny")
    expect(impact).to_be_visible()
    expect(impact.locator(".impact__line").first).to_be_visible()
    for button in (approve, deny):
        # Above the buttons on the screen, and before them in the document (the order
        # a keyboard and a screen reader follow).
        assert (
            impact.bounding_box()["y"] + impact.bounding_box()["height"]
            <= (button.bounding_box()["y"])
        )
        assert impact.evaluate(
            "(el, button) => Boolean(el.compareDocumentPosition(button)"
            " & Node.DOCUMENT_POSITION_FOLLOWING)",
            button.element_handle(),
        )
    assert page.evaluate("document.scrollingElement.scrollWidth") <= SIZES[size]["width"]
    assert_accessible(page)
    # Tabbing from the decision note reaches Approve: nothing of the preview lies after it.
    page.get_by_label("Note").focus()
    page.keyboard.press("Tab")
    expect(approve).to_be_focused()
