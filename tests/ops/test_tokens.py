"""API tokens: issued to a signed-in session with an expiry, listed, revoked; an expired
or revoked token no longer authenticates."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.tokens import token_issue

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(team_lead):
    client = APIClient()
    client.force_login(team_lead)
    return client


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_signed_in_user_gets_a_token_that_works_and_expires_when_asked(session, team_lead):
    response = session.post("/api/v1/tokens/", {"name": "laptop", "days": 7}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "active"
    assert body["token"].startswith(body["prefix"])
    expires = timezone.datetime.fromisoformat(body["expires_at"])
    assert abs(expires - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    # Only a digest is stored: the token itself is nowhere in the database.
    stored = ApiToken.objects.get(pk=body["id"])
    assert body["token"] not in (stored.digest, stored.prefix)
    assert with_token(body["token"]).get("/api/v1/queues/").status_code == 200


def test_the_default_lifetime_is_the_configured_one(session, settings):
    settings.API_TOKEN_DAYS = 30
    body = session.post("/api/v1/tokens/", {"name": "ci"}, format="json").json()
    expires = timezone.datetime.fromisoformat(body["expires_at"])
    assert abs(expires - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "x", "days": 0}, "days"),
        ({"name": "x", "days": 10_000}, "days"),
        ({"name": "x", "days": 2**70}, "days"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({}, "name"),
    ],
)
def test_bad_input_names_the_field_and_issues_nothing(session, data, field):
    response = session.post("/api/v1/tokens/", data, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not ApiToken.objects.exists()


def test_a_token_cannot_issue_another(team_lead):
    _, key = token_issue(user=team_lead, name="ci")
    response = with_token(key).post("/api/v1/tokens/", {"name": "more"}, format="json")
    assert response.status_code == 403
    assert "session" in response.json()["detail"]
    assert ApiToken.objects.count() == 1


def test_anonymous_gets_no_token(db):
    response = APIClient().post("/api/v1/tokens/", {"name": "x"}, format="json")
    assert response.status_code == 401
    assert not ApiToken.objects.exists()


def test_users_list_only_their_own_tokens(session, team_lead, admin):
    token_issue(user=team_lead, name="mine")
    token_issue(user=admin, name="theirs")
    names = [row["name"] for row in session.get("/api/v1/tokens/").json()["results"]]
    assert names == ["mine"]


def test_a_revoked_token_is_refused(session, team_lead):
    token, key = token_issue(user=team_lead, name="ci")
    assert with_token(key).get("/api/v1/queues/").status_code == 200
    assert session.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    response = with_token(key).get("/api/v1/queues/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Token revoked."
    listed = session.get("/api/v1/tokens/").json()["results"]
    assert [row["state"] for row in listed] == ["revoked"]


def test_a_token_can_revoke_itself(team_lead):
    token, key = token_issue(user=team_lead, name="ci")
    client = with_token(key)
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    assert client.get("/api/v1/queues/").status_code == 401


def test_nobody_revokes_another_users_token(session, admin):
    token, key = token_issue(user=admin, name="theirs")
    for pk in (token.pk, "abc", "9" * 40):
        assert session.delete(f"/api/v1/tokens/{pk}/").status_code == 404
    assert with_token(key).get("/api/v1/queues/").status_code == 200


def test_an_expired_token_is_refused(team_lead):
    token, key = token_issue(user=team_lead, name="ci", days=1)
    ApiToken.objects.filter(pk=token.pk).update(
        created_at=timezone.now() - timedelta(days=2), expires_at=timezone.now()
    )
    response = with_token(key).get("/api/v1/queues/")
    assert response.status_code == 401
    assert response.json()["detail"].startswith("Token expired")
    assert response["WWW-Authenticate"] == "Token"


def test_the_token_of_an_inactive_user_is_refused(team_lead):
    _, key = token_issue(user=team_lead, name="ci")
    team_lead.is_active = False
    team_lead.save()
    assert with_token(key).get("/api/v1/queues/").status_code == 401
