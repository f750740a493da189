"""The Content-Security-Policy in real Chromium: the dashboard and a what-if comparison
draw their Plotly charts, htmx pages work, and the API docs (Swagger UI) start, with no
violation reported. A violation also shows as a console error, which fails any browser
test (tests/browser/conftest.py); here the page's own violation events are read too."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month
from governance.whatif import services, tasks
from tests.factories import UserFactory, aws_sample_queue
from tests.governance.dashboards.conftest import load_into_db, scenario_document
from tests.governance.whatif.conftest import record_jobs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


@pytest.fixture
def admin_page(page, live_server, login):
    page.add_init_script(RECORD_VIOLATIONS)
    UserFactory(username="platform", password=PASSWORD, roles=["admins", "leadership"])
    login(page, live_server, "platform", PASSWORD)
    return page


def assert_no_violation(page) -> None:
    assert page.evaluate("window.__cspViolations") == []


def test_every_page_carries_the_policy(client, admin):
    client.force_login(admin)
    policy = client.get("/").headers.get("Content-Security-Policy") or client.get(
        "/queues/"
    ).headers.get("Content-Security-Policy")
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "unsafe-eval" not in policy
    assert "object-src 'none'" in policy and "frame-ancestors 'none'" in policy


def test_dashboard_charts_draw_under_the_policy(admin_page, live_server):
    month = last_full_month(timezone.now())
    origin = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
    load_into_db(scenario_document("01-walkthrough-borrow-reclaim-priority.json"), origin=origin)
    rollups_refresh(month=month)
    response = admin_page.goto(f"{live_server.url}{reverse('dashboard')}?month={month:%Y-%m}")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    chart = admin_page.locator('[data-figure-id="figure-turnaround"]')
    chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
    expect(chart).to_have_attribute("data-plotted", "", timeout=15_000)
    expect(chart.locator(".main-svg").first).to_be_visible()
    # The mode bar (plotly's injected buttons and styles) works too.
    chart.hover()
    expect(chart.locator(".modebar").first).to_be_attached()
    assert_no_violation(admin_page)


def test_whatif_results_draw_under_the_policy(admin_page, live_server, admin):
    queue = aws_sample_queue()
    record_jobs(queue)
    comparison = services.comparison_create(actor=admin, queue=queue, title="csp")
    services.comparison_run(actor=admin, comparison=comparison)
    assert tasks.run_comparison(comparison.pk) == "DONE"
    admin_page.goto(f"{live_server.url}{reverse('whatif-detail', args=[comparison.pk])}")
    for figure in ("figure-turnaround", "figure-utilisation"):
        chart = admin_page.locator(f'[data-figure-id="{figure}"]')
        chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
        expect(chart).to_have_attribute("data-plotted", "", timeout=15_000)
        expect(chart.locator(".main-svg").first).to_be_visible()
    assert_no_violation(admin_page)


def test_htmx_swaps_work_under_the_policy(admin_page, live_server):
    aws_sample_queue()
    admin_page.goto(f"{live_server.url}{reverse('history')}")
    indicator = admin_page.locator("#history-loading")
    expect(indicator).to_be_hidden()  # app.css hides it; htmx injects no <style>
    assert admin_page.evaluate("document.querySelectorAll('head style').length") == 0
    assert_no_violation(admin_page)


def test_the_api_docs_start_under_the_policy(admin_page, live_server):
    admin_page.goto(f"{live_server.url}/api/docs/")
    expect(admin_page.locator(".swagger-ui .info .title")).to_contain_text("Quota governance API")
    expect(admin_page.locator(".opblock").first).to_be_visible()
    assert_no_violation(admin_page)
