"""Login lockouts: 5 failed logins for a username from one address lock that pair out for
15 minutes, even with the right password; the login page says so; admins see and lift it."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "pw-for-tests-1"  # tests.factories.UserFactory's


def attempt(client: Client, username: str, password: str, address="10.1.2.3"):
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=address,
    )


def test_settings_are_five_failures_and_fifteen_minutes(settings):
    from datetime import timedelta

    assert settings.AXES_FAILURE_LIMIT == 5
    assert timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_five_wrong_passwords_lock_out_even_the_right_one(team_lead):
    client = Client()
    for _ in range(4):
        response = attempt(client, "lead-user", "wrong")
        assert response.status_code == 200
        assert "_auth_user_id" not in client.session
    response = attempt(client, "lead-user", "wrong")
    assert response.status_code == 429
    response = attempt(client, "lead-user", PASSWORD)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    page = response.content.decode()
    assert "This account is locked" in page
    assert "refused for 15 minutes" in page
    assert int(response["Retry-After"]) == 15 * 60
    # Another address, or another username from this one, is not locked.
    assert attempt(Client(), "lead-user", PASSWORD, address="10.9.9.9").status_code == 302


@pytest.mark.slow
def test_a_success_before_the_limit_starts_the_count_again(team_lead):
    client = Client()
    for _ in range(4):
        attempt(client, "lead-user", "wrong")
    assert attempt(client, "lead-user", PASSWORD).status_code == 302
    client = Client()
    for _ in range(4):
        assert attempt(client, "lead-user", "wrong").status_code == 200
    assert attempt(client, "lead-user", PASSWORD).status_code == 302


def test_admins_see_lockouts_and_lift_them(team_lead, admin):
    for _ in range(5):
        attempt(Client(), "lead-user", "wrong")
    client = Client()
    client.force_login(admin)
    page = client.get("/accounts/lockouts/").content.decode()
    assert "lead-user" in page and "10.1.2.3" in page
    response = client.post(
        "/accounts/lockouts/", {"username": "lead-user", "ip_address": "10.1.2.3"}
    )
    assert response.status_code == 302
    assert "Nobody is locked out" in client.get("/accounts/lockouts/").content.decode()
    assert attempt(Client(), "lead-user", PASSWORD).status_code == 302


def test_only_admins_see_lockouts(client, team_lead):
    client.force_login(team_lead)
    assert client.get("/accounts/lockouts/").status_code == 403
    assert (
        client.post("/accounts/lockouts/", {"username": "x", "ip_address": "1.2.3.4"}).status_code
        == 403
    )


def test_unlocking_bad_input_changes_nothing(admin, team_lead):
    for _ in range(5):
        attempt(Client(), "lead-user", "wrong")
    client = Client()
    client.force_login(admin)
    client.post("/accounts/lockouts/", {"username": "lead-user", "ip_address": "not-an-ip\x00"})
    assert "lead-user" in client.get("/accounts/lockouts/").content.decode()
