"""/api/v1/tokens/ typed into a browser, at 1440 and 390 px (issue 28, point 5): the
browser lands on the tokens page (signed in, or after logging in), where axe finds no
serious or critical problem; the JSON is still what an API client gets."""

import pytest
from playwright.sync_api import expect
from rest_framework.test import APIClient

from accounts.tokens import token_issue
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "token-api-pw-1"
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


def test_a_signed_in_browser_lands_on_the_tokens_page(
    page, live_server, login, assert_accessible, lead, width
):
    _token, key = token_issue(user=lead, name="laptop")
    login(page, live_server, "lena", PASSWORD, next="/")
    response = page.goto("/api/v1/tokens/")
    assert response.url == f"{live_server.url}/accounts/tokens/"
    assert response.status == 200
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    expect(page.locator("li.token")).to_contain_text("laptop")
    assert_accessible(page)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width

    # An API client, with the same token, still gets the JSON.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    answer = client.get("/api/v1/tokens/", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200
    assert answer.json()["results"][0]["name"] == "laptop"


def test_an_anonymous_browser_logs_in_and_lands_on_the_tokens_page(
    page, live_server, assert_accessible, lead, width
):
    page.goto("/api/v1/tokens/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/accounts/tokens/")
    assert_accessible(page)
    page.get_by_label("Username").fill("lena")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/accounts/tokens/")
    expect(page.get_by_text("No tokens yet")).to_be_visible()
    assert_accessible(page)
