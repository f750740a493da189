""" "View as JSON / YAML" in real Chromium at 1440 and 390 px (issue 28, point 4).

On each of the six pages (queue, share, job, job definition, exception request,
knowledge article) an admin opens the panel: it is fetched then (not with the page),
its JSON and its YAML both equal what the API answers the same session at the object's
detail URL, the copy button puts the JSON on the clipboard and says so, the page does
not scroll sideways, and axe finds no serious or critical problem with the panel open.
A lead of another team gets no panel data for team A's exception request.
"""

from __future__ import annotations

import json

import pytest
import yaml
from playwright.sync_api import expect

from tests.as_data_objects import as_data_objects
from tests.factories import UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "as-data-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {
        "viewport": {"width": width, "height": 900},
        "permissions": ["clipboard-read", "clipboard-write"],
    }


def _user(username: str, role: str):
    user = UserFactory(username=username, roles=[role])
    user.set_password(PASSWORD)
    user.save()
    return user


@pytest.fixture
def fleet():
    """Team A's share, job, definition, exception request and an article; a lead of
    another team."""
    queue = aws_sample_queue()
    admin = _user("ada", "admins")
    made = as_data_objects(
        queue,
        admin=admin,
        lead_a=_user("lena", "team_leads"),
        lead_b=_user("bo", "team_leads"),
        owner=UserFactory(username="omar", roles=["exception_owners"]),
        name="resnet",
        justification="Launch “fine-tune” before the review: " + "long-word" * 30,
        environment={"DATA_ROOT": "/mnt/datasets/imagenet"},
        article_body="Because *deadlines*.",
    )
    qs1, job, definition = made.share, made.job, made.definition
    request, article = made.request, made.article
    return {
        "queue": (f"/queues/{queue.pk}/", f"/api/v1/queues/{queue.pk}/"),
        "share": (f"/shares/{qs1.pk}/edit/", f"/api/v1/shares/{qs1.pk}/"),
        "job": (f"/jobs/{job.pk}/", f"/api/v1/jobs/{job.pk}/"),
        "definition": (
            f"/jobs/definitions/{definition.pk}/",
            f"/api/v1/job-definitions/{definition.pk}/",
        ),
        "exception": (f"/exceptions/{request.pk}/", f"/api/v1/exception-requests/{request.pk}/"),
        "article": (f"/knowledge/{article.slug}/", f"/api/v1/knowledge/articles/{article.pk}/"),
        "request_pk": request.pk,
    }


def api_json(page, path: str):
    """What the API answers this browser session at `path`."""
    return page.request.get(path, headers={"Accept": "application/json"}).json()


def assert_fits(panel, width):
    """The open panel stays inside the viewport: long lines scroll inside their block.
    (The page around it is other tests' business: the definition page's facts were
    507 px wide at 390 px before this panel existed.)"""
    box = panel.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"panel {box} at {width} px"
    for block in panel.locator("pre").all():
        box = block.bounding_box()
        assert box["x"] + box["width"] <= width, f"{block.get_attribute('id')}: {box}"


@pytest.mark.slow
def test_each_object_as_data_equals_the_api_and_copies(
    page, live_server, login, assert_accessible, fleet, width
):
    login(page, live_server, "ada", PASSWORD, next="/")
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if "/data/" in r.url else None)
    for kind in ("queue", "share", "job", "definition", "exception", "article"):
        page_path, api_path = fleet[kind]
        fetched.clear()
        page.goto(page_path)
        panel = page.locator("details.as-data")
        expect(panel).to_have_count(1)
        assert fetched == [], f"{kind}: the data was fetched before the panel was opened"

        panel.get_by_text("View as JSON / YAML").click()
        code = panel.locator("pre[data-format=json]")
        expect(code).to_be_visible()
        assert len(fetched) == 1, kind
        expected = api_json(page, api_path)
        assert json.loads(code.inner_text()) == expected, kind
        assert yaml.safe_load(panel.locator("pre[data-format=yaml]").inner_text()) == expected

        copy = panel.get_by_role("button", name="Copy JSON")
        expect(copy).to_be_visible()
        copy.click()
        expect(panel.get_by_role("status")).to_have_text("JSON copied to the clipboard.")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert json.loads(copied) == expected, kind
        panel.get_by_role("button", name="Copy YAML").click()
        expect(panel.get_by_role("status")).to_have_text("YAML copied to the clipboard.")
        assert yaml.safe_load(page.evaluate("navigator.clipboard.readText()")) == expected

        # The text is selectable too, and the fallback links name the formats.
        expect(panel.get_by_role("link", name="Download YAML")).to_have_attribute(
            "href", f"{panel.get_attribute('hx-get')}?format=yaml"
        )
        assert_accessible(page)
        assert_fits(panel, width)


def test_the_yaml_downloads_and_the_json_opens(page, live_server, login, fleet, width):
    login(page, live_server, "ada", PASSWORD, next=fleet["queue"][0])
    panel = page.locator("details.as-data")
    panel.get_by_text("View as JSON / YAML").click()
    expected = api_json(page, fleet["queue"][1])
    with page.expect_download() as download:
        panel.get_by_role("link", name="Download YAML").click()
    assert download.value.suggested_filename.endswith(".yaml")
    with open(download.value.path(), encoding="utf-8") as handle:
        assert yaml.safe_load(handle) == expected
    # The JSON link, fetched with the page's session (opened in a tab, Chromium would
    # ask the server for /favicon.ico, a 404 the harness counts as an error).
    href = panel.get_by_role("link", name="Open as JSON").first.get_attribute("href")
    opened = page.request.get(href)
    assert opened.headers["content-type"] == "application/json"
    assert opened.json() == expected


def test_another_teams_lead_gets_no_data(page, live_server, login, assert_accessible, fleet, width):
    login(page, live_server, "bo", PASSWORD, next="/")
    response = page.goto(f"/data/exception/{fleet['request_pk']}/")
    assert response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("You do not have access to this page")
    expect(page.locator("pre")).to_have_count(0)
    assert api_json(page, fleet["exception"][1])["detail"] == (
        "you may not see this exception request"
    )
    assert_accessible(page)


def test_the_page_with_both_formats(page, live_server, login, assert_accessible, fleet, width):
    """The panel's own page (its fallback link): the same data, copyable, accessible."""
    login(page, live_server, "ada", PASSWORD, next=fleet["share"][0])
    # In the closed panel: read from the DOM, not from what is on screen.
    href = page.locator("details.as-data a", has_text="Page with both").get_attribute("href")
    page.goto(href)
    expect(page.get_by_role("heading", level=1)).to_have_text("Share qs1 as data")
    expected = api_json(page, fleet["share"][1])
    assert json.loads(page.locator("pre[data-format=json]").inner_text()) == expected
    page.get_by_role("button", name="Copy YAML").click()
    expect(page.get_by_role("status").last).to_have_text("YAML copied to the clipboard.")
    assert yaml.safe_load(page.evaluate("navigator.clipboard.readText()")) == expected
    assert_accessible(page)
    assert_fits(page.locator("main"), width)


def test_without_javascript_the_links_still_serve_the_data(browser, live_server, fleet, width):
    context = browser.new_context(
        base_url=live_server.url,
        java_script_enabled=False,
        viewport={"width": width, "height": 900},
    )
    page = context.new_page()
    try:
        page.goto(f"/accounts/login/?next={fleet['job'][0]}")
        page.get_by_label("Username").fill("ada")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        panel = page.locator("details.as-data")
        panel.get_by_text("View as JSON / YAML").click()
        panel.get_by_role("link", name="Page with both").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text("as data")
        expected = page.request.get(fleet["job"][1]).json()
        assert json.loads(page.locator("pre[data-format=json]").inner_text()) == expected
        # Without JavaScript a copy button could do nothing: none is shown.
        expect(page.get_by_role("button", name="Copy JSON")).to_have_count(0)
    finally:
        context.close()
