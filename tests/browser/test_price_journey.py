"""In real Chromium at 1440 and 390 px (issue 26, point 7): an admin sets an instance
type's price on the instance types page. A price of 0 is refused next to its field and
changes nothing; a good price with a reason is saved, listed and kept in the history.
axe finds no serious or critical problem on each state, and nothing scrolls sideways."""

from decimal import Decimal

import pytest
from playwright.sync_api import expect

from fleet.models import InstanceType
from governance.models import PolicyChange
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "price-journey-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


def fits(page, width):
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width


@pytest.mark.slow
def test_an_admin_sets_a_price_on_the_instance_types_page(
    page, live_server, login, assert_accessible, width
):
    admin = UserFactory(username="ada", roles=["admins"])
    admin.set_password(PASSWORD)
    admin.save()
    itype = InstanceType.objects.create(name="ml.g5.xlarge", gpu_count=1, gpu_model="NVIDIA A10G")

    login(page, live_server, "ada", PASSWORD, next="/instance-types/")
    row = page.get_by_role("row", name="ml.g5.xlarge")
    expect(row).to_contain_text("no price")
    assert_accessible(page)
    fits(page, width)
    page.get_by_role("link", name="Set the price of ml.g5.xlarge").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Price of ml.g5.xlarge")
    assert_accessible(page)
    fits(page, width)

    price = page.get_by_label("Price of one instance per hour (USD)")
    price.fill("0")
    page.get_by_label("Reason for this change").fill("list price")
    page.get_by_role("button", name="Save price").click()
    expect(page.locator("#id_price_per_hour_error")).to_contain_text("must be more than 0")
    expect(price).to_have_attribute("aria-invalid", "true")
    assert_accessible(page)
    fits(page, width)
    itype.refresh_from_db()
    assert itype.price_per_hour is None
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.PRICE).exists()

    page.get_by_label("Price of one instance per hour (USD)").fill("1.408")
    page.get_by_role("button", name="Save price").click()
    expect(page.get_by_text("Saved the price of ml.g5.xlarge: 1.408 USD")).to_be_visible()
    expect(page.get_by_role("row", name="ml.g5.xlarge")).to_contain_text("1.408 USD")
    assert_accessible(page)
    fits(page, width)
    itype.refresh_from_db()
    assert itype.price_per_hour == Decimal("1.408")

    page.get_by_role("link", name="See this change in the history").click()
    expect(page.get_by_text("list price").first).to_be_visible()
    expect(page.get_by_text("1.4080").first).to_be_visible()
    change = PolicyChange.objects.get(target=PolicyChange.Target.PRICE)
    assert (change.actor, change.reason) == (admin, "list price")
