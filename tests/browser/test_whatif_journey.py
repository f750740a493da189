"""The what-if journey in real Chromium: an admin clones the AWS sample policy, switches
qs2 to LEND_AND_BORROW in the draft, runs the comparison (watching the progress bar),
reads the results and applies the draft. axe checks every page on the way."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from fleet.models import QuotaShare, WorkloadClass
from governance.models import PolicyChange, WhatIfComparison
from governance.whatif import services, tasks
from tests.factories import UserFactory, aws_sample_queue
from tests.governance.whatif.conftest import record_jobs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def no_worker(monkeypatch):
    """Runs stay queued until the test plays the worker (no broker message is sent)."""
    queued = []
    monkeypatch.setattr(tasks.run_comparison, "delay", lambda pk: queued.append(pk))
    return queued


@pytest.mark.slow
def test_admin_compares_and_applies_lend_and_borrow(
    page, live_server, login, assert_accessible, no_worker
):
    queue = aws_sample_queue()
    record_jobs(queue)
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    login(page, live_server, "platform", PASSWORD, next=reverse("whatif-list"))

    expect(page.get_by_role("heading", name="What-if comparisons", level=1)).to_be_visible()
    assert_accessible(page)
    page.get_by_label("Queue").select_option(label="aws-sample")
    page.get_by_label("Title").fill("qs2 lends and borrows")
    page.get_by_role("button", name="Clone the current policy").click()

    expect(page.get_by_role("heading", level=1)).to_contain_text("qs2 lends and borrows")
    expect(page.get_by_text("Cloned the current policy of aws-sample")).to_be_visible()
    assert_accessible(page)

    page.get_by_role("link", name="Edit qs2 in the draft").click()
    expect(page.get_by_role("heading", name="Draft: edit qs2")).to_be_visible()
    assert_accessible(page)
    page.get_by_role("radio", name="LEND_AND_BORROW").check()
    page.get_by_role("button", name="Save to the draft").click()

    expect(page.get_by_text("Draft updated: qs2")).to_be_visible()
    qs2 = page.get_by_role("table", name="qs2 (changed)")
    expect(qs2.get_by_role("row", name="Strategy")).to_contain_text("LEND_AND_BORROW")

    page.get_by_role("button", name="Run the comparison").click()
    progress = page.locator("progress")
    expect(progress).to_be_visible()
    expect(page.locator("#progress-label")).to_contain_text("Waiting for a worker")
    expect(page.get_by_role("button", name="Cancel the run")).to_be_visible()
    assert_accessible(page)

    comparison = WhatIfComparison.objects.get(title="qs2 lends and borrows")
    assert no_worker == [comparison.pk]
    assert tasks.run_comparison(comparison.pk) == WhatIfComparison.Status.DONE  # the worker

    # The page polls every second and reloads itself when the run is over.
    expect(page.get_by_role("heading", name="What changes with the draft")).to_be_visible(
        timeout=15_000
    )
    expect(page.locator("progress")).to_have_count(0)
    # The verdict and the two charts first; the tables wait behind one disclosure.
    sentences = page.locator(".whatif__sentences li")
    expect(sentences.first).to_be_visible()
    for figure in ("figure-turnaround", "figure-utilisation"):
        chart = page.locator(f'[data-figure-id="{figure}"]')
        chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
        expect(chart).to_have_attribute("data-plotted", "")
        expect(chart.locator(".main-svg").first).to_be_visible()
    whole_queue = page.get_by_role("table", name="Whole queue: current and draft")
    expect(whole_queue).to_be_hidden()
    page.get_by_text("All the figures:").click()
    expect(whole_queue).to_be_visible()
    assert_accessible(page)

    assert QuotaShare.objects.get(queue=queue, name="qs2").strategy == "LEND"
    page.get_by_label("Reason for this change").fill("qs2 bursts before the demo")
    page.get_by_role("button", name="Apply the draft").click()
    expect(page.get_by_text("Applied: 1 share changed")).to_be_visible()
    expect(page.get_by_role("link", name="history entry")).to_be_visible()
    assert_accessible(page)

    assert QuotaShare.objects.get(queue=queue, name="qs2").strategy == "LEND_AND_BORROW"
    change = PolicyChange.objects.get(share__name="qs2")
    assert f"what-if comparison #{comparison.pk}" in change.reason
    assert services.changed_shares(comparison) == [1]


@pytest.mark.slow
def test_admin_compares_grace_on_a_workload_class(
    page, live_server, login, assert_accessible, no_worker
):
    """Class batch: grace 0 in the current run, 120 s with a 60 s save in the draft; the
    results put lost GPU-hours beside lender wait and time to reclaim, by class too."""
    queue = aws_sample_queue()
    WorkloadClass.objects.create(name="batch")
    QuotaShare.objects.filter(queue=queue, name="qs2").update(
        strategy=QuotaShare.Strategy.LEND_AND_BORROW
    )
    for job in record_jobs(queue):
        if job.share.name == "qs2":
            job.workload_class = "batch"
            job.save(update_fields=["workload_class"])
    admin = UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    comparison = services.comparison_create(actor=admin, queue=queue, title="batch notice")
    login(page, live_server, "platform", PASSWORD, next=services.comparison_url(comparison))

    form = page.locator('[data-section="class-contract-form"]')
    expect(form.get_by_label("Workload class")).to_contain_text("batch (4 jobs in this workload)")
    for run, grace, save in (("Draft policy", "120", "60"), ("Current policy", "0", "")):
        form.locator("#id_class_run").select_option(label=run)
        form.get_by_label("Grace: notice (seconds)").fill(grace)
        form.get_by_label("Checkpoint on notice").fill(save)
        form.get_by_role("button", name="Set this class's contract").click()
        expect(page.get_by_text("Contracts updated")).to_be_visible()
    expect(page.get_by_text("Draft policy: class batch: grace 2 m 00 s")).to_be_visible()
    form.get_by_label("Grace: notice (seconds)").fill("-5")
    form.get_by_role("button", name="Set this class's contract").click()
    expect(form.locator("#id_class_grace_error")).to_contain_text("greater than or equal to 0")
    assert_accessible(page)

    page.get_by_role("button", name="Run the comparison").click()
    expect(page.locator("#progress-label")).to_contain_text("Waiting for a worker")
    assert tasks.run_comparison(comparison.pk) == WhatIfComparison.Status.DONE  # the worker
    page.get_by_text("All the figures:").click(timeout=15_000)
    table = page.get_by_role(
        "table", name="Interruption contracts: lost work against lender wait and time to reclaim"
    )
    expect(table).to_be_visible()
    expect(table.get_by_role("row", name="Time to reclaim")).to_contain_text("longest 1 m 00 s")
    expect(table.get_by_role("row", name="Lost GPU-hours: checkpointed on notice")).to_be_visible()
    by_class = page.get_by_role(
        "table", name="Lost work and preemptions by workload class of the replayed jobs"
    )
    expect(by_class.get_by_role("row", name="batch")).to_be_visible()
    assert_accessible(page)
