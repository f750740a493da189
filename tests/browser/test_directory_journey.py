"""The directory journey in real Chromium against a real slapd: an admin maps the nested
group team-leads to the team lead role and vision-leads to the lead of team vision on
the directory page (an empty group first: the error sits next to its field), each with
its reason; alice
signs in with her directory password and lands on her queues as a team lead."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.directory_server import directory, ldap_login, ldap_server  # noqa: F401
from tests.factories import TeamFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.sso, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"


@pytest.mark.slow
def test_an_admin_maps_groups_and_a_directory_user_signs_in_with_them(
    browser,
    page,
    live_server,
    login,
    assert_accessible,
    ldap_login,  # noqa: F811
):
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    TeamFactory(name="vision")
    login(page, live_server, "platform", PASSWORD, next="/directory/")
    expect(page.get_by_role("heading", name="Directory mapping", level=1)).to_be_visible()
    expect(page.get_by_text("LDAP login is on.")).to_be_visible()

    form = page.locator("form.form")
    form.get_by_role("button", name="Add mapping").click()
    expect(page.locator("#id_group_error")).to_contain_text("name the directory group")
    assert_accessible(page)

    page.get_by_role("textbox", name="Directory group").fill("team-leads")
    page.get_by_label("Which role").select_option("team_leads")
    page.locator("#id_reason").fill("team leads are whoever the directory says")
    page.get_by_role("button", name="Add mapping").click()
    expect(page.get_by_text("Group team-leads now gives role team_leads")).to_be_visible()

    page.get_by_role("textbox", name="Directory group").fill("vision-leads")
    page.get_by_role("radio", name="Team lead").check()
    page.get_by_label("Which team").select_option(label="vision")
    page.locator("#id_reason").fill("vision's leads come from the directory")
    page.get_by_role("button", name="Add mapping").click()
    expect(page.get_by_role("row", name="vision-leads")).to_contain_text("team lead of vision")
    assert_accessible(page)

    alice = browser.new_context(base_url=live_server.url)
    alice_page = alice.new_page()
    login(alice_page, live_server, "alice", ldap_login.password, next="/queues/")
    assert "/queues/" in alice_page.url
    expect(alice_page.locator(".topbar__role")).to_have_text("Team lead")
    alice.close()

    page.goto(f"{live_server.url}/directory/")
    expect(page.get_by_role("row", name="alice")).to_contain_text("vision-leads")
