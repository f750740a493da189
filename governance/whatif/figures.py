"""Pure Plotly figure builders of the comparison page (style rule 10).

They take the stored results (governance.whatif.metrics) and return figure JSON,
`{data, layout, config}`, embedded with `json_script` and drawn by static/js/app.js.
Current is the calm blue of the visual language; the draft a dark green, so the two
stay apart for colour-blind readers as well (and are named in the legend).
"""

from __future__ import annotations

from governance.dashboards.figures import box_trace, chart_layout

CURRENT = "#2f6db5"
DRAFT = "#1d6333"
HOUR = 3600.0


def turnaround_figure(rows: list[dict]) -> dict:
    """Turnaround per share, current and draft side by side, in hours: boxes from the
    stored quartiles, whiskers at min and max.

    `rows`: [{"label", "current": quartiles | None, "draft": quartiles | None}]."""
    traces = []
    for key, label, colour, fill in (
        ("current", "Current policy", CURRENT, "rgba(47, 109, 181, 0.3)"),
        ("draft", "Draft policy", DRAFT, "rgba(29, 99, 51, 0.3)"),
    ):
        shown = [(row["label"], row[key]) for row in rows if row[key]]
        traces.append(box_trace(label, shown, colour, fill))
    return {
        "data": traces,
        "layout": chart_layout(
            "Turnaround per share (hours)",
            boxmode="group",
            yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
        ),
        "config": {"displaylogo": False},
    }


def utilisation_figure(*, bin_seconds: float, current: list[float], draft: list[float]) -> dict:
    """Share of the queue's GPUs held over the replay, current and draft."""
    hours = [round((index + 0.5) * bin_seconds / HOUR, 2) for index in range(len(current))]
    traces = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": label,
            "x": hours,
            "y": [round(value * 100, 1) for value in values],
            "line": {"color": colour, "width": 2, "dash": dash},
            "hovertemplate": "%{y:.0f}% at hour %{x}<extra>" + label + "</extra>",
        }
        for label, values, colour, dash in (
            ("Current policy", current, CURRENT, "solid"),
            ("Draft policy", draft, DRAFT, "dash"),
        )
    ]
    return {
        "data": traces,
        "layout": chart_layout(
            "Utilisation over time (% of the queue's GPUs)",
            xaxis={"title": {"text": "hours since the first submission"}},
            yaxis={"title": {"text": "% of GPUs in use"}, "range": [0, 105]},
        ),
        "config": {"displaylogo": False},
    }
