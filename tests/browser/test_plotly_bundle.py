"""Every chart the pages emit draws with the plotly.js they are served (issue 26 point 5).

The pages load plotly's partial bundle (config/staticfiles.py), which registers only some
trace types. plotly.js draws a trace of a type it lacks as an invisible scatter, with no
console message at all, so the console-error check of the browser harness would not
catch one: each drawn chart's traces are compared with the types its figure JSON asks
for, on the dashboard (all nine charts) and on a what-if's result page, in Chromium.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from config.staticfiles import node_asset
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month
from governance.whatif import services, tasks
from tests.factories import UserFactory, aws_sample_queue
from tests.governance.dashboards.conftest import load_into_db, scenario_document
from tests.governance.whatif.conftest import record_jobs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def dashboard_month(live_server):
    month = last_full_month(timezone.now())
    origin = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=3)
    load_into_db(scenario_document("01-walkthrough-borrow-reclaim-priority.json"), origin=origin)
    rollups_refresh(month=month)
    UserFactory(username="platform", password=PASSWORD, roles=["admins", "leadership"])
    return f"{live_server.url}{reverse('dashboard')}?month={month:%Y-%m}"


# For each chart: the types its figure JSON declares (plotly's default is scatter) and
# the types plotly.js drew, with whether each trace is visible; plus every trace type
# the loaded bundle registers.
DRAWN = """() => ({
  registered: Object.keys(Plotly.PlotSchema.get().traces),
  charts: [...document.querySelectorAll("[data-plotly-figure]")].map((element) => {
    const figure = JSON.parse(document.getElementById(element.dataset.figureId).textContent);
    return {
      id: element.dataset.figureId,
      declared: (figure.data || []).map((trace) => trace.type || "scatter"),
      drawn: (element._fullData || []).map((trace) => [trace.type, trace.visible]),
      hidden: (figure.data || []).map((trace) => trace.visible === false),
    };
  }),
})"""


def draw_every_chart(page) -> dict:
    charts = page.locator("[data-plotly-figure]")
    assert charts.count() > 0
    for index in range(charts.count()):
        chart = charts.nth(index)
        chart.scroll_into_view_if_needed()
        expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
        expect(chart.locator(".main-svg").first).to_be_attached(timeout=30_000)
    return page.evaluate(DRAWN)


def unknown_traces(drawn: dict) -> list[str]:
    problems = []
    for chart in drawn["charts"]:
        for index, declared in enumerate(chart["declared"]):
            if declared not in drawn["registered"]:
                problems.append(f"{chart['id']} trace {index}: {declared!r} is not in the bundle")
            elif index >= len(chart["drawn"]):
                problems.append(f"{chart['id']} trace {index}: not drawn")
            else:
                kind, visible = chart["drawn"][index]
                if kind != declared or (visible is False and not chart["hidden"][index]):
                    problems.append(
                        f"{chart['id']} trace {index}: declared {declared!r}, drawn "
                        f"{kind!r} (visible {visible})"
                    )
    return problems


def served_bundle_traces(drawn: dict) -> None:
    """The bundle the page loaded is the partial one when npm installed it."""
    if node_asset("vendor/plotly.min.js") is not None:
        assert "bar" in drawn["registered"] and "box" in drawn["registered"]
        # Trace types of the full bundle only: their absence shows it is the partial.
        assert not {"scattergl", "sankey", "choropleth"} & set(drawn["registered"])


def test_every_dashboard_chart_draws_with_the_served_bundle(
    page, live_server, login, dashboard_month
):
    login(page, live_server, "platform", PASSWORD)
    page.goto(dashboard_month)
    drawn = draw_every_chart(page)
    assert len(drawn["charts"]) == 9
    assert {kind for chart in drawn["charts"] for kind in chart["declared"]} >= {
        "bar",
        "box",
        "scatter",
    }
    assert not unknown_traces(drawn), "\n".join(unknown_traces(drawn))
    served_bundle_traces(drawn)


def test_every_whatif_chart_draws_with_the_served_bundle(page, live_server, login):
    admin = UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    queue = aws_sample_queue()
    record_jobs(queue)
    comparison = services.comparison_create(actor=admin, queue=queue, title="bundle")
    services.comparison_run(actor=admin, comparison=comparison)
    assert tasks.run_comparison(comparison.pk) == "DONE"
    login(page, live_server, "platform", PASSWORD)
    page.goto(f"{live_server.url}{reverse('whatif-detail', args=[comparison.pk])}")
    drawn = draw_every_chart(page)
    assert [chart["id"] for chart in drawn["charts"]] == [
        "figure-turnaround",
        "figure-utilisation",
    ]
    assert not unknown_traces(drawn), "\n".join(unknown_traces(drawn))
    served_bundle_traces(drawn)


def test_a_trace_type_outside_the_bundle_is_caught(page, live_server, login, dashboard_month):
    """The check above can fail: plotly.js draws a type it lacks as an invisible
    scatter without a word, and unknown_traces reports it."""
    login(page, live_server, "platform", PASSWORD)
    page.goto(dashboard_month)
    drawn = draw_every_chart(page)
    probe = page.evaluate(
        """() => { const probe = document.createElement("div");
        document.body.appendChild(probe);
        return Plotly.newPlot(probe, [{type: "no-such-trace"}]).then(
          (element) => element._fullData.map((t) => [t.type, t.visible])); }"""
    )
    assert probe == [["scatter", False]]
    drawn["charts"] = [
        {"id": "probe", "declared": ["no-such-trace"], "hidden": [False], "drawn": probe}
    ]
    assert unknown_traces(drawn) == ["probe trace 0: 'no-such-trace' is not in the bundle"]
    drawn["registered"].append("no-such-trace")  # as if registered: the drawn type differs
    assert unknown_traces(drawn) == [
        "probe trace 0: declared 'no-such-trace', drawn 'scatter' (visible False)"
    ]
