"""The harness of the browser journeys: real headless Chromium driven by Playwright.

Fixtures:
  browser            one Chromium for the whole session (CHROMIUM from tests/conftest.py)
  page               a fresh browser context and page per test, base_url set to the live
                     server (context options: the `browser_context_args` fixture).
                     Console errors and uncaught page errors are collected in
                     `page.console_errors` and fail the test at teardown (a test that
                     expects some sets `page.allow_console_errors = True`). A document
                     that answers 4xx/5xx on purpose (a 404 page under test) is not an error.
  login              login(page, live_server, username, password, next="/") logs in through
                     the real login page and returns once the browser has left it
  assert_accessible  assert_accessible(page) runs axe-core on the current page and fails
                     with a readable list of its serious and critical violations

Journeys use pytest-django's `live_server`, which serves the app from a thread of this
process; mark them `pytest.mark.django_db(transaction=True)` so the server thread sees
the rows the test creates, and `pytest.mark.browser` (skipped or failed, per
tests/conftest.py, when Chromium is missing).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import CHROMIUM

# Playwright's sync API drives the browser from an asyncio event loop that it leaves
# registered as running in the main thread for as long as the session's browser lives.
# Django then refuses every ORM call from this thread (a test creating its users, and
# any test that runs after the first journey) with SynchronousOnlyOperation. Those calls
# are plain synchronous code that only shares the thread with the idle loop, so the
# guard is switched off for the process. It is set at import, before any test runs,
# because the loop outlives the test that started it.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SERIOUS = {"serious", "critical"}


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def browser_context_args():
    """Options of the page's browser context; override (or parametrize) to change them,
    e.g. {"timezone_id": "Asia/Tokyo"} or {"viewport": {"width": 390, "height": 844}}."""
    return {}


@pytest.fixture
def page(browser, live_server, browser_context_args):
    options = {"viewport": {"width": 1280, "height": 800}, **browser_context_args}
    context = browser.new_context(base_url=live_server.url, **options)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.console_errors = []
    page.allow_console_errors = False
    failed_documents: set[str] = set()

    def on_response(response):
        # Chromium logs "Failed to load resource" for a page that answers 404 or 403;
        # when that page is the document the test opened, the status is the point.
        if response.request.resource_type == "document" and response.status >= 400:
            failed_documents.add(response.url)

    def on_console(message):
        if message.type != "error":
            return
        if message.text.startswith("Failed to load resource") and (
            message.location.get("url") in failed_documents
        ):
            return
        where = message.location.get("url", "")
        page.console_errors.append(f"console: {message.text} ({where})")

    page.on("response", on_response)
    page.on("console", on_console)
    page.on("pageerror", lambda error: page.console_errors.append(f"page error: {error}"))
    yield page
    context.close()
    if page.console_errors and not page.allow_console_errors:
        pytest.fail(
            "The browser reported errors:\n" + "\n".join(page.console_errors), pytrace=False
        )


def login(page, live_server, username: str, password: str, next: str = "/") -> None:
    """Log in through the real login form, then land on `next`."""
    page.goto(f"{live_server.url}/accounts/login/?next={next}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def format_violations(violations: list[dict]) -> str:
    lines = []
    for violation in violations:
        lines.append(
            f"- {violation['id']} ({violation['impact']}): {violation['help']}\n"
            f"  {violation['helpUrl']}"
        )
        for node in violation["nodes"]:
            target = " ".join(str(part) for part in node["target"])
            summary = (node.get("failureSummary") or "").replace("\n", " ")
            lines.append(f"    at {target}: {summary}")
    return "\n".join(lines)


def assert_accessible(page, context=None) -> None:
    """axe-core finds no serious or critical violation on the page (or `context` in it)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, context=context)
    violations = [v for v in results.response["violations"] if v.get("impact") in SERIOUS]
    if violations:
        pytest.fail(
            f"axe found {len(violations)} serious or critical accessibility problem(s) "
            f"on {page.url}:\n{format_violations(violations)}",
            pytrace=False,
        )


@pytest.fixture(name="login")
def login_fixture():
    return login


@pytest.fixture(name="assert_accessible")
def assert_accessible_fixture():
    return assert_accessible
