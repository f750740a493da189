"""The jobs journeys in real Chromium.

An admin registers a job definition on its pages, revises and retires another; a team
lead picks a definition, fills in its parameters (a wrong value is named next to its
field), submits two jobs, watches the first start on borrowed capacity and get
reclaimed in the live queue view (htmx polling), then opens its timeline. Passes run
inline (Celery eager) after each submission commits, as a worker would run them."""

import pytest
from playwright.sync_api import expect

from core.celery import app
from fleet.models import QuotaShare
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from tests.factories import UserFactory, aws_sample_queue, job_definition

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
    """The AWS sample queue with two definitions; qs1 already runs one job within its
    limit."""
    queue = aws_sample_queue()
    finetune = job_definition(
        queue,
        name="finetune",
        command=["python", "finetune.py", "--steps", "{steps}", "--base", "{base}"],
        parameters=[
            {"name": "steps", "type": "integer", "min": 1, "max": 1_000_000},
            {"name": "base", "type": "choice", "choices": ["bert-base", "t5-small"]},
        ],
        instance_type=queue.capacities.get().instance_type,
        expected_duration=LONG,
    )
    job_definition(
        queue,
        name="evaluate",
        command=["python", "eval.py", "--suite", "{suite}"],
        parameters=[{"name": "suite", "type": "pattern", "pattern": "[a-z]+", "default": "glue"}],
        instance_type=queue.capacities.get().instance_type,
        expected_duration=LONG,
    )
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    job_submit(
        data=JobData(
            share=qs1,
            name="pretrain-baseline",
            revision=finetune,
            parameters={"steps": 1000, "base": "bert-base"},
            priority=5,
        )
    )
    scheduling_pass(queue_id=queue.pk)
    lead = UserFactory(username="lin", roles=["team_leads"])
    UserFactory(username="ada", roles=["admins"])
    for name in ("qs1", "qs2"):
        QuotaShare.objects.get(queue=queue, name=name).team.leads.add(lead)
    return queue


def submit_job(page, share_label: str, name: str, assert_accessible=None) -> None:
    page.goto("/jobs/new/")
    expect(page).to_have_title("Submit a job · Quota governance")
    page.get_by_label("Job definition").select_option(label="finetune (revision 1)")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_label("steps")).to_be_visible()
    if assert_accessible:
        assert_accessible(page)
    page.get_by_label("Share").select_option(label=share_label)
    page.get_by_label("Name").fill(name)
    page.get_by_label("steps").fill("12; rm -rf /")
    page.get_by_label("base").select_option("t5-small")
    page.get_by_role("button", name="Submit job").click()
    # The value is refused next to its own field; nothing was submitted.
    expect(page.locator(".field--invalid")).to_contain_text(
        "must be an integer between 1 and 1000000"
    )
    if assert_accessible:
        assert_accessible(page)
        page.screenshot(path=f"{SCREENSHOTS}/job-submit.png", full_page=True)
    page.get_by_label("steps").fill("500")
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_title(f"{name} · Jobs · Quota governance")


@pytest.mark.slow
def test_lead_watches_a_borrowed_job_get_reclaimed(
    page, live_server, fleet, login, assert_accessible
):
    login(page, live_server, "lin", PASSWORD, next="/jobs/")
    expect(page).to_have_title("Jobs · Quota governance")
    assert_accessible(page)

    submit_job(page, "aws-sample / qs1 (team-qs1)", "finetune-borrower", assert_accessible)
    expect(page.locator("#job-reason")).to_contain_text("Running on borrowed capacity")
    expect(page.locator(".jobs-dl").first).to_contain_text("finetune:1")
    expect(page.locator(".jobs-parameter-values")).to_contain_text("steps = 500")
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


def test_choosing_another_definition_swaps_its_parameters(page, live_server, fleet, login):
    login(page, live_server, "lin", PASSWORD, next="/jobs/")
    page.goto("/jobs/new/")
    page.get_by_label("Job definition").select_option(label="finetune (revision 1)")
    page.get_by_role("button", name="Continue").click()
    page.get_by_label("Name").fill("kept")

    # htmx swaps the parameter fields in place: what was typed elsewhere stays.
    page.get_by_label("Job definition").select_option(label="evaluate (revision 1)")
    expect(page.get_by_label("suite")).to_be_visible()
    expect(page.get_by_label("steps")).to_have_count(0)
    expect(page.get_by_label("Name")).to_have_value("kept")


@pytest.mark.slow
def test_admin_registers_revises_and_retires_a_definition(
    page, live_server, fleet, login, assert_accessible
):
    login(page, live_server, "ada", PASSWORD, next="/jobs/definitions/")
    expect(page).to_have_title("Job definitions · Quota governance")
    assert_accessible(page)

    page.get_by_role("link", name="Register a definition").click()
    expect(page).to_have_title("Register a job definition · Job definitions · Quota governance")
    assert_accessible(page)
    page.get_by_label("Name (required)").fill("sweep")
    page.get_by_label("aws-sample").check()
    page.get_by_label("Command (one argument per line)").fill(
        "python\nsweep.py\n--lr={lr}\n--seed\n{seed}"
    )
    first = page.get_by_role("group", name="Parameter 1")
    first.get_by_label("Name").fill("lr")
    first.get_by_label("Type").select_option("pattern")
    first.get_by_label("Pattern").fill("0\\.[0-9]{1,4}")
    page.get_by_label("Reason for this change").fill("learning-rate sweeps for vision")
    page.get_by_role("button", name="Register").click()
    # {seed} is not declared: the message sits on the command, naming the line.
    expect(page.locator(".field--invalid")).to_contain_text(
        "line 5: {seed} is not a declared parameter"
    )
    assert_accessible(page)

    second = page.get_by_role("group", name="Parameter 2")
    second.get_by_label("Name").fill("seed")
    second.get_by_label("Type").select_option("integer")
    second.get_by_label("Minimum").fill("0")
    second.get_by_label("Maximum").fill("99")
    page.get_by_role("button", name="Register").click()
    expect(page).to_have_title("sweep · Job definitions · Quota governance")
    expect(page.locator("#latest-title")).to_have_text("Revision 1")
    assert_accessible(page)

    page.get_by_role("link", name="Revise").click()
    page.get_by_label("Wall-clock limit (seconds)").fill("3600")
    page.get_by_label("Reason for this change").fill("stop runaway sweeps")
    page.get_by_role("button", name="Save revision").click()
    expect(page.locator("#latest-title")).to_have_text("Revision 2")
    history = page.locator("#revision-2")
    expect(history).to_contain_text("stop runaway sweeps")
    expect(history.locator(".diff")).to_contain_text("Wall-clock limit")
    page.screenshot(path=f"{SCREENSHOTS}/job-definition.png", full_page=True)

    page.get_by_role("link", name="Retire").click()
    page.get_by_label("Why retire it").fill("replaced by sweep-v2")
    page.get_by_role("button", name="Retire sweep").click()
    expect(page.locator(".lead")).to_contain_text("It refuses new jobs")
    assert_accessible(page)
