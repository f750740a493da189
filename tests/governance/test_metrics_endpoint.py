"""`/metrics`: off (404) by default; with a scrape token or an allowed address, readable
by those only (403 for the rest, a signed-in admin included); the client's own address
decides, never an X-Forwarded-For header."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-scrape-token-0123456789"


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def test_off_by_default_is_not_found_even_for_an_admin(client, admin):
    assert client.get("/metrics").status_code == 404
    client.force_login(admin)
    assert client.get("/metrics").status_code == 404


def test_the_token_reads_the_figures(client, token, aws_queue):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {"quota_share_limit_instances", "quota_share_preemptions_caused"} <= names


def test_openmetrics_when_the_scraper_asks_for_it(client, token, aws_queue):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse

    response = client.get(
        "/metrics",
        HTTP_AUTHORIZATION=f"Bearer {TOKEN}",
        HTTP_ACCEPT="application/openmetrics-text; version=1.0.0, text/plain;q=0.5",
    )
    assert response["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    families = {family.name: family for family in parse(response.content.decode())}
    assert families["quota_share_preemptions_caused"].type == "counter"
    assert families["quota_share_limit_instances"].type == "gauge"


@pytest.mark.parametrize(
    "authorization",
    ["", "Bearer wrong-token-0123456789", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"],
)
def test_without_the_right_token_it_is_forbidden(client, token, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    assert client.get("/metrics", **headers).status_code == 403


def test_a_session_is_no_scrape_credential(client, token, admin):
    client.force_login(admin)
    assert client.get("/metrics").status_code == 403


def test_an_allowed_address_reads_without_a_token(client, settings):
    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8", "::1/128"]
    assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.1.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403


def test_a_forwarded_for_header_is_not_believed(client, settings):
    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8"]
    response = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.1")
    assert response.status_code == 403


def test_a_wrong_token_from_an_allowed_address_is_refused(client, token, settings):
    settings.METRICS_ALLOWED_ADDRESSES = ["127.0.0.1"]
    assert client.get("/metrics").status_code == 200
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token-at-all")
    assert response.status_code == 403


def test_only_get(client, token):
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("METRICS_TOKEN", "short", "at least 16 characters"),
        ("METRICS_ALLOWED_ADDRESSES", "10.0.0.0/8,not-an-address", "'not-an-address'"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_variable(variable, value, message):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_SECURE": "0",
            variable: value,
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert variable in result.stderr and message in result.stderr
