"""Two admins edit one share's priority ceiling in real Chromium: the second sees the
conflict screen with the priority-ceiling row and who saved theirs, merges field by
field (their ceiling, her borrow limit) and finds the merged version saved. axe at
1440 and 390 px on the conflict screen and the preview after a failed save."""

import re

import pytest
from playwright.sync_api import expect

from fleet.models import QuotaShare
from governance.models import PolicyChange
from tests.browser.test_policy_journey import PASSWORD, change_number
from tests.factories import UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser_context_args():
    return {"viewport": {"width": 1440, "height": 900}}


def _no_sideways_scroll(page) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    viewport = page.evaluate("window.innerWidth")
    assert width <= viewport, f"the page is {width} px wide in {viewport} px"


@pytest.mark.slow
def test_two_admins_conflict_on_the_priority_ceiling_then_merge_field_by_field(
    page, browser, live_server, login, assert_accessible
):
    queue = aws_sample_queue()
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    UserFactory(username="ada", first_name="Ada", last_name="Lind", roles=["admins"])
    UserFactory(username="ben", roles=["admins"])
    url = f"/shares/{qs1.pk}/edit/"

    other = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    theirs = other.new_page()
    theirs.set_default_timeout(10_000)
    login(page, live_server, "ben", PASSWORD, next=url)
    login(theirs, live_server, "ada", PASSWORD, next=url)

    # Ada saves 150 first.
    change_number(theirs, "Priority ceiling", "150")
    theirs.get_by_label("Reason for this change").fill("Ceiling for the launch week")
    theirs.get_by_role("button", name="Save changes").click()
    expect(theirs).to_have_url(re.compile(rf"/queues/{queue.pk}/#share-{qs1.pk}$"))
    other.close()

    # Ben, on the version he loaded, saves 200 and a lower borrow limit.
    change_number(page, "Priority ceiling", "200")
    change_number(page, "Borrow limit (%)", "50")
    preview = page.locator("#impact-body")
    expect(preview.locator(".impact__change")).to_have_count(2)
    expect(preview).to_contain_text("Borrow limit: 200% → 50%")
    page.get_by_label("Reason for this change").fill("Tighter borrowing")
    page.get_by_role("button", name="Save changes").click()

    conflict = page.locator(".conflict")
    expect(conflict).to_contain_text("Someone else saved this while you were editing")
    expect(conflict).to_contain_text("Ada Lind")
    expect(conflict).to_contain_text("Ceiling for the launch week")
    ceiling = conflict.locator('tr[data-field="priority_ceiling"]')
    expect(ceiling).to_contain_text("Priority ceiling")
    expect(ceiling).to_contain_text("150")
    expect(ceiling).to_contain_text("200")
    expect(conflict.locator('tr[data-field="borrow_limit"]')).to_contain_text("200%")
    assert_accessible(page)
    page.screenshot(path="/tmp/conflict-1440.png", full_page=True)

    # "Take all theirs" only sets the choices; nothing is saved yet.
    page.get_by_role("button", name="Take all theirs").click()
    expect(page.get_by_label("Take theirs for Borrow limit (%)")).to_be_checked()
    assert QuotaShare.objects.get(pk=qs1.pk).version == 2

    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator(".conflict")).to_be_visible()
    assert_accessible(page)
    _no_sideways_scroll(page)
    page.screenshot(path="/tmp/conflict-390.png", full_page=True)

    # Field by field: their ceiling, his borrow limit.
    page.get_by_label("Take theirs for Priority ceiling").check()
    page.get_by_label("Keep mine for Borrow limit (%)").check()
    page.get_by_label("Reason for the merged version").fill("Merged: Ada's ceiling, my limit")
    page.get_by_role("button", name="Save the merged version").click()

    expect(page).to_have_url(re.compile(rf"/queues/{queue.pk}/#share-{qs1.pk}$"))
    expect(page.locator("#messages")).to_contain_text("now version 3")
    assert_accessible(page)
    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling, qs1.borrow_limit) == (3, 150, 50)
    change = PolicyChange.objects.filter(share=qs1).order_by("-id").first()
    assert (change.actor.username, change.reason) == ("ben", "Merged: Ada's ceiling, my limit")


@pytest.mark.slow
@pytest.mark.parametrize("width", [1440, 390])
def test_the_preview_survives_a_failed_save(page, live_server, login, assert_accessible, width):
    queue = aws_sample_queue()
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    UserFactory(username="ada", roles=["admins"])
    page.set_viewport_size({"width": width, "height": 900})
    login(page, live_server, "ada", PASSWORD, next=f"/shares/{qs1.pk}/edit/")

    change_number(page, "Borrow limit (%)", "50")
    page.get_by_role("button", name="Save changes").click()  # no reason

    expect(page.locator("#id_reason_error")).to_contain_text("say why")
    expect(page.locator("#impact-body")).to_contain_text("Borrow limit: 200% → 50%")
    assert_accessible(page)
    if width == 390:
        _no_sideways_scroll(page)
