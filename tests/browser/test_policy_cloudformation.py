"""In real Chromium at 1440 and 390 px (issue 28, point 6): an admin uploads a queue's
CloudFormation template (YAML, with its short forms) whose service environment grows and
whose share lends less, reads the plan (the capacity and the share, field by field, and
the ignored resource), and applies it with a reason. axe finds no serious or critical
problem on the upload page and the plan page, and neither is wider than the viewport."""

import json

import pytest
from playwright.sync_api import expect

from fleet.models import QuotaShare
from governance.models import PolicyChange
from governance.policy_code import policy_export
from tests.factories import UserFactory, aws_sample_queue
from tests.governance.policy_code.test_cloudformation import as_yaml

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "policy-cfn-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


def _fits(page, width) -> None:
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width


def test_a_cloudformation_upload_plans_and_applies(
    page, live_server, login, assert_accessible, width
):
    admin = UserFactory(username="cara", roles=["admins"])
    admin.set_password(PASSWORD)
    admin.save()
    queue = aws_sample_queue()
    data = json.loads(policy_export(format="cloudformation", queue=queue).content)
    limits = data["Resources"]["ServiceEnvironment"]["Properties"]["CapacityLimits"]
    before = limits[0]["MaxCapacity"]
    limits[0]["MaxCapacity"] = before + 2
    share = next(
        resource["Properties"]
        for resource in data["Resources"].values()
        if resource["Properties"].get("QuotaShareName") == "qs1"
    )
    share["ResourceSharingConfiguration"]["BorrowLimit"] = 50
    data["Resources"]["Logs"] = {"Type": "AWS::S3::Bucket", "Properties": {}}
    count = PolicyChange.objects.count()

    login(page, live_server, "cara", PASSWORD, next=f"/queues/{queue.pk}/policy-code/")
    expect(page.get_by_text("CloudFormation JSON or YAML")).to_be_visible()
    assert_accessible(page)
    _fits(page, width)
    page.get_by_label("Policy file").set_input_files(
        {"name": "aws-sample.yaml", "mimeType": "text/yaml", "buffer": as_yaml(data).encode()}
    )
    page.get_by_role("button", name="Plan this file").click()
    apply = page.get_by_role("button", name="Apply 2 changes")
    expect(apply).to_be_visible()
    expect(page.get_by_role("heading", name="share qs1: changed")).to_be_visible()
    expect(page.get_by_text("ignored: Logs (AWS::S3::Bucket)", exact=False)).to_be_visible()
    assert_accessible(page)
    _fits(page, width)
    assert PolicyChange.objects.count() == count

    page.get_by_label("Reason for this change").fill("More g5 for the spring runs")
    apply.click()
    expect(page.get_by_text("Applied aws-sample.yaml")).to_be_visible()
    assert QuotaShare.objects.get(queue=queue, name="qs1").borrow_limit == 50
    assert queue.capacities.get(instance_type__name=limits[0]["CapacityUnit"]).instances == (
        before + 2
    )
    assert PolicyChange.objects.latest("id").reason == (
        "More g5 for the spring runs (applied from policy file aws-sample.yaml)"
    )
