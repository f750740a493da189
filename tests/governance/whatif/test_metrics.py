"""Plain-word differences and the figures (valid Plotly)."""

from __future__ import annotations

import plotly.graph_objects as go

from governance.whatif import figures
from governance.whatif.metrics import differences, share_sentences


def figures_of(**changes):
    base = {
        "waiting_mean": 1000,
        "turnaround_p90": 7200,
        "lost_gpu_seconds": 0,
        "reclaims": 0,
        "never_ran": 0,
    }
    return base, {**base, **changes}


def test_sentences_name_the_team_and_say_how_much():
    current, draft = figures_of(waiting_mean=600, lost_gpu_seconds=12 * 3600, reclaims=2)
    assert share_sentences("qs2 (team vision)", current, draft) == [
        "qs2 (team vision) waits 40% less",
        "qs2 (team vision) loses 12.0 GPU-hours more to preemptions",
        "qs2 (team vision) has 2 more jobs reclaimed",
    ]


def test_small_changes_are_not_news():
    current, draft = figures_of(waiting_mean=1020, turnaround_p90=7300)
    assert share_sentences("qs1", current, draft) == []


def test_differences_end_with_the_fleet_and_read_as_sentences():
    current, draft = figures_of(never_ran=1)
    lines = differences(
        current={"shares": {"qs1": current}, "overall": {"utilisation": 0.55}},
        draft={"shares": {"qs1": draft}, "overall": {"utilisation": 0.62}},
        labels={"qs1": "qs1 (team a)"},
    )
    assert lines == [
        "1 more job of qs1 (team a) could never run.",
        "The fleet is busy 62% of the time instead of 55%.",
    ]
    same = differences(
        current={"shares": {"qs1": current}, "overall": {"utilisation": 0.5}},
        draft={"shares": {"qs1": current}, "overall": {"utilisation": 0.5}},
        labels={},
    )
    assert same == ["Both policies give the same outcome on this workload."]
    quiet = differences(
        current={"shares": {"qs1": current}, "overall": {"utilisation": 0.044}},
        draft={"shares": {"qs1": current}, "overall": {"utilisation": 0.044}},
        labels={},
    )
    assert quiet == [
        "Both policies give the same outcome on this workload: the fleet is busy 4% of the "
        "time, so no share waits for capacity another holds. Raise the GPU demand scale "
        "(traces) or choose a busier period to see where the policies differ."
    ]


def test_figures_are_valid_plotly():
    stats = {"min": 60, "q1": 600, "median": 1200, "q3": 3600, "p90": 5000, "max": 7200}
    box = figures.turnaround_figure(
        [
            {"label": "qs1", "current": stats, "draft": None},
            {"label": "qs2", "current": stats, "draft": stats},
        ]
    )
    go.Figure(box)  # raises on an invalid property
    assert [trace["x"] for trace in box["data"]] == [["qs1", "qs2"], ["qs2"]]
    line = figures.utilisation_figure(bin_seconds=3600, current=[0.5, 1.0], draft=[0.25, 0.75])
    go.Figure(line)
    assert line["data"][0]["y"] == [50.0, 100.0]
    assert line["data"][1]["x"] == [0.5, 1.5]
