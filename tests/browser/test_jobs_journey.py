"""The jobs journey in real Chromium: a team lead submits two jobs, watches the first
start on borrowed capacity and get reclaimed in the live queue view (htmx polling),
then opens its timeline. Passes run inline (Celery eager) after each submission
commits, as a worker would run them."""

import pytest
from playwright.sync_api import expect

from governance.celery import app
from governance.models import InstanceType, QuotaShare
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from tests.factories import UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
SCREENSHOTS = "/tmp"
LONG = 360_000  # compute seconds: never finishes during the test


@pytest.fixture
def eager_celery(settings):
    """Tasks run where they are sent. Celery reads the Django settings (namespace
    CELERY) live, so the settings fixture switches it and restores it."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert app.conf.task_always_eager


@pytest.fixture
def fleet(eager_celery):
    """The AWS sample queue; qs1 already runs one job within its limit."""
    queue = aws_sample_queue()
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    job_submit(
        data=JobData(
            share=qs1,
            name="pretrain-baseline",
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            expected_duration=LONG,
            priority=5,
        )
    )
    scheduling_pass(queue_id=queue.pk)
    lead = UserFactory(username="lin", roles=["team_leads"])
    for name in ("qs1", "qs2"):
        QuotaShare.objects.get(queue=queue, name=name).team.leads.add(lead)
    return queue


def submit_job(page, share_label: str, name: str, assert_accessible=None) -> None:
    page.goto("/jobs/new/")
    expect(page).to_have_title("Submit a job · Quota governance")
    if assert_accessible:
        assert_accessible(page)
    page.get_by_label("Share").select_option(label=share_label)
    page.get_by_label("Name").fill(name)
    page.get_by_label("Instance type").select_option("ml.g5.xlarge")
    page.get_by_label("Expected duration (seconds)").fill(str(LONG))
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_title(f"{name} · Jobs · Quota governance")


def test_lead_watches_a_borrowed_job_get_reclaimed(
    page, live_server, fleet, login, assert_accessible
):
    login(page, live_server, "lin", PASSWORD, next="/jobs/")
    expect(page).to_have_title("Jobs · Quota governance")
    assert_accessible(page)

    submit_job(page, "aws-sample / qs1 (team-qs1)", "finetune-borrower", assert_accessible)
    expect(page.locator("#job-reason")).to_contain_text("Running on borrowed capacity")
    assert_accessible(page)

    live = page.context.new_page()
    live.goto(f"/jobs/queues/{fleet.pk}/live/")
    expect(live).to_have_title("Live: aws-sample · Quota governance")
    running = live.locator(".jobs-running li", has_text="finetune-borrower")
    expect(running).to_contain_text("(borrowed)")
    assert_accessible(live)

    submit_job(page, "aws-sample / qs2 (team-qs2)", "owner-eval")
    expect(page.locator("#job-reason")).to_contain_text("Running within its share's limit")

    # The live view refreshes itself (htmx polling): no reload.
    expect(live.locator("#live-preempted-title + ol")).to_contain_text(
        "finetune-borrower preempted: team team-qs2 reclaimed its capacity for job owner-eval",
        timeout=15_000,
    )
    expect(live.locator(".jobs-running")).not_to_contain_text("finetune-borrower")
    assert_accessible(live)
    live.screenshot(path=f"{SCREENSHOTS}/jobs-live.png", full_page=True)

    live.get_by_role("link", name="finetune-borrower").first.click()
    expect(live).to_have_title("finetune-borrower · Jobs · Quota governance")
    timeline = live.locator(".jobs-timeline")
    expect(timeline).to_contain_text("Started on borrowed capacity")
    expect(timeline).to_contain_text("Preempted: team team-qs2 reclaimed its capacity")
    expect(live.locator("#job-reason")).to_contain_text(
        "Waiting: its share is at its limit and no lender has idle ml.g5.xlarge"
    )
    assert_accessible(live)
    live.screenshot(path=f"{SCREENSHOTS}/jobs-timeline.png", full_page=True)
    live.close()
