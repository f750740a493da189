"""The OpenID Connect journey in real Chromium against the real provider process: the
login page's "Sign in with Example SSO", the provider's authorize page, back signed in
as a team lead (the groups claim through the directory mapping); logging out ends the
provider's session and comes back to the login page (the logout form's redirect to the
provider is allowed by the Content-Security-Policy's form-action)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from governance.directory.models import GroupMapping
from tests.governance.directory.oidc_provider import oidc_login, oidc_provider  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.sso, pytest.mark.django_db(transaction=True)]


def test_a_user_signs_in_with_the_provider_and_logs_out_of_both(
    page,
    live_server,
    assert_accessible,
    oidc_login,  # noqa: F811
):
    GroupMapping.objects.create(group="gpu-leads", kind=GroupMapping.Kind.ROLE, role="team_leads")
    oidc_login.person(
        "sub-tess", preferred_username="tess", email="tess@gpuq.test", groups=["gpu-leads"]
    )
    page.goto(f"{live_server.url}/accounts/login/?next=/queues/")
    button = page.get_by_role("link", name="Sign in with Example SSO")
    expect(button).to_be_visible()
    assert_accessible(page)
    button.click()

    page.wait_for_url(f"{oidc_login.issuer}/oauth2/authorize?**")
    page.get_by_placeholder("sub").fill("sub-tess")
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{live_server.url}/queues/")
    expect(page.locator(".topbar__role")).to_have_text("Team lead")

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{oidc_login.issuer}/oauth2/end_session?**")
    page.get_by_role("button", name="End session").click()
    page.wait_for_url(f"{live_server.url}/accounts/login/")
    expect(page.get_by_role("link", name="Sign in with Example SSO")).to_be_visible()
    page.goto(f"{live_server.url}/queues/")
    page.wait_for_url(f"{live_server.url}/accounts/login/?next=/queues/")
    # The provider's own pages (the mock's) load a style sheet from a CDN this machine
    # cannot reach; only the product's pages must be free of browser errors.
    page.console_errors[:] = [
        error for error in page.console_errors if f"({live_server.url}/" in error
    ]
