"""The 12-month trend in real Chromium: a month without figures is drawn as a gap with
a "no figures" note (no bar, the line broken there), and a partial month says so."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month, previous_month
from tests.factories import UserFactory
from tests.governance.dashboards.conftest import load_into_db, scenario_document

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"


def test_a_month_without_figures_is_a_marked_gap(page, live_server, login):
    last = last_full_month(timezone.now())
    gap = previous_month(last)
    first = previous_month(gap)
    # A queue from the 3rd of `first` on; `gap` is never computed.
    origin = dt.datetime.combine(first, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
    load_into_db(scenario_document("01-walkthrough-borrow-reclaim-priority.json"), origin=origin)
    for month in (first, last):
        rollups_refresh(month=month)
    UserFactory(username="leader", password=PASSWORD, roles=["leadership"])
    login(page, live_server, "leader", PASSWORD)

    page.goto(f"{live_server.url}/dashboard/?month={first:%Y-%m}")
    expect(page.locator("[data-partial]")).to_contain_text("days measured")
    page.goto(f"{live_server.url}/dashboard/?month={last:%Y-%m}")
    chart = page.locator('[data-figure-id="figure-trend"]')
    chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
    expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
    notes = chart.locator(".annotation-text", has_text="no figures")
    expect(notes).to_have_count(12 - 2)
    ticks = chart.locator(".xtick text")
    expect(ticks.filter(has_text=f"{first:%b %Y} (")).to_have_count(1)  # days measured
    expect(ticks.filter(has_text=f"{gap:%b %Y}")).to_have_count(1)
