"""API throttles: per user, reads and writes counted apart; 429 with Retry-After."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(settings):
    def set_rates(**rates):
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"read": None, "write": None, "anon": None, **rates},
        }

    return set_rates


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def test_defaults_are_the_issue_s_figures(settings):
    from config.settings import REST_FRAMEWORK

    assert REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] == {
        "read": "1200/min",
        "write": "120/min",
        "anon": "60/min",
    }


def test_reads_past_the_limit_get_429_with_retry_after(rates, team_lead):
    rates(read="3/min")
    client = client_for(team_lead)
    for _ in range(3):
        assert client.get("/api/v1/queues/").status_code == 200
    response = client.get("/api/v1/queues/")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["detail"].startswith("Request was throttled")


def test_writes_have_their_own_budget(rates, admin):
    rates(read="2/min", write="1/min")
    client = client_for(admin)
    assert client.get("/api/v1/queues/").status_code == 200
    assert client.get("/api/v1/queues/").status_code == 200
    assert client.get("/api/v1/queues/").status_code == 429
    # Reads are spent; the write budget is untouched (400: the body is empty).
    assert client.post("/api/v1/queues/", {}, format="json").status_code == 400
    response = client.post("/api/v1/queues/", {}, format="json")
    assert response.status_code == 429
    assert "Retry-After" in response


def test_each_user_has_their_own_budget(rates, team_lead, admin):
    rates(read="1/min")
    assert client_for(team_lead).get("/api/v1/queues/").status_code == 200
    assert client_for(team_lead).get("/api/v1/queues/").status_code == 429
    assert client_for(admin).get("/api/v1/queues/").status_code == 200


def test_a_rate_of_none_turns_the_throttle_off(rates, team_lead):
    rates()
    client = client_for(team_lead)
    assert all(client.get("/api/v1/queues/").status_code == 200 for _ in range(5))


@pytest.mark.redis
def test_the_redis_cache_shares_one_client_between_operations(settings):
    from django.core.cache import caches

    assert settings.CACHES["default"]["BACKEND"] == "config.cache.SharedClientRedisCache"
    cache = caches["default"]
    cache.set("ops-probe", {"n": 1}, 5)
    assert cache.get("ops-probe") == {"n": 1}
    client = cache._cache.get_client(write=True)
    assert cache._cache.get_client(write=True) is client
    cache.delete("ops-probe")
