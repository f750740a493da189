"""The lockout journey in real Chromium: five wrong passwords, then the right one, and
the login page says the account is locked and for how long; an admin finds the lockout
on the lockouts page and lifts it; the user logs in."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"


def try_login(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


@pytest.mark.slow
def test_locked_out_then_unlocked_by_an_admin(browser, page, live_server, login, assert_accessible):
    UserFactory(username="lead", password=PASSWORD, roles=["team_leads"])
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    for _ in range(5):
        try_login(page, live_server, "lead", "not-my-password")
    try_login(page, live_server, "lead", PASSWORD)
    alert = page.locator("#login-locked")
    expect(alert).to_contain_text("This account is locked")
    expect(alert).to_contain_text("refused for 15 minutes")
    assert "/accounts/login/" in page.url
    assert_accessible(page)

    admin = browser.new_context(base_url=live_server.url)
    admin_page = admin.new_page()
    login(admin_page, live_server, "platform", PASSWORD, next="/accounts/lockouts/")
    row = admin_page.get_by_role("row", name="lead")
    expect(row).to_contain_text("127.0.0.1")
    expect(row).to_contain_text("5")
    assert_accessible(admin_page)
    row.get_by_role("button", name="Unlock lead from 127.0.0.1").click()
    expect(admin_page.get_by_text("lead may log in from 127.0.0.1 again.")).to_be_visible()
    expect(admin_page.get_by_text("Nobody is locked out")).to_be_visible()
    admin.close()

    login(page, live_server, "lead", PASSWORD)
    assert "/accounts/login/" not in page.url
