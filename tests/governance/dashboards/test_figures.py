"""The figure builders are pure and return figures Plotly accepts."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import pytest

from governance.dashboards import figures
from governance.dashboards.selectors import duration_stats, month_weeks

STATS = duration_stats([600, 1200, 3600, 7200, 36000])
WEEKS = [
    {
        "week": week.isoformat(),
        "preemptions": {"reclaim": 3, "priority": 1, "capacity_change": 0},
        "lost_gpu_seconds": 7200,
        "policy_edits": 2,
        "exception_changes": 1,
        "exceptions_filed": {"Conference deadline": 1},
    }
    for week in month_weeks(dt.date(2025, 3, 1))
]

BUILT = {
    "turnaround": figures.turnaround_boxes(
        [
            {"name": "qs1", "within": STATS, "borrowed": STATS},
            {"name": "qs2", "within": STATS, "borrowed": {"n": 0}},
        ]
    ),
    "lender": figures.lender_wait_bars([{"name": "qs2", "stats": STATS}]),
    "preemptions": figures.preemptions_weekly(WEEKS),
    "recovery": figures.recovery_funnel(preempted=10, resumed=9, succeeded=8, failed=2),
    "policy": figures.policy_weekly(WEEKS),
}


@pytest.mark.parametrize("name", BUILT)
def test_plotly_accepts_the_figure(name):
    go.Figure(BUILT[name])  # raises on any property Plotly does not know


def test_turnaround_boxes_are_in_hours_and_skip_empty_groups():
    within, borrowed = BUILT["turnaround"]["data"]
    assert within["x"] == ["qs1", "qs2"]
    assert borrowed["x"] == ["qs1"]
    assert within["median"] == [1.0, 1.0]  # 3600 s


def test_march_2025_has_six_weeks_starting_on_the_first_then_mondays():
    weeks = month_weeks(dt.date(2025, 3, 1))
    assert [w.day for w in weeks] == [1, 3, 10, 17, 24, 31]
