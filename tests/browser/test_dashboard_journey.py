"""The leadership journey in real Chromium: `leader` opens the dashboard, sees last
month's signals with their n and 12-month sparklines, picks the month before and a team,
sees every chart drawn (an empty one saying so), downloads a CSV with its units row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month, previous_month
from tests.factories import UserFactory
from tests.governance.dashboards.conftest import load_into_db, scenario_document

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
CHARTS = ("capacity", "turnaround", "waiting", "lost", "recovery", "policy", "trend")


@pytest.fixture
def two_months():
    last = last_full_month(timezone.now())
    before = previous_month(last)
    for month, name in (
        (last, "01-walkthrough-borrow-reclaim-priority.json"),
        (before, "25-restart-overhead-and-checkpoints.json"),
    ):
        origin = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
        load_into_db(scenario_document(name), origin=origin, queue_name=f"queue-{month:%Y-%m}")
        rollups_refresh(month=month)
    return last, before


def expect_charts_drawn(page) -> None:
    # plotly.js is fetched after the page has loaded (data-plotly-src) and takes seconds
    # to compile on a busy machine: the first chart may take that long.
    for dataset in CHARTS:
        chart = page.locator(f'[data-figure-id="figure-{dataset}"]')
        chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
        expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
        expect(chart.locator(".main-svg").first).to_be_visible()


@pytest.mark.slow
def test_leader_reads_two_months_and_downloads_csv(
    page, live_server, login, assert_accessible, two_months
):
    last, before = two_months
    UserFactory(username="leader", password=PASSWORD, roles=["leadership"])
    login(page, live_server, "leader", PASSWORD)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard").click()
    expect(page).to_have_title(f"Dashboard: {last:%B %Y} · Quota governance")
    expect(page.locator(".kpi")).to_have_count(15)
    expect(page.locator(".kpi__n").first).to_contain_text("n = ")
    # Two months of figures: each card's sparkline has a line.
    expect(page.locator(".kpi--turnaround_p50 svg.sparkline polyline")).to_have_count(1)
    expect(page.get_by_text("Which month a figure belongs to.")).to_be_visible()
    expect_charts_drawn(page)
    assert_accessible(page)

    page.get_by_label("Month", exact=True).select_option(f"{before:%Y-%m}")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: f"month={before:%Y-%m}" in url)
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"{before:%B %Y}")
    expect_charts_drawn(page)
    assert_accessible(page)

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Data of “Lost work and preemptions per week” as CSV").click()
    download = download_info.value
    assert download.suggested_filename == f"signals-{before:%Y-%m}-lost.csv"
    lines = Path(download.path()).read_text(encoding="utf-8-sig").splitlines()
    assert lines[0].startswith("week starting,lost reclaim,lost priority,")
    assert lines[1].startswith("date,GPU-hours,GPU-hours,")

    # One team: its row in the team table, and the charts of its shares.
    page.get_by_label("Team", exact=True).select_option(label=f"queue-{before:%Y-%m}-a")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: "team=" in url)
    expect(page.locator(".dashboard__teams tbody tr")).to_have_count(1)
    expect_charts_drawn(page)
    # Its shares lost nothing to a reclaim or a policy edit: the charts say so.
    expect(page.get_by_text("No policy edit and no exception request this month")).to_be_visible()
    assert_accessible(page)


def test_team_lead_cannot_open_the_dashboard(page, live_server, login):
    UserFactory(username="lead", password=PASSWORD, roles=["team_leads"])
    login(page, live_server, "lead", PASSWORD)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Dashboard")).to_have_count(0)
    response = page.goto(f"{live_server.url}/dashboard/")
    assert response.status == 403


def test_anonymous_is_sent_to_login(page, live_server):
    page.goto(f"{live_server.url}/dashboard/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/dashboard/")
