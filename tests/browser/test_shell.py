"""The shell every page shares, in real Chromium: login, top bar, skip link, logout,
error pages, glossary tooltips, charts and htmx swaps, and axe on each of them."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import override_settings
from playwright.sync_api import expect

from core.permissions import ADMINS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # Stand-ins for the top bar's pages, which later work builds.
    pytest.mark.usefixtures("ui_urls"),
]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def ui_urls():
    # override_settings reaches the live server's thread: settings are process-wide.
    with override_settings(ROOT_URLCONF="tests.governance.ui_urls"):
        yield


@pytest.fixture
def admin_user():
    user = User.objects.create_user(
        "ada", password=PASSWORD, first_name="Ada", last_name="Lovelace"
    )
    user.groups.add(Group.objects.get_or_create(name=ADMINS)[0])
    return user


@pytest.mark.slow
def test_an_admin_logs_in_finds_the_top_bar_and_logs_out(
    page, live_server, admin_user, login, assert_accessible
):
    page.goto("/accounts/login/")
    expect(page).to_have_title("Log in · Quota governance")
    assert_accessible(page)

    login(page, live_server, "ada", PASSWORD, next="/queues/")

    expect(page).to_have_url(re.compile(r"/queues/$"))
    expect(page).to_have_title("Queues · Quota governance")
    banner = page.get_by_role("banner")
    expect(banner).to_contain_text("Ada Lovelace")
    expect(banner).to_contain_text("Platform admin")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link")).to_have_text(
        ["Queues", "Policies", "History", "Exceptions", "Knowledge", "Jobs", "Dashboard"]
    )
    expect(nav.get_by_role("link", name="Queues")).to_have_attribute("aria-current", "page")
    assert page.locator("main").count() == 1
    assert_accessible(page)

    # The skip link is the first stop of the keyboard and moves focus into <main>.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to main content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()

    nav.get_by_role("link", name="Jobs").click()
    expect(page).to_have_url(re.compile(r"/jobs/$"))
    expect(nav.get_by_role("link", name="Jobs")).to_have_attribute("aria-current", "page")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    page.goto("/queues/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/queues/$"))


def test_a_wrong_password_is_explained_on_the_login_page(page, admin_user, assert_accessible):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()

    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Please enter a correct username and password")
    expect(alert).to_contain_text("try again")
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    expect(page.get_by_label("Username")).to_have_value("ada")
    assert_accessible(page)


def test_error_pages_say_what_to_do_next(page, live_server, admin_user, login, assert_accessible):
    page.goto("/no-such-page/")
    expect(page.get_by_role("heading", level=1)).to_have_text("We could not find that page")
    expect(page.get_by_role("main").get_by_role("link", name="Log in")).to_be_visible()
    assert_accessible(page)

    login(page, live_server, "ada", PASSWORD, next="/queues/")
    response = page.goto("/no-such-page/")
    assert response.status == 404
    expect(page.get_by_role("main").get_by_role("link", name="Go to Queues")).to_be_visible()
    expect(page.get_by_role("banner")).to_contain_text("Ada Lovelace")
    assert_accessible(page)

    response = page.goto("/forbidden/")
    assert response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("You do not have access to this page")
    expect(page.get_by_role("main")).to_contain_text("ask a platform admin")
    assert_accessible(page)


def test_messages_are_announced(page, live_server, admin_user, login):
    login(page, live_server, "ada", PASSWORD, next="/queues/?message=Share%20saved")
    expect(page.get_by_role("status")).to_have_text("Share saved")


def test_glossary_terms_explain_themselves_on_focus_and_hover(page, live_server, admin_user, login):
    login(page, live_server, "ada", PASSWORD, next="/queues/")
    term = page.locator(".term__label", has_text="LEND_AND_BORROW")
    tooltip = page.locator(".term", has=term).get_by_role("tooltip")
    expect(tooltip).to_be_hidden()
    expect(term).to_have_accessible_description(re.compile(r"^The share lends its idle"))

    term.focus()
    expect(tooltip).to_be_visible()
    page.keyboard.press("Escape")
    expect(tooltip).to_be_hidden()
    page.keyboard.press("Tab")

    page.get_by_role("heading", level=1).hover()
    page.locator(".term__label", has_text="borrow limit").hover()
    explained = page.get_by_role("tooltip").filter(has_text="A percent of the share's own limit")
    expect(explained).to_be_visible()


@pytest.mark.parametrize("browser_context_args", [{"timezone_id": "Asia/Tokyo"}])
def test_charts_render_and_htmx_swaps_are_enhanced(
    page, live_server, admin_user, login, assert_accessible
):
    login(page, live_server, "ada", PASSWORD, next="/chart/")
    expect(page.locator("[data-figure-id=figure-usage] .main-svg").first).to_be_visible()

    # A POST swap: htmx sends the CSRF token from base.html, app.js draws the new chart
    # and shows its time in the browser's zone, keeping UTC on hover.
    page.get_by_role("button", name="Load another chart").click()
    expect(page.locator("[data-figure-id=figure-more] .main-svg").first).to_be_visible()
    time = page.locator("#more time")
    expect(time).to_have_text(re.compile(r"GMT\+9$"))
    expect(time).to_have_attribute("title", re.compile(r" UTC$"))
    assert_accessible(page)
