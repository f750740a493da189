"""The API tokens page (issue 28, point 5): create (the token shown once), list with last
use and expiry, revoke; and a token's last use, kept to the minute without a write per
request."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.tokens import token_issue

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(client, team_lead):
    client.force_login(team_lead)
    return client


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_creating_a_token_shows_it_once_and_it_works(page, team_lead):
    response = page.post(reverse("tokens"), {"name": "laptop", "days": 7})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    key = response.context["issued"]["key"]
    body = response.content.decode()
    assert key in body and "shown only once" in body
    token = ApiToken.objects.get(user=team_lead)
    assert (token.name, token.prefix) == ("laptop", key[:8])
    assert abs(token.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    assert with_token(key).get("/api/v1/queues/").status_code == 200
    # The next visit lists it, never its key.
    again = page.get(reverse("tokens")).content.decode()
    assert "laptop" in again and key[:8] in again and key not in again


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "", "days": 7}, "name"),
        ({"name": "x" * 101, "days": 7}, "name"),
        ({"name": "ci\x00", "days": 7}, "name"),
        ({"name": "ci", "days": 0}, "days"),
        ({"name": "ci", "days": 366}, "days"),
        ({"name": "ci", "days": "soon"}, "days"),
    ],
)
def test_bad_input_is_named_next_to_its_field_and_issues_nothing(page, data, field):
    response = page.post(reverse("tokens"), data)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert f'id="id_{field}_error"' in response.content.decode()
    assert response.context["issued"] is None
    assert not ApiToken.objects.exists()


def test_the_list_says_last_use_expiry_and_state(page, team_lead, admin):
    used, used_key = token_issue(user=team_lead, name="used-one", days=3)
    token_issue(user=team_lead, name="never-used", days=30)
    expired, _ = token_issue(user=team_lead, name="old-one", days=1)
    ApiToken.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(days=5), expires_at=timezone.now() - timedelta(days=4)
    )
    token_issue(user=admin, name="someone-elses")
    assert with_token(used_key).get("/api/v1/queues/").status_code == 200

    response = page.get(reverse("tokens"))
    body = response.content.decode()
    assert "someone-elses" not in body
    cards = {token.name: state for token, state in response.context["tokens"]}
    assert cards == {"used-one": "active", "never-used": "active", "old-one": "expired"}
    assert "never" in body
    # Durations for people: "in 2 d 23 h", "4 d 00 h ago", never a raw number.
    assert "in 2 d 23 h" in body or "in 3 d 00 h" in body
    assert "4 d 00 h ago" in body
    assert "0 s ago" in body or "now" in body  # the used token's last use


def test_revoking_stops_the_token_at_once(page, team_lead):
    token, key = token_issue(user=team_lead, name="ci")
    assert with_token(key).get("/api/v1/queues/").status_code == 200
    response = page.post(reverse("token-revoke", args=[token.pk]), follow=True)
    assert "is revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert with_token(key).get("/api/v1/queues/").status_code == 401
    assert "Revoked" in response.content.decode()


def test_nobody_revokes_another_users_token_from_the_page(page, admin):
    token, _ = token_issue(user=admin, name="admins")
    assert page.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    assert page.get(reverse("token-revoke", args=[token.pk])).status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_page_needs_a_sign_in(client):
    response = client.get(reverse("tokens"))
    assert response.status_code in (302, 403)
    assert response.status_code != 200


def test_the_last_use_is_written_once_a_minute_not_per_request(
    team_lead, django_assert_num_queries
):
    cache.clear()
    token, key = token_issue(user=team_lead, name="ci")
    client = with_token(key)
    client.get("/api/v1/tokens/")
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None and timezone.now() - first < timedelta(seconds=5)
    with django_assert_num_queries(1) as captured:  # the list (a short page: no COUNT)
        client.get("/api/v1/tokens/")
    assert not [q for q in captured.captured_queries if q["sql"].startswith("UPDATE")]
    # Past the minute (the cache's mark gone), the next request records it again.
    cache.delete(f"identity:used:{token.pk}")
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/v1/tokens/")
    token.refresh_from_db()
    assert token.last_used_at > first - timedelta(seconds=1)
    assert client.get("/api/v1/tokens/").json()["results"][0]["last_used_at"]
