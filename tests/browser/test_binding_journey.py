"""In real Chromium at 1440 and 390 px: an admin edits a Slurm queue's executor binding
and an instance type's Slurm settings on the generic binding pages (their fields come
from the executor's binding schema). Bad input is refused next to the field it names and
changes nothing; good settings with a reason are saved and kept in the history. axe
finds no serious or critical problem on each state, and nothing scrolls sideways."""

import pytest
from playwright.sync_api import expect

from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "binding-journey-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


def fits(page, width):
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width


def checked(page, width):
    page.wait_for_load_state("networkidle")
    fits(page, width)


@pytest.mark.slow
def test_an_admin_edits_the_binding_pages(page, live_server, login, assert_accessible, width):
    admin = UserFactory(username="ada", roles=["admins"])
    admin.set_password(PASSWORD)
    admin.save()
    itype = InstanceType.objects.create(name="ml.g5.xlarge", gpu_count=1)
    queue = JobQueue.objects.create(name="lab", executor="slurm")

    login(page, live_server, "ada", PASSWORD, next=f"/queues/{queue.pk}/binding/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Executor binding of lab")
    assert_accessible(page)
    checked(page, width)
    page.get_by_label("Slurm cluster (slurm.conf)").fill("/nowhere/slurm.conf")
    page.get_by_label("Slurm partition").fill("gpu;rm")
    page.get_by_label("Reason for this change").fill("the lab cluster")
    page.get_by_role("button", name="Save binding").click()
    expect(page.locator("#id_slurm_partition_error")).to_contain_text("give the Slurm partition")
    assert_accessible(page)
    checked(page, width)
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()

    page.goto(f"{live_server.url}/instance-types/{itype.pk}/slurm/")  # the old address
    expect(page.get_by_role("heading", level=1)).to_have_text("Slurm settings of ml.g5.xlarge")
    assert_accessible(page)
    checked(page, width)
    resources = page.get_by_label("Slurm resources of one instance")
    resources.fill("--gres=gpu:1\n--wrap=id")
    page.get_by_label("Reason for this change").fill("one GPU each")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#id_slurm_resources_error")).to_contain_text(
        "--wrap is not a resource option"
    )
    assert_accessible(page)
    checked(page, width)
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()

    page.get_by_label("Slurm resources of one instance").fill("--gres=gpu:1")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Saved the executor binding of ml.g5.xlarge")).to_be_visible()
    expect(page.get_by_role("row", name="ml.g5.xlarge")).to_contain_text("--gres=gpu:1")
    assert_accessible(page)
    checked(page, width)
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.actor, change.after) == (admin, {"slurm_resources": ["--gres=gpu:1"]})
