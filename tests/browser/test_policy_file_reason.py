"""In real Chromium at 1440 and 390 px (issue 28, point 7): an admin uploads a changed
policy file, reads its plan, and cannot apply it without a reason: the error sits next to
the reason, the plan stays on the page, nothing changes; with a reason it applies and the
history keeps it. axe finds no serious or critical problem on each state."""

import pytest
import yaml
from playwright.sync_api import expect

from fleet.models import QuotaShare
from governance.models import PolicyChange
from governance.policy_code import policy_export
from tests.factories import UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "policy-reason-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


def test_applying_a_policy_file_needs_a_reason(page, live_server, login, assert_accessible, width):
    admin = UserFactory(username="ada", roles=["admins"])
    admin.set_password(PASSWORD)
    admin.save()
    queue = aws_sample_queue()
    data = yaml.safe_load(policy_export(format="native", queue=queue).content)
    (qs1,) = [share for share in data["queues"][0]["shares"] if share["name"] == "qs1"]
    qs1["borrow_limit"] = 50
    changed = yaml.safe_dump(data, sort_keys=False).encode()
    count = PolicyChange.objects.count()

    login(page, live_server, "ada", PASSWORD, next=f"/queues/{queue.pk}/policy-code/")
    page.get_by_label("Policy file").set_input_files(
        {"name": "aws-sample.yaml", "mimeType": "text/yaml", "buffer": changed}
    )
    page.get_by_role("button", name="Plan this file").click()
    apply = page.get_by_role("button", name="Apply 1 change")
    expect(apply).to_be_visible()

    apply.click()
    error = page.locator("#id_reason_error")
    expect(error).to_have_text("say why this change is made")
    expect(page.get_by_role("button", name="Apply 1 change")).to_be_visible()  # the same plan
    assert_accessible(page)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width
    assert PolicyChange.objects.count() == count
    assert QuotaShare.objects.get(queue=queue, name="qs1").borrow_limit == 200

    page.get_by_label("Reason for this change").fill("qs1 borrows less while qs2 trains")
    page.get_by_role("button", name="Apply 1 change").click()
    expect(page.get_by_text("Applied aws-sample.yaml")).to_be_visible()
    assert_accessible(page)
    assert QuotaShare.objects.get(queue=queue, name="qs1").borrow_limit == 50
    latest = PolicyChange.objects.latest("id")
    assert latest.reason == (
        "qs1 borrows less while qs2 trains (applied from policy file aws-sample.yaml)"
    )
