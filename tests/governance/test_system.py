"""Deployment settings, the health check, and login everywhere."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    # The browser harness sets DJANGO_ALLOW_ASYNC_UNSAFE for the test process only.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        **env,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE": "1",
        "DJANGO_SECRET_KEY": "x7Hq2-production-like-secret-key-for-the-check-3kLm9pQ4rT8vW1yZ",
        "DJANGO_ALLOWED_HOSTS": "quota.example.com",
        "VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_a_secret_key_a_random_one_is_kept_locally(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env["VAR_DIR"] = str(tmp_path)
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    run = [sys.executable, "-c", f"import django; django.setup(); {code}"]
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    first = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    second = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert first.stdout == second.stdout
    assert len(first.stdout.strip()) >= 50
    assert (tmp_path / "secret_key").read_text().strip() == first.stdout.strip()


@pytest.mark.django_db
def test_healthz_needs_no_login(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    # What makes it degraded: tests/scheduler/runner/test_health.py.
    assert response.json()["status"] in ("ok", "degraded")


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/api/v1/queues/", "/api/docs/"])
def test_everything_else_needs_login(client, url):
    response = client.get(url)
    assert response.status_code in (302, 401, 403)
    if response.status_code == 302:
        assert response["Location"].startswith("/accounts/login/")
