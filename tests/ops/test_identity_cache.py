"""A token's user, roles and teams come from the cache after the first request, and
every change to them (a revoked token, a removed role, a team left, a deactivated
user) takes effect on the very next request (accounts.identity)."""

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts.tokens import token_issue, token_revoke
from core.permissions import TEAM_LEADS
from tests.factories import UserFactory, aws_sample_queue

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def identity_cache(settings):
    settings.API_IDENTITY_CACHE_SECONDS = 60
    cache.clear()


@pytest.fixture
def lead_and_share():
    queue = aws_sample_queue()
    share = queue.shares.get(name="qs1")
    lead = UserFactory(username="lin", roles=[TEAM_LEADS])
    share.team.leads.add(lead)
    return lead, share


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_cached_request_asks_the_database_nothing_about_who_is_asking(
    lead_and_share, django_assert_num_queries
):
    lead, share = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    assert client.get(f"/api/v1/shares/{share.pk}/").status_code == 200  # fills the cache
    with django_assert_num_queries(2) as captured:  # the share and its limits, nothing else
        assert client.get(f"/api/v1/shares/{share.pk}/").status_code == 200
    tables = " ".join(query["sql"] for query in captured.captured_queries)
    for table in ("accounts_apitoken", "auth_user", "auth_group", "governance_team_leads"):
        assert table not in tables


def test_a_revoked_token_stops_working_at_once(lead_and_share):
    lead, share = lead_and_share
    token, key = token_issue(user=lead, name="t")
    client = client_for(key)
    assert client.get("/api/v1/queues/").status_code == 200
    token_revoke(user=lead, token_id=token.pk)
    response = client.get("/api/v1/queues/")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"].lower()


def test_a_removed_role_and_a_team_left_apply_on_the_next_request(lead_and_share):
    lead, share = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    submit = {"share": share.pk, "name": "x"}
    # A lead of the share's team may ask about it (400: the body is incomplete).
    assert client.post("/api/v1/jobs/estimate/", submit, format="json").status_code == 400
    share.team.leads.remove(lead)
    assert client.post("/api/v1/jobs/estimate/", submit, format="json").status_code in (400, 403)
    assert client.get(f"/api/v1/jobs/?share={share.pk}").json()["count"] == 0
    share.team.leads.add(lead)
    lead.groups.remove(Group.objects.get(name=TEAM_LEADS))
    assert client.get("/api/v1/jobs/").status_code == 403


def test_a_deactivated_user_is_refused_on_the_next_request(lead_and_share):
    lead, _ = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    assert client.get("/api/v1/queues/").status_code == 200
    lead.is_active = False
    lead.save()
    assert client.get("/api/v1/queues/").status_code == 401


def test_with_no_time_to_live_every_request_reads_the_token(
    lead_and_share, settings, django_assert_max_num_queries
):
    settings.API_IDENTITY_CACHE_SECONDS = 0
    lead, share = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    client.get(f"/api/v1/shares/{share.pk}/")
    with django_assert_max_num_queries(10) as captured:
        assert client.get(f"/api/v1/shares/{share.pk}/").status_code == 200
    assert "accounts_apitoken" in " ".join(query["sql"] for query in captured.captured_queries)
