"""Charts for people, in real Chromium (issue 26 point 5).

- "Turnaround by share" draws one category per share (both boxes side by side in it),
  not every share twice.
- At 390 px (a phone) no chart's title or legend box overlaps another text box of the
  chart (tick labels, axis titles, notes) or is clipped by the chart's box; the same on
  the what-if result page. Boxes are the browser's own (getBoundingClientRect).
- Charts below the fold are drawn when they near the viewport, not on load.
- axe finds no serious or critical problem at either width.
"""

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
PHONE = {"width": 390, "height": 844}
DESK = {"width": 1280, "height": 800}

# Every text box of a drawn chart, by kind: the title, the legend (its whole box), and
# the others (axis titles, tick labels, notes). Plus the chart's own box.
TEXT_BOXES = """(element) => {
  const rect = (node) => {
    const box = node.getBoundingClientRect();
    return {x: box.left, y: box.top, right: box.right, bottom: box.bottom,
            w: box.width, h: box.height};
  };
  const visible = (node) => { const box = node.getBoundingClientRect();
    return box.width > 0 && box.height > 0; };
  const named = (selector, kind) => [...element.querySelectorAll(selector)]
    .filter(visible).map((node) => ({kind, text: node.textContent, ...rect(node)}));
  return {
    chart: rect(element.querySelector(".main-svg")),
    title: named(".gtitle", "title"),
    legend: named(".legend .bg", "legend"),
    others: [
      ...named(".g-xtitle text, .g-ytitle text, .g-y2title text", "axis title"),
      ...named(".xtick text, .ytick text, .y2tick text", "tick label"),
      ...named(".annotation-text", "note"),
    ],
  };
}"""


def overlap(a: dict, b: dict) -> bool:
    slack = 0.5  # sub-pixel antialiasing of adjacent boxes
    return (
        a["x"] < b["right"] - slack
        and b["x"] < a["right"] - slack
        and a["y"] < b["bottom"] - slack
        and b["y"] < a["bottom"] - slack
    )


def inside(box: dict, frame: dict) -> bool:
    return (
        box["x"] >= frame["x"] - 0.5
        and box["right"] <= frame["right"] + 0.5
        and box["y"] >= frame["y"] - 0.5
        and box["bottom"] <= frame["bottom"] + 0.5
    )


def chart_problems(chart) -> list[str]:
    chart.scroll_into_view_if_needed()
    expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
    boxes = chart.evaluate(TEXT_BOXES)
    name = chart.get_attribute("data-figure-id")
    problems = []
    checked = boxes["title"] + boxes["legend"]
    for box in checked:
        if not inside(box, boxes["chart"]):
            problems.append(
                f"{name}: the {box['kind']} {box['text']!r:.60} is clipped "
                f"({box['x']:.0f},{box['y']:.0f})-({box['right']:.0f},{box['bottom']:.0f}) in "
                f"({boxes['chart']['x']:.0f},{boxes['chart']['y']:.0f})-({boxes['chart']['right']:.0f},{boxes['chart']['bottom']:.0f})"
            )
    for index, box in enumerate(checked):
        for other in checked[index + 1 :] + boxes["others"]:
            if overlap(box, other):
                problems.append(
                    f"{name}: the {box['kind']} {box['text']!r:.40} overlaps the "
                    f"{other['kind']} {other['text']!r:.40}"
                )
    return problems


@pytest.fixture
def dashboard_month(live_server):
    month = last_full_month(timezone.now())
    origin = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
    load_into_db(scenario_document("01-walkthrough-borrow-reclaim-priority.json"), origin=origin)
    rollups_refresh(month=month)
    UserFactory(username="platform", password=PASSWORD, roles=["admins", "leadership"])
    return f"{live_server.url}{reverse('dashboard')}?month={month:%Y-%m}"


def test_turnaround_draws_one_category_per_share(page, live_server, login, dashboard_month):
    login(page, live_server, "platform", PASSWORD)
    page.goto(dashboard_month)
    chart = page.locator('[data-figure-id="figure-turnaround"]')
    chart.scroll_into_view_if_needed()
    expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
    traces = chart.evaluate("(element) => element.data.map((trace) => trace.x)")
    assert len(traces) == 2  # within limit and borrowed, both in this scenario
    for x in traces:
        assert len(x) == len(set(x)), x  # one box per share in each trace
    categories = {name for x in traces for name in x}
    ticks = chart.locator(".xtick text")
    expect(ticks).to_have_count(len(categories))  # each share labelled once
    # The n of each box is on the share's label, not part of the category.
    assert not any("(n=" in name for name in categories), categories
    expect(ticks.first).to_contain_text("n=")


@pytest.mark.slow
def test_titles_and_legends_fit_a_phone(
    page, live_server, login, assert_accessible, dashboard_month
):
    page.set_viewport_size(PHONE)
    login(page, live_server, "platform", PASSWORD)
    page.goto(dashboard_month)
    charts = page.locator("[data-plotly-figure]")
    # On a phone the charts start below the key figures: none is drawn on load.
    expect(charts.first).not_to_have_attribute("data-plotted", "")
    charts.first.scroll_into_view_if_needed()
    expect(charts.first).to_have_attribute("data-plotted", "", timeout=30_000)
    # plotly.js is there now; the last chart, screens below, waits until it nears.
    expect(charts.last).not_to_have_attribute("data-plotted", "")
    problems = []
    for index in range(charts.count()):
        problems += chart_problems(charts.nth(index))
    assert not problems, "\n".join(problems)
    assert page.locator(".legend .bg").count() >= 3  # the legends were checked too
    assert_accessible(page)
    page.set_viewport_size(DESK)
    page.reload()
    charts.first.scroll_into_view_if_needed()
    expect(charts.first).to_have_attribute("data-plotted", "", timeout=30_000)
    assert_accessible(page)


@pytest.mark.slow
def test_whatif_charts_fit_a_phone(page, live_server, login, assert_accessible):
    admin = UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    queue = aws_sample_queue()
    record_jobs(queue)
    comparison = services.comparison_create(actor=admin, queue=queue, title="phone")
    services.comparison_run(actor=admin, comparison=comparison)
    assert tasks.run_comparison(comparison.pk) == "DONE"
    page.set_viewport_size(PHONE)
    login(page, live_server, "platform", PASSWORD)
    page.goto(f"{live_server.url}{reverse('whatif-detail', args=[comparison.pk])}")
    problems = []
    for figure in ("figure-turnaround", "figure-utilisation"):
        problems += chart_problems(page.locator(f'[data-figure-id="{figure}"]'))
    assert not problems, "\n".join(problems)
    assert_accessible(page)
    page.set_viewport_size(DESK)
    page.reload()
    expect(page.locator('[data-figure-id="figure-turnaround"]')).to_have_attribute(
        "data-plotted", "", timeout=30_000
    )
    assert_accessible(page)
