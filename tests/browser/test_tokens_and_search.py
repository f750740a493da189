"""In real Chromium at 1440 and 390 px (issue 28, points 3 and 5):

- a team lead creates an API token on its page, sees it once, uses it, finds it listed
  with its last use and expiry, and revokes it; the page never scrolls sideways;
- the lead searches the jobs page by name, id, definition and submitter, the list
  narrowing as they type (htmx), and an empty search result says what to do.

axe finds no serious or critical problem on any state of either page.
"""

import re

import pytest
from playwright.sync_api import expect
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tests.factories import JobFactory, UserFactory, aws_sample_queue, job_definition

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "tokens-search-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


@pytest.fixture
def lead(db):
    user = UserFactory(username="lena", roles=["team_leads"])
    user.set_password(PASSWORD)
    user.save()
    return user


def assert_fits(page, width):
    scroll = page.evaluate("document.scrollingElement.scrollWidth")
    assert scroll <= width, f"{page.url} is {scroll} px wide at {width} px"


def test_a_lead_creates_uses_and_revokes_a_token(
    page, live_server, login, assert_accessible, lead, width
):
    login(page, live_server, "lena", PASSWORD, next="/accounts/profile/")
    page.get_by_role("link", name="Create, review and revoke your API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    expect(page.get_by_text("No tokens yet")).to_be_visible()
    assert_accessible(page)
    assert_fits(page, width)

    # A bad name is refused next to its field, and nothing is issued.
    page.get_by_label("Days until it expires").fill("400")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#id_name_error")).to_be_visible()
    expect(page.locator("#id_days_error")).to_contain_text("365")
    assert_accessible(page)
    assert not ApiToken.objects.exists()

    page.get_by_label("Name").fill("notebook " + "x" * 80)
    page.get_by_label("Days until it expires").fill("14")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_text("it is shown only once")).to_be_visible()
    key = page.get_by_label("Token", exact=True).input_value()
    assert len(key) > 30
    assert_accessible(page)
    assert_fits(page, width)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/queues/").status_code == 200

    # Shown once: the next visit lists it by its first characters, with its last use.
    page.goto(f"{live_server.url}/accounts/tokens/")
    expect(page.get_by_label("Token", exact=True)).to_have_count(0)
    assert key not in page.content()
    card = page.locator("li.token")
    expect(card).to_contain_text(key[:8])
    expect(card.locator("[data-last-used]")).not_to_have_text("never")
    expect(card.locator("[data-expires]")).to_contain_text(re.compile(r"in 1[34] d \d\d h"))
    expect(card.get_by_text("Active")).to_be_visible()
    assert_accessible(page)
    assert_fits(page, width)

    card.get_by_role("button", name=re.compile("Revoke")).click()
    expect(page.get_by_text("is revoked: it no longer works")).to_be_visible()
    expect(page.locator("li.token .chip")).to_have_text("Revoked")
    expect(page.locator("li.token").get_by_role("button")).to_have_count(0)
    assert_accessible(page)
    assert_fits(page, width)
    assert client.get("/api/v1/queues/").status_code == 401


@pytest.mark.slow
def test_a_lead_searches_the_jobs(page, live_server, login, assert_accessible, lead, width):
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    qs1.team.leads.add(lead)
    resnet = job_definition(queue, name="resnet-train")
    omar = UserFactory(username="omar.k", roles=["team_leads"])
    JobFactory(share=qs1, name="vision-sweep", definition_revision=resnet)
    JobFactory(share=queue.shares.get(name="qs2"), name="nlp-eval", submitted_by=omar)
    target = JobFactory(share=queue.shares.get(name="qs3"), name="speech-base")

    login(page, live_server, "lena", PASSWORD, next="/jobs/")
    rows = page.locator("#job-list tbody tr")
    expect(rows).to_have_count(3)
    search = page.get_by_role("searchbox", name="Search")

    search.fill("resnet")  # htmx swaps the list as they type
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("vision-sweep")
    assert "search=resnet" in page.url
    assert_accessible(page)
    assert_fits(page, width)

    search.fill("omar")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("nlp-eval")

    search.fill(f"#{target.pk}")
    search.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("speech-base")

    search.fill("nothing-is-called-this")
    search.press("Enter")
    expect(page.get_by_text("No jobs match")).to_be_visible()
    expect(page.get_by_role("link", name="Clear filters")).to_be_visible()
    assert_accessible(page)
    assert_fits(page, width)
