"""Pure Plotly figure builders of the dashboard (style rule 10).

Each takes plain data (the rollup figures) and returns figure JSON, `{data, layout,
config}`, which the page embeds with `json_script` and static/js/app.js draws. Plain
dicts rather than plotly.graph_objects: they are what plotly.js reads, and building
them costs nothing on the request path (tests check them against Plotly's schema).

Colours are the one visual language of static/css/app.css: within limit blue,
borrowed amber, preempted / failed red, exceptions purple, done green.
"""

from __future__ import annotations

WITHIN = "#2f6db5"
BORROWED = "#e39b1b"
FAILED = "#c8322f"
EXCEPTION = "#7a3db8"
DONE = "#1d6333"
NEUTRAL = "#6b7785"
# Preemption causes: reclaim is borrowed capacity taken back (amber, as borrowing),
# priority is in-share preemption, a capacity change the fleet shrinking.
CAUSE_COLOURS = {"reclaim": BORROWED, "priority": FAILED, "capacity_change": NEUTRAL}
CAUSE_LABELS = {
    "reclaim": "Reclaim",
    "priority": "Priority (in-share)",
    "capacity_change": "Capacity change",
}
URGENCY_COLOURS = ("#7a3db8", "#a77bd6", "#4b2173", "#c7a9e8", "#5f2e94")
HOUR = 3600.0
FONT = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica Neue, Arial, sans-serif"


def chart_layout(title: str, **extra) -> dict:
    """The layout every chart of the product shares (the dashboard's and what-if's)."""
    layout = {
        "title": {"text": title, "font": {"size": 15}},
        "font": {"family": FONT, "size": 12, "color": "#1f2933"},
        "margin": {"l": 60, "r": 20, "t": 48, "b": 60},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": -0.2},
        "height": 340,
    }
    layout.update(extra)
    return layout


def _figure(data: list, layout: dict) -> dict:
    return {"data": data, "layout": layout, "config": {"displaylogo": False}}


def _hours(seconds) -> float | None:
    return None if seconds is None else round(seconds / HOUR, 2)


def box_trace(label: str, rows: list[tuple[str, dict]], colour: str, fill: str) -> dict:
    """A box trace from precomputed quartiles: `rows` = [(x label, duration stats)] with
    seconds `q1`, `median`, `q3`, `min`, `max` (selectors.duration_stats), shown in hours."""
    return {
        "type": "box",
        "name": label,
        "x": [name for name, _ in rows],
        "q1": [_hours(stats["q1"]) for _, stats in rows],
        "median": [_hours(stats["median"]) for _, stats in rows],
        "q3": [_hours(stats["q3"]) for _, stats in rows],
        "lowerfence": [_hours(stats["min"]) for _, stats in rows],
        "upperfence": [_hours(stats["max"]) for _, stats in rows],
        "marker": {"color": colour},
        "line": {"color": colour},
        "fillcolor": fill,
    }


def turnaround_boxes(shares: list[dict]) -> dict:
    """Turnaround per share, within-limit and borrowed side by side (box from
    precomputed quartiles; whiskers at min and max), in hours.

    `shares`: [{"name", "within": stats, "borrowed": stats}] with stats of
    selectors.duration_stats."""
    traces = []
    for key, label, colour, fill in (
        ("within", "Ran within limit only", WITHIN, "rgba(47, 109, 181, 0.3)"),
        ("borrowed", "Ran on borrowed capacity", BORROWED, "rgba(227, 155, 27, 0.3)"),
    ):
        rows = [(share["name"], share[key]) for share in shares if share[key].get("n")]
        trace = box_trace(label, rows, colour, fill)
        trace["hovertemplate"] = "%{x}<extra>" + label + "</extra>"
        traces.append(trace)
    return _figure(
        traces,
        chart_layout(
            "Turnaround by share (hours)",
            boxmode="group",
            yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
        ),
    )


def lender_wait_bars(shares: list[dict]) -> dict:
    """Median and p90 wait of jobs whose start reclaimed lent capacity, per share.

    `shares`: [{"name", "stats": stats}]."""
    rows = [(share["name"], share["stats"]) for share in shares if share["stats"].get("n")]
    names = [name for name, _ in rows]
    return _figure(
        [
            {
                "type": "bar",
                "name": "Median",
                "x": names,
                "y": [_hours(stats["median"]) for _, stats in rows],
                "marker": {"color": WITHIN},
            },
            {
                "type": "bar",
                "name": "90th percentile",
                "x": names,
                "y": [_hours(stats["p90"]) for _, stats in rows],
                "marker": {"color": "#1b4a80"},
            },
        ],
        chart_layout(
            "Lender wait for a reclaim (hours)",
            barmode="group",
            yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
        ),
    )


def preemptions_weekly(weeks: list[dict]) -> dict:
    """Preemptions per week stacked by cause, and lost GPU-hours (line, right axis).

    `weeks`: [{"week": "YYYY-MM-DD", "preemptions": {cause: n}, "lost_gpu_seconds"}]."""
    x = [week["week"] for week in weeks]
    traces = [
        {
            "type": "bar",
            "name": CAUSE_LABELS[cause],
            "x": x,
            "y": [week["preemptions"].get(cause, 0) for week in weeks],
            "marker": {"color": colour},
        }
        for cause, colour in CAUSE_COLOURS.items()
    ]
    traces.append(
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Lost GPU-hours",
            "x": x,
            "y": [round(week["lost_gpu_seconds"] / HOUR, 1) for week in weeks],
            "yaxis": "y2",
            "line": {"color": "#1f2933", "width": 2},
        }
    )
    return _figure(
        traces,
        chart_layout(
            "Preemptions and lost GPU-hours per week",
            barmode="stack",
            xaxis={"title": {"text": "week starting"}, "type": "category"},
            yaxis={"title": {"text": "preemptions"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "lost GPU-hours"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "showgrid": False,
            },
            margin={"l": 60, "r": 60, "t": 48, "b": 60},
        ),
    )


def recovery_funnel(*, preempted: int, resumed: int, succeeded: int, failed: int) -> dict:
    """Jobs that ended this month after at least one preemption: how many started
    again, and how many completed or failed."""
    stages = ["Preempted", "Resumed", "Completed", "Failed"]
    values = [preempted, resumed, succeeded, failed]
    return _figure(
        [
            {
                "type": "bar",
                "orientation": "h",
                "x": values,
                "y": stages,
                "text": [str(value) for value in values],
                "textposition": "auto",
                "marker": {"color": [FAILED, WITHIN, DONE, FAILED]},
                "showlegend": False,
                "hovertemplate": "%{y}: %{x} jobs<extra></extra>",
            }
        ],
        chart_layout(
            "Recovery of preempted jobs",
            xaxis={"title": {"text": "jobs"}, "rangemode": "tozero"},
            yaxis={"autorange": "reversed"},
            margin={"l": 100, "r": 20, "t": 48, "b": 50},
        ),
    )


def policy_weekly(weeks: list[dict]) -> dict:
    """Policy edits, and exception requests filed by urgency, per week.

    `weeks`: [{"week", "policy_edits", "exceptions_filed": {urgency: n}}]."""
    x = [week["week"] for week in weeks]
    urgencies = sorted({name for week in weeks for name in week["exceptions_filed"]})
    traces = [
        {
            "type": "bar",
            "name": "Policy edits",
            "x": x,
            "y": [week["policy_edits"] for week in weeks],
            "marker": {"color": NEUTRAL},
        }
    ]
    for index, urgency in enumerate(urgencies):
        traces.append(
            {
                "type": "bar",
                "name": f"Exceptions filed: {urgency}",
                "x": x,
                "y": [week["exceptions_filed"].get(urgency, 0) for week in weeks],
                "marker": {
                    "color": URGENCY_COLOURS[index % len(URGENCY_COLOURS)],
                    "line": {"color": EXCEPTION, "width": 1},
                },
            }
        )
    return _figure(
        traces,
        chart_layout(
            "Policy edits and exception requests per week",
            barmode="group",
            xaxis={"title": {"text": "week starting"}, "type": "category"},
            yaxis={"title": {"text": "count"}, "rangemode": "tozero"},
        ),
    )
