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
IDLE = "#d5dbe1"
RESERVED = "#9aa5b1"
# Causes of lost work: reclaim is borrowed capacity taken back (amber, as borrowing),
# priority is in-share preemption, a capacity change the fleet shrinking; work of
# terminated and failed jobs, and runs lost with their runner.
CAUSE_COLOURS = {
    "reclaim": BORROWED,
    "priority": FAILED,
    "capacity_change": NEUTRAL,
    "terminated": "#8c1d1b",
    "failed": "#f0a3a1",
    "requeued": "#3f4954",
}
CAUSE_LABELS = {
    "reclaim": "Reclaim",
    "priority": "Priority (in-share)",
    "capacity_change": "Capacity change",
    "terminated": "Terminated",
    "failed": "Failed",
    "requeued": "Requeued (runner lost)",
}
CATEGORY_LABELS = {
    "within_limit": "Within limit",
    "borrowed": "Borrowed",
    "idle_lendable": "Idle, lendable",
    "idle_reserved": "Idle, reserved",
}
CATEGORY_COLOURS = {
    "within_limit": WITHIN,
    "borrowed": BORROWED,
    "idle_lendable": IDLE,
    "idle_reserved": RESERVED,
}
NO_DATA = "No data this month"
URGENCY_COLOURS = ("#7a3db8", "#a77bd6", "#4b2173", "#c7a9e8", "#5f2e94")
HOUR = 3600.0
FONT = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica Neue, Arial, sans-serif"


def chart_layout(title: str, **extra) -> dict:
    """The layout every chart of the product shares (the dashboard's and what-if's).

    Made to fit a phone (390 px) as well as a desk: the title sits at the top left and
    pushes the margin it needs (static/js/app.js wraps it onto lines when the chart is
    narrow), the legend is anchored to the bottom of the chart's box (yref container)
    so Plotly reserves its own room below the axis title instead of drawing over it,
    and every axis grows its margin to fit its tick labels and title (automargin),
    so no label is cut short."""
    layout = {
        "title": {
            "text": title,
            "font": {"size": 15},
            "x": 0,
            "xanchor": "left",
            "xref": "container",
            "y": 1,
            "yanchor": "top",
            "yref": "container",
            "pad": {"t": 10, "l": 4},
            "automargin": True,
        },
        "font": {"family": FONT, "size": 12, "color": "#1f2933"},
        "margin": {"l": 60, "r": 20, "t": 48, "b": 30},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "xref": "paper",
            "y": 0,
            "yanchor": "bottom",
            "yref": "container",
        },
        "height": 340,
    }
    layout.update(extra)
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("visible", 1):
            layout[key] = {"automargin": True, **axis}
    for key in ("xaxis", "yaxis"):
        layout.setdefault(key, {"automargin": True})
    return layout


def _figure(data: list, layout: dict) -> dict:
    return {"data": data, "layout": layout, "config": {"displaylogo": False}}


def no_data(title: str, message: str = NO_DATA) -> dict:
    """A chart with nothing to draw says so, instead of showing empty axes."""
    hidden = {"visible": False}
    return _figure(
        [],
        chart_layout(
            title,
            xaxis=hidden,
            yaxis=hidden,
            height=200,
            annotations=[
                {
                    "text": message,
                    "showarrow": False,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "font": {"size": 14, "color": NEUTRAL},
                }
            ],
        ),
    )


def _hours(seconds) -> float | None:
    return None if seconds is None else round(seconds / HOUR, 2)


def box_trace(label: str, rows: list[tuple[str, dict]], colour: str, fill: str) -> dict:
    """A box trace from precomputed quartiles: `rows` = [(x label, duration stats)] with
    seconds `q1`, `median`, `q3`, `min`, `max` (formulas.duration_stats), shown in hours."""
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
    formulas.duration_stats."""
    title = "Turnaround by share (hours)"
    traces = []
    counted = {}  # share name: {"within": n, "borrowed": n}
    for key, label, colour, fill in (
        ("within", "Ran within limit only", WITHIN, "rgba(47, 109, 181, 0.3)"),
        ("borrowed", "Ran on borrowed capacity", BORROWED, "rgba(227, 155, 27, 0.3)"),
    ):
        # One category per share (its name), both boxes side by side in it: the n goes
        # on the tick label below, not into the category, which would differ between
        # the two traces and list every share twice.
        rows = [
            (share["name"], {**share[key], "median": share[key]["p50"]})
            for share in shares
            if share[key].get("n")
        ]
        if not rows:
            continue
        for share in shares:
            if share[key].get("n"):
                counted.setdefault(share["name"], {})[key] = share[key]["n"]
        trace = box_trace(label, rows, colour, fill)
        trace["hoverlabel"] = {"namelength": -1}
        traces.append(trace)
    if not traces:
        return no_data(title)
    names = list(counted)
    return _figure(
        traces,
        chart_layout(
            title,
            boxmode="group",
            xaxis={
                "type": "category",
                "categoryorder": "array",
                "categoryarray": names,
                "tickmode": "array",
                "tickvals": names,
                "ticktext": [_n_label(name, counted[name]) for name in names],
            },
            yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
        ),
    )


def _n_label(name: str, counts: dict[str, int]) -> str:
    """A share's tick label: its name, and below it the n of each box drawn."""
    parts = []
    if "within" in counts:
        parts.append(f"{counts['within']} within")
    if "borrowed" in counts:
        parts.append(f"{counts['borrowed']} borrowed")
    return f"{name}<br>n={', '.join(parts)}"


def capacity_bars(rows: list[dict]) -> dict:
    """GPU-hours of each share (or team) by category, stacked horizontally: within
    limit, borrowed, idle lendable, idle reserved (hatched).

    `rows`: [{"name", "gpu_hours": {category: hours}}]."""
    title = "Capacity use (GPU-hours)"
    rows = [row for row in rows if any(row["gpu_hours"].values())]
    if not rows:
        return no_data(title)
    names = [row["name"] for row in rows]
    traces = []
    for category, label in CATEGORY_LABELS.items():
        trace = {
            "type": "bar",
            "orientation": "h",
            "name": label,
            "y": names,
            "x": [round(row["gpu_hours"][category], 1) for row in rows],
            "marker": {"color": CATEGORY_COLOURS[category]},
            "hovertemplate": "%{y}: %{x:,.1f} GPU-h<extra>" + label + "</extra>",
        }
        if category == "idle_reserved":
            trace["marker"]["pattern"] = {"shape": "/", "fgcolor": "#5f6b77"}
        traces.append(trace)
    return _figure(
        traces,
        chart_layout(
            title,
            barmode="stack",
            xaxis={"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
            yaxis={"autorange": "reversed", "automargin": True},
            height=max(260, 60 + 34 * len(rows)),
            margin={"l": 120, "r": 20, "t": 48, "b": 60},
        ),
    )


def wait_bars(shares: list[dict]) -> dict:
    """p50 and p90 wait to first start per share, in hours, n in the label.

    `shares`: [{"name", "stats": stats}]."""
    title = "Wait to first start by share (hours)"
    rows = [(share["name"], share["stats"]) for share in shares if share["stats"].get("n")]
    if not rows:
        return no_data(title)
    names = [f"{name}<br>n={stats['n']}" for name, stats in rows]
    return _figure(
        [
            {
                "type": "bar",
                "name": "p50",
                "x": names,
                "y": [_hours(stats["p50"]) for _, stats in rows],
                "marker": {"color": WITHIN},
            },
            {
                "type": "bar",
                "name": "p90",
                "x": names,
                "y": [_hours(stats["p90"]) for _, stats in rows],
                "marker": {"color": "#1b4a80"},
            },
        ],
        chart_layout(
            title,
            barmode="group",
            yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
        ),
    )


STOP_LABELS = {
    "immediate": "At once (no notice)",
    "stopped_without_checkpoint": "Stopped without checkpoint",
    "checkpointed_on_notice": "Checkpointed on notice",
}
STOP_COLOURS = {
    "immediate": FAILED,
    "stopped_without_checkpoint": BORROWED,
    "checkpointed_on_notice": DONE,
}


def reclaim_bars(shares: list[dict]) -> dict:
    """Time to reclaim per share: p50, p90 and max, in minutes, n in the label.

    `shares`: [{"name", "stats": {"n", "p50", "p90", "max"}}] (formulas.reclaim_time)."""
    title = "Time to reclaim by share (minutes)"
    rows = [(share["name"], share["stats"]) for share in shares if share["stats"].get("n")]
    if not rows:
        return no_data(title, "No reclaim this month")
    names = [f"{name}<br>n={stats['n']}" for name, stats in rows]
    traces = [
        {
            "type": "bar",
            "name": label,
            "x": names,
            "y": [round(stats[key] / 60, 2) for _, stats in rows],
            "marker": {"color": colour},
            "hovertemplate": "%{x}: %{y:,.2f} min<extra>" + label + "</extra>",
        }
        for key, label, colour in (
            ("p50", "p50", WITHIN),
            ("p90", "p90", "#1b4a80"),
            ("max", "Longest", BORROWED),
        )
    ]
    return _figure(
        traces,
        chart_layout(
            title, barmode="group", yaxis={"title": {"text": "minutes"}, "rangemode": "tozero"}
        ),
    )


def stop_bars(lost: dict[str, float], stops: dict[str, int]) -> dict:
    """Lost GPU-hours of preempted jobs by how they stopped, n stops in the label.

    `lost`: {stop kind: GPU-hours}; `stops`: {stop kind: count} (formulas.stop_kind)."""
    title = "How preempted jobs stopped (lost GPU-hours)"
    if not any(stops.values()):
        return no_data(title, "No preemption this month")
    kinds = list(STOP_LABELS)
    return _figure(
        [
            {
                "type": "bar",
                "orientation": "h",
                "y": [f"{STOP_LABELS[kind]} (n={stops[kind]})" for kind in kinds],
                "x": [round(lost[kind], 2) for kind in kinds],
                "marker": {"color": [STOP_COLOURS[kind] for kind in kinds]},
                "showlegend": False,
                "hovertemplate": "%{y}: %{x:,.2f} GPU-h<extra></extra>",
            }
        ],
        chart_layout(
            title,
            xaxis={"title": {"text": "lost GPU-hours"}, "rangemode": "tozero"},
            yaxis={"autorange": "reversed", "automargin": True},
            height=220,
            margin={"l": 220, "r": 20, "t": 48, "b": 50},
        ),
    )


def lost_weekly(weeks: list[dict]) -> dict:
    """Lost GPU-hours per week stacked by cause, and preemptions (line, right axis).

    `weeks`: [{"week": "YYYY-MM-DD", "lost_gpu_hours": {cause: h}, "preemptions":
    {cause: n}}]."""
    title = "Lost GPU-hours and preemptions per week"
    lost_any = any(any(week["lost_gpu_hours"].values()) for week in weeks)
    preempted_any = any(any(week["preemptions"].values()) for week in weeks)
    if not (lost_any or preempted_any):
        return no_data(title, "No preemption and no lost work this month")
    x = [week["week"] for week in weeks]
    traces = [
        {
            "type": "bar",
            "name": CAUSE_LABELS[cause],
            "x": x,
            "y": [round(week["lost_gpu_hours"].get(cause, 0), 2) for week in weeks],
            "marker": {"color": colour},
        }
        for cause, colour in CAUSE_COLOURS.items()
        if any(week["lost_gpu_hours"].get(cause) for week in weeks)
    ]
    traces.append(
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Preemptions",
            "x": x,
            "y": [sum(week["preemptions"].values()) for week in weeks],
            "yaxis": "y2",
            "line": {"color": "#1f2933", "width": 2},
        }
    )
    return _figure(
        traces,
        chart_layout(
            title,
            barmode="stack",
            xaxis={"title": {"text": "week starting"}, "type": "category"},
            yaxis={"title": {"text": "lost GPU-hours"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "preemptions"},
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
    title = "Recovery of preempted jobs"
    if not preempted:
        return no_data(title, "No preempted job ended this month")
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
            title,
            xaxis={"title": {"text": "jobs"}, "rangemode": "tozero"},
            yaxis={"autorange": "reversed"},
            margin={"l": 100, "r": 20, "t": 48, "b": 50},
        ),
    )


def policy_weekly(weeks: list[dict]) -> dict:
    """Policy edits, and exception requests filed by urgency, per week.

    `weeks`: [{"week", "policy_edits", "exceptions_filed": {urgency: n}}]."""
    title = "Policy edits and exception requests per week"
    x = [week["week"] for week in weeks]
    urgencies = sorted({name for week in weeks for name in week["exceptions_filed"]})
    if not urgencies and not any(week["policy_edits"] for week in weeks):
        return no_data(title, "No policy edit and no exception request this month")
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
            title,
            barmode="group",
            xaxis={"title": {"text": "week starting"}, "type": "category"},
            yaxis={"title": {"text": "count"}, "rangemode": "tozero"},
        ),
    )


NO_FIGURES = "no figures"


def capacity_trend(months: list[dict]) -> dict:
    """Twelve months of capacity use: GPU-hours by category, stacked per month, and
    the lost GPU-hours per 1,000 delivered (line, right axis).

    `months`: [{"month": "Mar 2025", "gpu_hours": {category: h} or None,
    "lost_per_1000": float or None, "partial": "1.5 days" or ""}] (None: no figures
    that month). A month without figures is a gap: no bar, the line broken there
    (never drawn through it), and a "no figures" note in its place. A partial month
    says on its axis label how many days it measures."""
    title = "Capacity use and lost work, last 12 months"
    if not any(month["gpu_hours"] for month in months):
        return no_data(title, "No figures in the last 12 months")
    x = [
        f"{month['month']} ({month['partial']})" if month.get("partial") else month["month"]
        for month in months
    ]
    traces = []
    for category, label in CATEGORY_LABELS.items():
        trace = {
            "type": "bar",
            "name": label,
            "x": x,
            "y": [
                round(month["gpu_hours"][category], 1) if month["gpu_hours"] else None
                for month in months
            ],
            "marker": {"color": CATEGORY_COLOURS[category]},
        }
        if category == "idle_reserved":
            trace["marker"]["pattern"] = {"shape": "/", "fgcolor": "#5f6b77"}
        traces.append(trace)
    traces.append(
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Lost GPU-h per 1,000 delivered",
            "x": x,
            "y": [
                None
                if not month["gpu_hours"] or month["lost_per_1000"] is None
                else round(month["lost_per_1000"], 2)
                for month in months
            ],
            "yaxis": "y2",
            "connectgaps": False,
            "line": {"color": FAILED, "width": 2},
        }
    )
    missing = [
        {
            "text": NO_FIGURES,
            "showarrow": False,
            "xref": "x",
            "yref": "paper",
            "x": label,
            "y": 0.02,
            "yanchor": "bottom",
            "textangle": -90,
            "font": {"size": 11, "color": NEUTRAL},
        }
        for label, month in zip(x, months, strict=True)
        if not month["gpu_hours"]
    ]
    return _figure(
        traces,
        chart_layout(
            title,
            barmode="stack",
            xaxis={"type": "category"},
            yaxis={"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "lost per 1,000 GPU-h"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "showgrid": False,
            },
            margin={"l": 70, "r": 70, "t": 48, "b": 60},
            annotations=missing,
        ),
    )
