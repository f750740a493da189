"""The policy journey in real Chromium: an admin lowers a limit, reads the impact
preview, saves with a reason and finds the change in the history."""

import datetime as dt
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from fleet.models import QuotaShare
from tests.factories import JobFactory, UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
SCREENSHOTS = "/tmp"


@pytest.fixture
def fleet():
    """The AWS sample queue with room to lower qs2: capacity 4, qs2's limit 2.
    qs1 runs three jobs, two of them on capacity borrowed from qs2; qs2 runs one."""
    queue = aws_sample_queue(capacity=4)
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    qs2 = QuotaShare.objects.get(queue=queue, name="qs2")
    qs2.limits.update(max_instances=2)
    started = timezone.now() - dt.timedelta(minutes=40)
    for index in range(3):
        JobFactory(
            share=qs1,
            name=f"llm-pretrain-{index}",
            state="RUNNING",
            started_at=started,
            start_seq=index,
            borrowed=index > 0,
            ran_borrowed=index > 0,
        )
    JobFactory(
        share=qs2,
        name="vision-finetune",
        state="RUNNING",
        started_at=started + dt.timedelta(minutes=5),
        start_seq=3,
    )
    return queue


def change_number(page, label: str, value: str) -> None:
    """Type a number and leave the field, as a person would: the field's one `change`
    event asks for a preview; wait for it, so no preview is still loading when the test
    goes on (a save would cut it off, and htmx reports that in the console)."""
    preview = page.locator("#impact-body")
    before = preview.inner_text()
    field = page.get_by_label(label)
    field.fill(value)
    field.press("Tab")
    expect(preview).not_to_have_text(before)
    expect(page.locator(".htmx-request")).to_have_count(0)


@pytest.mark.slow
def test_admin_lowers_a_limit_previews_saves_and_finds_it_in_history(
    page, live_server, fleet, login, assert_accessible
):
    UserFactory(username="ada", roles=["admins"])
    qs2 = QuotaShare.objects.get(queue=fleet, name="qs2")

    login(page, live_server, "ada", PASSWORD, next="/")
    expect(page).to_have_title("Queues · Quota governance")
    expect(page.locator(".queue__summary")).to_contain_text("borrow")
    assert_accessible(page)
    page.screenshot(path=f"{SCREENSHOTS}/policy-overview.png", full_page=True)

    page.get_by_role("link", name="Policies").click()
    expect(page).to_have_title("Policies · Quota governance")
    assert_accessible(page)
    page.get_by_role("link", name="Edit qs2").click()
    expect(page).to_have_title("Edit share qs2 · Quota governance")
    assert_accessible(page)

    preview = page.locator("#impact-body")
    change_number(page, "Instances, row 1", "1")
    expect(preview.locator(".impact__line").first).to_be_visible()
    assert_accessible(page)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=f"{SCREENSHOTS}/policy-editor-preview.png", full_page=True)

    page.get_by_label("Reason for this change").fill("qs2 hands one instance back to the pool")
    page.get_by_role("button", name="Save changes").click()

    expect(page).to_have_url(re.compile(rf"/queues/{fleet.pk}/#share-{qs2.pk}$"))
    expect(page.locator("#messages")).to_contain_text("now version 2")
    assert_accessible(page)

    page.get_by_role("link", name="See this change in the history").click()
    expect(page).to_have_title("Policy history · Quota governance")
    entry = page.locator(".change").first
    expect(entry).to_contain_text("qs2 hands one instance back to the pool")
    expect(entry).to_contain_text("ml.g5.xlarge × 2")
    expect(entry).to_contain_text("ml.g5.xlarge × 1")
    assert_accessible(page)

    page.get_by_role("link", name="History").click()
    page.get_by_label("Cause").select_option("edit")
    expect(page).to_have_url(re.compile(r"cause=edit"))
    expect(page.locator("#history-list")).to_contain_text("qs2 hands one instance back")
    assert_accessible(page)
    page.screenshot(path=f"{SCREENSHOTS}/policy-history.png", full_page=True)


def test_the_other_policy_pages_pass_axe_with_their_errors_shown(
    page, live_server, fleet, login, assert_accessible
):
    UserFactory(username="ada", roles=["admins"])
    qs2 = QuotaShare.objects.get(queue=fleet, name="qs2")
    login(page, live_server, "ada", PASSWORD, next=f"/shares/{qs2.pk}/edit/")

    # Errors next to their fields, on the share editor...
    change_number(page, "Instances, row 1", "0")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#id_reason_error")).to_contain_text("say why")
    expect(page.locator("#id_limit-0-max_instances_error")).to_be_visible()
    assert_accessible(page)

    # ... the capacity editor with its preview ...
    page.goto(f"/queues/{fleet.pk}/capacity/")
    expect(page).to_have_title(re.compile(r"^Capacity of aws-sample"))
    change_number(page, "Instances, row 1", "2")
    assert_accessible(page)

    # ... and the urgency definitions.
    page.goto("/urgency/new/")
    page.get_by_role("button", name="Create urgency definition").click()
    expect(page.locator("#id_name_error")).to_be_visible()
    assert_accessible(page)
    page.get_by_label("Name").fill("Launch deadline")
    page.get_by_label("Meaning").fill("A public launch date that cannot move.")
    page.get_by_label("Priority it grants").fill("800")
    page.get_by_label("Longest window (hours)").fill("72")
    page.get_by_label("Priority raise").check()
    page.get_by_label("Reason for this change").fill("Agreed with the teams")
    page.get_by_role("button", name="Create urgency definition").click()
    expect(page).to_have_title(re.compile(r"^Urgency definitions"))
    expect(page.locator("main")).to_contain_text("Launch deadline")
    assert_accessible(page)
