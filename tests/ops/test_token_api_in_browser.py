"""/api/v1/tokens/ opened in a browser lands on the tokens page (issue 28, point 5); API
clients (JSON asked for, `*/*`, no Accept, a token, `?format=json`) get the JSON as
before, and the answer says it varies on Accept."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.tokens import token_issue

pytestmark = pytest.mark.django_db

# What Chromium and Firefox send for a page they navigate to.
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


@pytest.fixture
def browser(team_lead):
    client = Client()
    client.force_login(team_lead)
    return client


def test_a_browser_is_sent_to_the_tokens_page(browser):
    response = browser.get("/api/v1/tokens/", HTTP_ACCEPT=BROWSER)
    assert response.status_code == 302
    assert response["Location"] == "/accounts/tokens/"
    assert "Accept" in response["Vary"]
    page = browser.get(response["Location"], HTTP_ACCEPT=BROWSER)
    assert page.status_code == 200
    assert b"<h1>API tokens</h1>" in page.content


def test_an_anonymous_browser_logs_in_on_the_way_to_the_tokens_page():
    response = Client().get("/api/v1/tokens/", HTTP_ACCEPT=BROWSER, follow=True)
    assert response.redirect_chain[0] == ("/accounts/tokens/", 302)
    assert response.redirect_chain[-1][0].startswith("/accounts/login/?next=/accounts/tokens/")


@pytest.mark.parametrize(
    "accept", ["application/json", "*/*", None, "application/json, text/html;q=0.5"]
)
def test_api_clients_get_the_json_as_before(browser, team_lead, accept):
    token_issue(user=team_lead, name="laptop")
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    response = browser.get("/api/v1/tokens/", **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert [item["name"] for item in response.json()["results"]] == ["laptop"]
    assert "Accept" in response["Vary"]


def test_a_token_or_format_json_gets_the_json_even_with_a_browsers_accept(browser, team_lead):
    _token, key = token_issue(user=team_lead, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with_token = client.get("/api/v1/tokens/", HTTP_ACCEPT=BROWSER)
    assert with_token.status_code == 200
    assert with_token.json()["results"][0]["name"] == "ci"
    asked = browser.get("/api/v1/tokens/?format=json", HTTP_ACCEPT=BROWSER)
    assert asked.status_code == 200
    assert asked.json()["count"] == 1
    # Anonymous API clients are still told to authenticate, not redirected.
    assert APIClient().get("/api/v1/tokens/").status_code == 401


def test_writes_are_unchanged(browser, team_lead):
    """Only the GET of the list is a page: issuing and revoking answer as before."""
    created = browser.post(
        "/api/v1/tokens/", {"name": "nb"}, content_type="application/json", HTTP_ACCEPT=BROWSER
    )
    assert created.status_code == 201
    token_id = created.json()["id"]
    deleted = browser.delete(f"/api/v1/tokens/{token_id}/", HTTP_ACCEPT=BROWSER)
    assert deleted.status_code == 204
