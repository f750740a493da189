"""API throttles: per user, reads and writes counted apart; 429 with Retry-After; the
count holds under concurrent requests (issue 23, finding 2)."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.test import APIClient

from accounts.throttling import AnonymousThrottle, UserReadWriteThrottle

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

    assert settings.CACHES["default"]["BACKEND"] == "core.cache.SharedClientRedisCache"
    cache = caches["default"]
    cache.set("ops-probe", {"n": 1}, 5)
    assert cache.get("ops-probe") == {"n": 1}
    client = cache._cache.get_client(write=True)
    assert cache._cache.get_client(write=True) is client
    cache.delete("ops-probe")


# Concurrency: each request gets its own throttle (as DRF makes one per request), all
# released at once; the clock is fixed inside one window so the window cannot turn.
NOW = 1_800_000_010.0  # 10 seconds into a minute


def concurrent_verdicts(make_throttle, request, *, threads: int, requests: int) -> list[bool]:
    start = threading.Barrier(threads)

    def send(count: int) -> list[bool]:
        start.wait()
        return [make_throttle().allow_request(request, None) for _ in range(count)]

    shares = [requests // threads + (i < requests % threads) for i in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        with ThreadPoolExecutor(threads) as pool:
            return [verdict for part in pool.map(send, shares) for verdict in part]
    finally:
        sys.setswitchinterval(interval)


def writer(pk: int):
    return SimpleNamespace(user=SimpleNamespace(is_authenticated=True, pk=pk), method="POST")


def throttle_on(cache, cls=UserReadWriteThrottle):
    def make():
        throttle = cls()
        throttle.cache, throttle.timer = cache, lambda: NOW
        return throttle

    return make


@pytest.mark.parametrize(("threads", "requests"), [(32, 200), (16, 300)])
def test_concurrent_writes_accept_exactly_the_rate_on_locmem(rates, threads, requests):
    rates(write="120/min")
    cache = LocMemCache(f"throttle-{threads}", {})

    verdicts = concurrent_verdicts(
        throttle_on(cache), writer(7), threads=threads, requests=requests
    )

    assert verdicts.count(True) == 120
    assert verdicts.count(False) == requests - 120


def test_concurrent_anonymous_requests_accept_exactly_the_rate(rates):
    rates(anon="60/min")
    cache = LocMemCache("throttle-anon", {})
    anonymous = SimpleNamespace(
        user=SimpleNamespace(is_authenticated=False), method="GET", META={"REMOTE_ADDR": "10.1.2.3"}
    )

    verdicts = concurrent_verdicts(
        throttle_on(cache, AnonymousThrottle), anonymous, threads=16, requests=100
    )

    assert verdicts.count(True) == 60


def test_a_spent_window_says_when_the_next_starts_and_then_allows_again(rates):
    rates(write="2/min")
    cache = LocMemCache("throttle-window", {})
    now = [NOW]

    def attempt():
        throttle = UserReadWriteThrottle()
        throttle.cache, throttle.timer = cache, lambda: now[0]
        return throttle.allow_request(writer(3), None), throttle

    assert [attempt()[0] for _ in range(2)] == [True, True]
    allowed, throttle = attempt()
    assert not allowed and throttle.wait() == 50  # 10 s into the minute
    now[0] = NOW + 50  # the next minute
    assert attempt()[0] is True


@pytest.mark.redis
@pytest.mark.parametrize(("threads", "requests"), [(32, 200), (16, 300)])
def test_concurrent_writes_accept_exactly_the_rate_on_redis(rates, threads, requests):
    from django.core.cache.backends.redis import RedisCache

    rates(write="120/min")
    cache = caches["default"]
    assert isinstance(cache, RedisCache)

    verdicts = concurrent_verdicts(
        throttle_on(cache), writer(10_000 + threads), threads=threads, requests=requests
    )

    assert verdicts.count(True) == 120
    # The window's counter expires by itself.
    client = cache._cache.get_client(write=True)
    (key,) = client.keys(cache.make_key(f"throttle_write_{10_000 + threads}_*"))
    assert 60 <= client.ttl(key) <= 65
