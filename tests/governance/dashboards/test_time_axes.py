"""Honest time axes (issue 26, point 4): a month without figures is a gap in the trend,
never a line drawn through it; a partial month is labelled and not compared as a whole
one; replayed policy is no admin's edit; finished jobs split into succeeded and failed."""

from __future__ import annotations

import csv
import datetime as dt
import io

import plotly.graph_objects as go
import pytest
from django.urls import reverse

from fleet.models import QuotaShare
from governance.dashboards import figures
from governance.dashboards.page import KPI_BY_KEY, change, dashboard_view, days_label
from governance.dashboards.rollups import rollups_read, rollups_refresh
from governance.dashboards.selectors.reads import rollup_scope
from governance.models import PolicyChange
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.test_signals import (
    A_ORIGIN,
    APRIL,
    LEND_BORROW,
    MARCH,
    SHORTAGE,
)

MAY = dt.date(2025, 5, 1)
JUNE = dt.date(2025, 6, 1)
AFTER_JUNE = dt.datetime(2025, 7, 1, tzinfo=dt.UTC)
CAPACITY = {"within_limit": 10.0, "borrowed": 2.0, "idle_lendable": 5.0, "idle_reserved": 1.0}


@pytest.fixture
def lend_borrow(db):
    """Scenario A starts at 22:00 on 31 March (its first month measures 2 hours); April is
    whole; May has no rollup at all; June's shares sit idle."""
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    for month in (MARCH, APRIL, JUNE):
        rollups_refresh(month=month, now=AFTER_JUNE)


def _trend_figure(month, queue_id=None):
    stored = rollups_read(month=month, queue_id=queue_id)
    return dashboard_view(stored=stored, month=month, queue_id=queue_id)


# -- a month without figures is a gap -----------------------------------------------------


def test_a_month_without_a_rollup_is_none_in_the_chart_data_and_says_so(lend_borrow):
    view = _trend_figure(JUNE)
    trend = view["figures"]["trend"]
    go.Figure(trend)  # Plotly accepts it
    x = trend["data"][0]["x"]
    may = x.index("May 2025")
    for bar in trend["data"][:4]:
        assert bar["type"] == "bar" and bar["y"][may] is None
    line = trend["data"][4]
    assert line["y"][may] is None and line["connectgaps"] is False
    # The bars either side are there: June sat idle, and idle capacity counts.
    june = x.index("Jun 2025")
    idle = trend["data"][2]["y"][june]
    # Both shares lend (LEND, LEND_AND_BORROW): 2 + 2 instances of 8 GPUs, 30 days idle.
    assert idle == pytest.approx((2 + 2) * 8 * 30 * 24)
    assert trend["data"][0]["y"][june] == 0
    notes = trend["layout"]["annotations"]
    assert [(note["x"], note["text"]) for note in notes if note["x"] == "May 2025"] == [
        ("May 2025", "no figures")
    ]
    # Every month before March has no figures either, and each says so.
    assert len(notes) == 12 - 3


def test_the_trend_builder_marks_each_missing_month():
    months = [
        {"month": "Feb 2025", "gpu_hours": CAPACITY, "lost_per_1000": 1.0},
        {"month": "Mar 2025", "gpu_hours": None, "lost_per_1000": None},
        {"month": "Apr 2025", "gpu_hours": CAPACITY, "lost_per_1000": 2.0},
    ]
    figure = figures.capacity_trend(months)
    go.Figure(figure)
    assert figure["data"][4]["y"] == [1.0, None, 2.0]
    assert [note["x"] for note in figure["layout"]["annotations"]] == ["Mar 2025"]
    assert figure["layout"]["annotations"][0]["text"] == figures.NO_FIGURES


def test_the_trend_csv_leaves_a_missing_month_empty(client, leadership, lend_borrow):
    client.force_login(leadership)
    response = client.get(reverse("dashboard-csv", args=["trend"]), {"month": "2025-06"})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    header, by_month = rows[0], {row[0]: row for row in rows[2:]}
    assert header[-2:] == ["days measured", "whole month"]
    assert set(by_month["2025-05"][1:]) == {""}  # empty cells, never zeros
    assert by_month["2025-06"][-2:] == ["30.0", "yes"]
    assert by_month["2025-03"][-1] == "no"


# -- partial months -------------------------------------------------------------------------


def test_a_first_month_started_mid_month_is_partial_and_says_how_long(lend_borrow):
    march, _ = rollup_scope(month=MARCH, scope="all")
    assert march["coverage"]["partial"] is True
    assert march["coverage"]["seconds"] == 2 * 3600
    assert march["coverage"]["start"] == A_ORIGIN.isoformat()
    april, _ = rollup_scope(month=APRIL, scope="all")
    assert april["coverage"]["partial"] is False
    assert april["coverage"]["seconds"] == 30 * 86400
    view = _trend_figure(APRIL)
    assert "Mar 2025 (2 hours)" in view["figures"]["trend"]["data"][0]["x"]
    assert "Apr 2025" in view["figures"]["trend"]["data"][0]["x"]


def test_a_partial_month_is_not_compared_as_a_whole_one(client, leadership, lend_borrow):
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": "2025-04"})
    cards = {card["key"]: card for card in response.context["kpis"]}
    # A volume is not set against March's two hours at all.
    assert cards["delivered_gpu_hours"]["change"] == {
        "arrow": "",
        "text": "not compared: March 2025 measures 2 hours",
        "tone": "flat",
        "word": "",
    }
    # A rate shows its change, flagged, and no card says better or worse.
    for card in cards.values():
        assert card["change"]["word"] == "" and card["change"]["arrow"] == ""
    # The sparkline of a volume leaves the partial month out.
    assert "Mar 2025 " in cards["delivered_gpu_hours"]["trend_text"]
    assert "(2 hours measured)" in cards["delivered_gpu_hours"]["trend_text"]
    kpis = client.get(reverse("dashboard-csv", args=["kpis"]), {"month": "2025-04"})
    rows = list(csv.reader(io.StringIO(kpis.content.decode("utf-8-sig"))))
    assert {row[6] for row in rows[2:]} == {"no"}


def test_the_page_of_a_partial_month_labels_it(client, leadership, lend_borrow):
    client.force_login(leadership)
    page = client.get(reverse("dashboard"), {"month": "2025-03"}).content.decode()
    assert "(2 hours measured)" in page
    assert "These figures measure 2 hours of March 2025" in page


@pytest.mark.parametrize(
    ("days", "label"),
    [(1.5, "1.5 days"), (1.0, "1 day"), (29.0, "29 days"), (2 / 24, "2 hours"), (1 / 24, "1 hour")],
)
def test_a_partial_month_says_how_long_it_measures(days, label):
    assert days_label(days) == label


def test_a_rate_of_a_partial_month_is_flagged_without_a_verdict():
    kpi = KPI_BY_KEY["goodput"]
    assert change(kpi, (0.5, 100), (0.9, 100), "June 2025 measures 1.5 days") == {
        "arrow": "",
        "text": "down 40 points; not a whole month: June 2025 measures 1.5 days",
        "tone": "flat",
        "word": "",
    }
    assert change(kpi, (0.5, 100), (0.9, 100))["word"] == "worse"


def test_the_month_under_way_is_partial(db):
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    rollups_refresh(month=APRIL, now=dt.datetime(2025, 4, 2, 12, tzinfo=dt.UTC))
    april, _ = rollup_scope(month=APRIL, scope="all")
    assert april["coverage"]["partial"] is True
    assert april["coverage"]["seconds"] == 1.5 * 86400


# -- replayed policy is no admin's edit -----------------------------------------------------


def test_imported_policy_changes_are_not_counted_as_edits(db):
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    share = QuotaShare.objects.get(name="borrower")
    for cause, day in (
        (PolicyChange.Cause.IMPORT, 5),
        (PolicyChange.Cause.IMPORT, 6),
        (PolicyChange.Cause.EDIT, 7),
    ):
        change_ = PolicyChange.objects.create(
            cause=cause,
            target=PolicyChange.Target.QUEUE,
            queue=share.queue,
            object_repr=str(share.queue),
            before={"capacity": {"gpu": 4}},
            after={"capacity": {"gpu": 4}},
            reason="Recorded history loaded from scenario (load_history)",
        )
        PolicyChange.objects.filter(pk=change_.pk).update(
            created_at=dt.datetime(2025, 4, day, tzinfo=dt.UTC)
        )
    rollups_refresh(month=APRIL)
    april, _ = rollup_scope(month=APRIL, scope=f"q{share.queue_id}")
    assert april["policy_edits"] == 1
    assert april["policy_changes_by_cause"] == {"edit": 1, "import": 2}
    assert sum(week["policy_edits"] for week in april["weeks"]) == 1


# -- finished jobs: succeeded and failed ----------------------------------------------------


@pytest.fixture
def shortage(db):
    """A job terminated (FAILED) and one that succeeds, in March."""
    load_into_db(SHORTAGE)
    rollups_refresh(month=MARCH)


def test_finished_jobs_split_into_succeeded_and_failed(client, leadership, shortage):
    march, _ = rollup_scope(month=MARCH, scope="all")
    assert (march["jobs_succeeded"], march["jobs_failed"], march["jobs_ended"]) == (1, 1, 2)
    client.force_login(leadership)
    body = client.get("/api/v1/signals/", {"month": "2025-03"}).json()
    assert (body["jobs_succeeded"], body["jobs_failed"], body["jobs_ended"]) == (1, 1, 2)
    # Compatibility: jobs_finished keeps its meaning (the jobs that succeeded).
    assert body["jobs_finished"] == 1
    response = client.get(reverse("dashboard-csv", args=["shares"]), {"month": "2025-03"})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    header = rows[0]
    assert "jobs finished" not in header
    totals = {
        name: sum(int(row[header.index(name)]) for row in rows[2:])
        for name in ("jobs succeeded", "jobs failed", "jobs ended")
    }
    assert totals == {"jobs succeeded": 1, "jobs failed": 1, "jobs ended": 2}
    page = client.get(reverse("dashboard"), {"month": "2025-03"}).content.decode()
    assert "Jobs succeeded</th>" in page and "Jobs failed</th>" in page
