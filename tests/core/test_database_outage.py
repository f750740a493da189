"""While the database cannot be reached, the product answers 503 with Retry-After (issue
34, point 5): the API in its error shape, pages with a plain page, /healthz/ its own
503. The database is really unreachable: for the test, the default alias's connection
is swapped for one to where no database is (PostgreSQL: a closed port on 127.0.0.1;
SQLite: a file in a directory that does not exist), so the driver itself fails to
connect; the real connection is put back after."""

from __future__ import annotations

import contextlib
import socket

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def database_unreachable():
    real = connections["default"]
    unreachable = dict(real.settings_dict)
    if real.vendor == "postgresql":
        unreachable.update(HOST="127.0.0.1", PORT=str(closed_port()))
        unreachable["OPTIONS"] = {**unreachable.get("OPTIONS", {}), "connect_timeout": 2}
    else:
        unreachable.update(NAME="/nonexistent-directory/outage/db.sqlite3")
    broken = type(real)(unreachable, alias="default")
    connections["default"] = broken
    try:
        yield
    finally:
        broken.close()
        connections["default"] = real


@pytest.fixture
def signed_in(admin):
    # Django's test client re-raises a handled exception unless told not to; a browser
    # only sees the response.
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    return client


def test_the_api_answers_503_with_retry_after_in_its_error_shape(signed_in, settings):
    settings.DATABASE_OUTAGE_RETRY_AFTER = 7
    with database_unreachable():
        response = signed_in.get("/api/v1/jobs/")
    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {
        "detail": "the database cannot be reached right now; try again in 7 s",
        "errors": {},
    }


def test_a_token_the_api_cannot_check_is_503_not_401(admin):
    """DRF's authentication reads the token first: its exception handler answers."""
    client = Client(raise_request_exception=False)
    with database_unreachable():
        response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION="Token abcdef0123456789")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    assert "database cannot be reached" in response.json()["detail"]


def test_a_page_answers_503_with_a_plain_page(signed_in):
    with database_unreachable():
        response = signed_in.get(reverse("job-list"))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Briefly unavailable" in page and "Try again in 5 seconds" in page


def test_healthz_says_503_and_everything_answers_again_after(signed_in):
    with database_unreachable():
        # A load balancer (no session): /healthz/'s own answer, as before.
        health = Client(raise_request_exception=False).get("/healthz/")
        assert health.status_code == 503 and health.json()["status"] == "error"
        assert signed_in.get("/healthz/").status_code == 503
    assert signed_in.get("/healthz/").status_code == 200
    assert signed_in.get("/api/v1/jobs/").status_code == 200
    assert signed_in.get(reverse("job-list")).status_code == 200


def test_other_failures_stay_500(signed_in, monkeypatch):
    """Only the database's connection errors are an outage: a bug is still a 500."""
    from scheduler import api

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(api.JobListCreate, "get", broken)
    response = signed_in.get("/api/v1/jobs/")
    assert response.status_code == 500 and "Retry-After" not in response
