"""The figure builders are pure and return figures Plotly accepts; an empty chart says
so instead of drawing empty axes."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import pytest

from governance.dashboards import figures
from governance.dashboards.formulas import LOST_CAUSES, duration_stats
from governance.dashboards.page import sparkline
from governance.dashboards.selectors.calendar import month_weeks

STATS = duration_stats([600, 1200, 3600, 7200, 36000])
WEEKS = [
    {
        "week": week.isoformat(),
        "preemptions": {"reclaim": 3, "priority": 1, "capacity_change": 0},
        "lost_gpu_hours": {**dict.fromkeys(LOST_CAUSES, 0.0), "reclaim": 2.0, "terminated": 1.5},
        "policy_edits": 2,
        "exception_changes": 1,
        "exceptions_filed": {"Conference deadline": 1},
    }
    for week in month_weeks(dt.date(2025, 3, 1))
]
QUIET_WEEKS = [
    {
        "week": week["week"],
        "preemptions": dict.fromkeys(("reclaim", "priority", "capacity_change"), 0),
        "lost_gpu_hours": dict.fromkeys(LOST_CAUSES, 0.0),
        "policy_edits": 0,
        "exception_changes": 0,
        "exceptions_filed": {},
    }
    for week in WEEKS
]
CAPACITY = {"within_limit": 10.0, "borrowed": 2.0, "idle_lendable": 5.0, "idle_reserved": 1.0}

BUILT = {
    "turnaround": figures.turnaround_boxes(
        [
            {"name": "qs1", "within": STATS, "borrowed": STATS},
            {"name": "qs2", "within": STATS, "borrowed": {"n": 0}},
        ]
    ),
    "capacity": figures.capacity_bars([{"name": "qs1", "gpu_hours": CAPACITY}]),
    "waiting": figures.wait_bars([{"name": "qs2", "stats": STATS}]),
    "reclaim": figures.reclaim_bars(
        [{"name": "qs1", "stats": {"n": 3, "p50": 30, "p90": 120, "max": 120}}]
    ),
    "stops": figures.stop_bars(
        {"immediate": 0.44, "stopped_without_checkpoint": 0.01, "checkpointed_on_notice": 0.0},
        {"immediate": 1, "stopped_without_checkpoint": 1, "checkpointed_on_notice": 1},
    ),
    "lost": figures.lost_weekly(WEEKS),
    "recovery": figures.recovery_funnel(preempted=10, resumed=9, succeeded=8, failed=2),
    "policy": figures.policy_weekly(WEEKS),
    "trend": figures.capacity_trend(
        [
            {"month": "Feb 2025", "gpu_hours": None, "lost_per_1000": None},
            {"month": "Mar 2025", "gpu_hours": CAPACITY, "lost_per_1000": 3.2},
        ]
    ),
}
EMPTY = {
    "turnaround": figures.turnaround_boxes(
        [{"name": "qs1", "within": {"n": 0}, "borrowed": {"n": 0}}]
    ),
    "capacity": figures.capacity_bars([{"name": "qs1", "gpu_hours": dict.fromkeys(CAPACITY, 0)}]),
    "waiting": figures.wait_bars([{"name": "qs1", "stats": {"n": 0}}]),
    "reclaim": figures.reclaim_bars([{"name": "qs1", "stats": {"n": 0}}]),
    "stops": figures.stop_bars(
        dict.fromkeys(("immediate", "stopped_without_checkpoint", "checkpointed_on_notice"), 0.0),
        dict.fromkeys(("immediate", "stopped_without_checkpoint", "checkpointed_on_notice"), 0),
    ),
    "lost": figures.lost_weekly(QUIET_WEEKS),
    "recovery": figures.recovery_funnel(preempted=0, resumed=0, succeeded=0, failed=0),
    "policy": figures.policy_weekly(QUIET_WEEKS),
    "trend": figures.capacity_trend(
        [{"month": "Mar 2025", "gpu_hours": None, "lost_per_1000": None}]
    ),
}


@pytest.mark.parametrize("name", [*BUILT, *(f"empty-{name}" for name in EMPTY)])
def test_plotly_accepts_the_figure(name):
    figure = EMPTY[name[6:]] if name.startswith("empty-") else BUILT[name]
    go.Figure(figure)  # raises on any property Plotly does not know


@pytest.mark.parametrize("name", EMPTY)
def test_an_empty_chart_says_there_is_no_data(name):
    figure = EMPTY[name]
    assert figure["data"] == []
    assert figure["layout"]["annotations"][0]["text"].startswith("No ")
    assert figure["layout"]["yaxis"] == {"visible": False}


def test_turnaround_boxes_are_in_hours_show_n_and_skip_empty_groups():
    within, borrowed = BUILT["turnaround"]["data"]
    # One category per share, both boxes in it; the n of each on the share's label.
    assert within["x"] == ["qs1", "qs2"]
    assert borrowed["x"] == ["qs1"]
    xaxis = BUILT["turnaround"]["layout"]["xaxis"]
    assert xaxis["tickvals"] == ["qs1", "qs2"]
    assert xaxis["ticktext"] == ["qs1<br>n=5 within, 5 borrowed", "qs2<br>n=5 within"]
    assert within["median"] == [1.0, 1.0]  # 3600 s


def test_capacity_bars_hatch_reserved_idle():
    by_name = {trace["name"]: trace for trace in BUILT["capacity"]["data"]}
    assert by_name["Idle, reserved"]["marker"]["pattern"]["shape"] == "/"
    assert by_name["Borrowed"]["x"] == [2.0]


def test_march_2025_has_six_weeks_starting_on_the_first_then_mondays():
    weeks = month_weeks(dt.date(2025, 3, 1))
    assert [w.day for w in weeks] == [1, 3, 10, 17, 24, 31]


def test_sparkline_leaves_a_gap_where_a_month_has_no_figure():
    line = sparkline([1, 2, None, 3, 4, 2])
    assert len(line["segments"]) == 2
    assert line["segments"][0].startswith("0.0,")
    assert sparkline([None, 5]) == {"segments": [], "last": None}


def test_a_change_smaller_than_the_figures_precision_is_no_change():
    from governance.dashboards.page import KPI_BY_KEY, change

    goodput = KPI_BY_KEY["goodput"]
    assert change(goodput, (0.996, 500), (0.994, 500))["text"] == "no change"
    moved = change(goodput, (0.90, 500), (0.95, 500))
    assert (moved["text"], moved["word"]) == ("down 5 points", "worse")
    # Enough observations this month, too few the month before: no verdict.
    assert change(goodput, (0.90, 500), (0.95, 3))["word"] == ""


def test_reclaim_bars_are_in_minutes_with_n():
    p50, p90, longest = BUILT["reclaim"]["data"]
    assert p50["x"] == ["qs1<br>n=3"]
    assert (p50["y"], p90["y"], longest["y"]) == ([0.5], [2.0], [2.0])
