"""Token requests while the cache's Redis is unreachable (issue 23, point 5): the
circuit breaker answers at once after one failure (core.cache), the identity is read
from the database (accounts.identity), the throttle counts in the process's memory
(accounts.throttling), and nothing answers 500. The cache here points at a port where
nothing listens, or at a socket that accepts and never answers; the real outage of a
running Redis under gunicorn is tests/ops/test_redis_outage.py."""

import socket
import threading
import time

import pytest
import redis
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts import identity, throttling
from accounts.tokens import token_issue, token_revoke
from core.cache import CacheUnavailable
from fleet.models import InstanceType
from tests.factories import UserFactory, aws_sample_queue, job_definition

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redis_cache_at(port: int, **options) -> dict:
    return {
        "default": {
            "BACKEND": "core.cache.SharedClientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "KEY_PREFIX": "qg",
            "OPTIONS": {
                "socket_connect_timeout": 0.5,
                "socket_timeout": 0.5,
                "CIRCUIT_SECONDS": 30,
                **options,
            },
        }
    }


@pytest.fixture(autouse=True)
def fresh_breakers():
    """Each test's Redis starts with a closed circuit (a port can come round again)."""
    from core import cache as shared_cache

    shared_cache._BREAKERS.clear()


@pytest.fixture
def unreachable_cache(settings):
    """The default cache on a port nothing listens on: every connect is refused."""
    settings.CACHES = redis_cache_at(free_port())
    settings.API_IDENTITY_CACHE_SECONDS = 60
    identity._Outage.met = False
    throttling._FALLBACK.clear()
    yield
    identity._Outage.met = False
    throttling._FALLBACK.clear()


class SilentServer:
    """Accepts connections and never answers (a Redis that hangs), counting them."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self):
        self.listener.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def lead_and_share():
    queue = aws_sample_queue()
    share = queue.shares.get(name="qs1")
    lead = UserFactory(username="lin", roles=["team_leads"])
    share.team.leads.add(lead)
    return lead, share


def client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_after_one_timeout_the_cache_fails_at_once_without_the_network(settings):
    server = SilentServer()
    try:
        settings.CACHES = redis_cache_at(server.port)
        with pytest.raises(CacheUnavailable):
            cache.get("anything")  # waits for the socket timeout, once
        assert len(server.accepted) == 1
        for _ in range(20):
            with pytest.raises(CacheUnavailable, match="a moment ago"):
                cache.get_many(["a", "b"])
            with pytest.raises(CacheUnavailable):
                cache.set("a", 1)
        assert len(server.accepted) == 1  # the open circuit asked nothing of the network
        assert cache.breaker.is_open
    finally:
        server.close()


def test_the_circuit_closes_after_its_seconds_and_redis_is_tried_again(settings):
    port = free_port()
    settings.CACHES = redis_cache_at(port, CIRCUIT_SECONDS=0)
    for _ in range(2):  # a circuit of 0 s: each operation tries, and each is refused
        with pytest.raises(CacheUnavailable) as refused:
            cache.get("anything")
        assert "a moment ago" not in str(refused.value)


def test_token_reads_and_writes_go_to_the_database_while_the_cache_is_down(
    unreachable_cache, lead_and_share
):
    lead, share = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    assert client.get("/api/v1/queues/").status_code == 200
    assert client.get(f"/api/v1/shares/{share.pk}/").status_code == 200
    job_definition(share.queue, instance_type=InstanceType.objects.get(name="ml.g5.xlarge"))
    body = {"definition": "sample-work", "share": share.pk, "name": "during-outage"}
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert identity._Outage.met


def test_a_token_revoked_while_the_cache_is_down_is_refused_and_a_new_generation_is_owed(
    unreachable_cache, lead_and_share
):
    lead, _ = lead_and_share
    token, key = token_issue(user=lead, name="t")
    client = client_for(key)
    assert client.get("/api/v1/queues/").status_code == 200
    token_revoke(user=lead, token_id=token.pk)  # its generation cannot be set: no error
    response = client.get("/api/v1/queues/")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"].lower()
    assert identity._Outage.met  # the next contact with the cache sets a new generation


def test_a_process_that_met_the_outage_sets_a_new_generation_before_it_trusts_the_cache(
    settings, lead_and_share
):
    # The LocMem cache stands for a Redis that came back with what it held: an entry of
    # the token from before the outage, of the generation that is still current.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.API_IDENTITY_CACHE_SECONDS = 60
    lead, _ = lead_and_share
    token, key = token_issue(user=lead, name="t")
    client = client_for(key)
    assert client.get("/api/v1/queues/").status_code == 200  # cached
    before = cache.get(identity.GENERATION)
    type(token).objects.filter(pk=token.pk).update(revoked_at=token.created_at)  # no signal
    identity._Outage.met = True  # this process met the outage meanwhile
    try:
        response = client.get("/api/v1/queues/")
        assert response.status_code == 401
        assert cache.get(identity.GENERATION) != before
        assert not identity._Outage.met
    finally:
        identity._Outage.met = False


def test_the_throttle_counts_in_the_process_while_the_cache_is_down(
    unreachable_cache, settings, lead_and_share
):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"read": "3/min", "write": None, "anon": None},
    }
    lead, _ = lead_and_share
    client = client_for(token_issue(user=lead, name="t")[1])
    codes = [client.get("/api/v1/queues/").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]


def test_estimates_and_job_pages_are_served_while_the_cache_is_down(
    unreachable_cache, lead_and_share
):
    # The stored forecasts live in the cache (scheduler.services.estimates.store): while
    # it is down, a queue's forecast is this process's last one or is computed afresh.
    lead, share = lead_and_share
    queue = share.queue
    job_definition(queue, instance_type=InstanceType.objects.get(name="ml.g5.xlarge"))
    client = client_for(token_issue(user=lead, name="t")[1])
    body = {"definition": "sample-work", "share": share.pk, "name": "waits"}
    job = client.post("/api/v1/jobs/", body, format="json").json()["id"]
    pending = client.get(f"/api/v1/queues/{queue.pk}/pending/")
    assert pending.status_code == 200, pending.content
    assert [entry["job"] for entry in pending.json()["results"]] == [job]
    estimate = client.post("/api/v1/jobs/estimate/", body, format="json")
    assert estimate.status_code == 200, estimate.content
    pages = APIClient()
    pages.force_login(lead)
    for path in ("/jobs/", f"/jobs/{job}/", "/queues/"):
        assert pages.get(path).status_code == 200, path


def test_once_the_circuit_s_seconds_are_over_one_operation_tries_redis_the_others_wait_not(
    settings,
):
    server = SilentServer()
    try:
        settings.CACHES = redis_cache_at(server.port)
        with pytest.raises(CacheUnavailable):
            cache.get("anything")
        cache.breaker._open_until = time.monotonic() - 1  # its seconds are over
        outcomes = []

        def read():
            try:
                cache.get("anything")
            except CacheUnavailable as error:
                outcomes.append(str(error))

        threads = [threading.Thread(target=read) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert len(outcomes) == 6
        assert len(server.accepted) == 2  # the first failure, and one probe since
        assert sum("a moment ago" in outcome for outcome in outcomes) == 5, outcomes
    finally:
        server.close()


def test_a_success_closes_the_circuit():
    from core.cache import CircuitBreaker

    breaker = CircuitBreaker(0)
    with pytest.raises(CacheUnavailable), breaker.guard():
        raise redis.exceptions.ConnectionError("refused")
    with breaker.guard():
        pass  # the probe, which succeeds
    assert breaker._open_until == 0.0
    for _ in range(3):
        with breaker.guard():
            pass
