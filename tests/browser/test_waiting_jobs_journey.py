"""Why a job waits and when it starts, in real Chromium (issue 16; issue 13, points 4
and 5), at desktop and phone size.

A team lead on the AWS sample queue (simulated clock) asks the submit form "if you
submit this now" (htmx swaps the answer in, nothing is stored), submits the job and
finds where it stands on its page, in the jobs list and in the live view; tries a job
bigger than the whole queue, is warned first, submits it anyway and finds it among the
jobs that need a decision. Pages of the simulated-clock queue say so. axe runs on
every page visited."""

import pytest
from django.db import transaction
from playwright.sync_api import expect

from core.celery import app
from fleet.models import Job, QuotaShare
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from tests.factories import UserFactory, aws_sample_queue, job_definition

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
LONG = 360_000  # compute seconds: never finishes during the test
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=sorted(SIZES))
def browser_context_args(request):
    return {"viewport": SIZES[request.param]}


@pytest.fixture
def busy_queue(settings):
    """qs1 runs a job within its limit and borrows qs2's instance for another."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert app.conf.task_always_eager
    queue = aws_sample_queue()
    train = job_definition(
        queue,
        name="train",
        command=["python", "train.py"],
        instance_type=queue.capacities.get().instance_type,
        expected_duration=LONG,
    )
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    # One transaction, so one pass starts both at the same instant: they then end
    # together and a job submitted now starts within qs1's limit. Two passes would
    # start them a few milliseconds apart, which the 60x clock can turn into two
    # end instants, and between them the new job would start by borrowing.
    with transaction.atomic():
        for name in ("within", "borrower"):
            job_submit(data=JobData(share=qs1, name=name, revision=train))
    scheduling_pass(queue_id=queue.pk)
    starts = set(Job.objects.filter(queue=queue).values_list("started_at", flat=True))
    assert len(starts) == 1, starts
    lead = UserFactory(username="lin", roles=["team_leads"])
    for name in ("qs1", "qs2"):
        QuotaShare.objects.get(queue=queue, name=name).team.leads.add(lead)
    return queue


def fill_form(page, name: str, instances: str = "") -> None:
    page.goto("/jobs/new/")
    page.get_by_label("Job definition").select_option(label="train (revision 1)")
    page.get_by_role("button", name="Continue").click()
    page.get_by_label("Share").select_option(label="aws-sample / qs1 (team-qs1)")
    page.get_by_label("Name").fill(name)
    if instances:
        page.get_by_label("Instances").fill(instances)


@pytest.mark.slow
def test_a_lead_asks_before_submitting_then_follows_the_wait(
    page, live_server, busy_queue, login, assert_accessible
):
    login(page, live_server, "lin", PASSWORD, next="/jobs/")
    fill_form(page, "finetune")
    page.get_by_role("button", name="Estimate the start").click()
    answer = page.locator("#job-estimate")
    expect(answer).to_contain_text("If you submit this now")
    expect(answer).to_contain_text("within share qs1's limit: no other share can reclaim it")
    expect(answer).to_contain_text("Nothing was submitted or stored.")
    expect(page).to_have_title("Submit a job · Quota governance")  # no page change
    assert Job.objects.filter(name="finetune").count() == 0
    assert_accessible(page)

    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_title("finetune · Jobs · Quota governance")
    expect(page.locator("[data-clock=simulated]")).to_contain_text("Simulated clock.")
    expect(page.locator("[data-position]")).to_have_text("1 of 1")
    expect(page.locator("[data-blocker]")).to_contain_text("qs3 (RESERVE) holds 1 idle")
    expect(page.locator(".jobs-timeline")).to_contain_text("T+0 s")
    assert_accessible(page)

    page.goto("/jobs/")
    expect(page.locator("td[data-place]").first).to_have_text("1 of 1")
    assert_accessible(page)

    page.goto(f"/jobs/queues/{busy_queue.pk}/live/")
    waiting = page.locator("#live-waiting-title + .table-wrap")
    expect(waiting).to_contain_text("finetune")
    expect(page.locator("[data-clock=simulated]").first).to_be_visible()
    assert_accessible(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width


def test_a_job_bigger_than_its_queue_is_warned_about_and_needs_a_decision(
    page, live_server, busy_queue, login, assert_accessible
):
    login(page, live_server, "lin", PASSWORD, next="/jobs/")
    fill_form(page, "too-big", instances="4")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator(".form-errors")).to_contain_text("queue aws-sample has only 3")
    assert Job.objects.filter(name="too-big").count() == 0
    assert_accessible(page)

    page.get_by_label("Submit it anyway").check()
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_title("too-big · Jobs · Quota governance")
    expect(page.locator("#too-big-title")).to_have_text("This job needs a decision")
    assert_accessible(page)

    page.goto("/jobs/decisions/")
    expect(page.locator("table")).to_contain_text("too-big")
    expect(page.locator("table")).to_contain_text("more than the queue has")
    assert_accessible(page)
