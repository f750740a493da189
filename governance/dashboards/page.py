"""What the leadership dashboard shows, from stored rollups only: the KPI cards with
their month-over-month change, the figures, and the tables behind them (which the
CSV exports reuse, so a download always matches the page)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from governance.dashboards import figures
from governance.dashboards.selectors import dashboard_rollups, previous_month
from governance.templatetags.ui import duration, percent

# Better when lower / higher; None: neither (the change is shown in grey).
LOWER, HIGHER = "lower", "higher"


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    meaning: str
    better: str
    kind: str  # duration | count | gpu_hours | fraction


KPIS = (
    Kpi(
        "turnaround_median",
        "Median turnaround",
        "Half of the jobs that completed took longer than this from submission to finish.",
        LOWER,
        "duration",
    ),
    Kpi(
        "wait_p90",
        "p90 waiting",
        "One completed job in ten waited in the queue longer than this.",
        LOWER,
        "duration",
    ),
    Kpi(
        "lender_wait_median",
        "Lender wait for reclaims",
        "Median time a team waited before borrowed capacity was taken back for it.",
        LOWER,
        "duration",
    ),
    Kpi(
        "preemptions",
        "Preemptions",
        "Times a running job was stopped to make room (reclaim, priority or capacity).",
        LOWER,
        "count",
    ),
    Kpi(
        "lost_gpu_hours",
        "Lost GPU-hours",
        "Work redone after preemptions: compute since the last checkpoint.",
        LOWER,
        "gpu_hours",
    ),
    Kpi(
        "completion_rate_preempted",
        "Preempted jobs completed",
        "Share of the jobs that were preempted and ended this month that still succeeded.",
        HIGHER,
        "fraction",
    ),
    Kpi(
        "goodput",
        "Goodput",
        "Useful GPU-hours as a share of all GPU-hours consumed (the rest was redone or "
        "spent restarting).",
        HIGHER,
        "fraction",
    ),
    Kpi(
        "exceptions_approved",
        "Exceptions approved",
        "Temporary departures from policy granted; fewer means the policy fits.",
        LOWER,
        "count",
    ),
    Kpi(
        "policy_edits",
        "Policy edits",
        "Changes to shares, capacity or urgency by admins (reverts included).",
        LOWER,
        "count",
    ),
)


def kpi_values(data: dict | None) -> dict[str, float | None]:
    """The raw KPI values of one rollup (None where the month has no such data)."""
    if not data:
        return {kpi.key: None for kpi in KPIS}
    return {
        "turnaround_median": data["turnaround"]["all"].get("median"),
        "wait_p90": data["wait"]["all"].get("p90"),
        "lender_wait_median": data["lender_wait"].get("median"),
        "preemptions": data["preemptions_total"],
        "lost_gpu_hours": round(data["lost_gpu_seconds"] / 3600, 1),
        "completion_rate_preempted": data["completion_rate_preempted"],
        "goodput": data["goodput"],
        "exceptions_approved": data["exceptions"]["approved"],
        "policy_edits": data["policy_edits"],
    }


def _format(kind: str, value) -> str:
    if value is None:
        return "—"
    if kind == "duration":
        return duration(value)
    if kind == "fraction":
        return percent(value)
    if kind == "gpu_hours":
        return f"{value:,.1f}"
    return f"{value:,}"


def _change(kpi: Kpi, current, previous) -> dict:
    """Arrow, text and tone of the month-over-month change."""
    if current is None or previous is None:
        return {"arrow": "", "text": "no figure for the previous month", "tone": "flat"}
    delta = current - previous
    if abs(delta) < 1e-9:
        return {"arrow": "→", "text": "no change", "tone": "flat"}
    up = delta > 0
    good = up == (kpi.better == HIGHER)
    if kpi.kind == "fraction":
        text = f"{abs(delta) * 100:.0f} points"
    elif kpi.kind == "duration":
        text = duration(abs(delta))
    elif kpi.kind == "gpu_hours":
        text = f"{abs(delta):,.1f} GPU-h"
    else:
        text = f"{abs(delta):,}"
    return {
        "arrow": "▲" if up else "▼",
        "text": f"{'up' if up else 'down'} {text}",
        "tone": "good" if good else "bad",
    }


def kpi_cards(current: dict | None, previous: dict | None) -> list[dict]:
    now, before = kpi_values(current), kpi_values(previous)
    return [
        {
            "key": kpi.key,
            "label": kpi.label,
            "meaning": kpi.meaning,
            "value": now[kpi.key],
            "display": _format(kpi.kind, now[kpi.key]),
            "previous_display": _format(kpi.kind, before[kpi.key]),
            "change": _change(kpi, now[kpi.key], before[kpi.key]),
        }
        for kpi in KPIS
    ]


def share_label(data: dict, with_queue: bool) -> str:
    name = data.get("share_name", "")
    return f"{data.get('queue_name', '')} / {name}" if with_queue else name


# -- the tables behind every figure (also the CSV exports) ------------------------------

STAT_KEYS = ("n", "median", "p90", "q1", "q3", "min", "max", "mean")


def tables(view: dict, *, with_queue: bool) -> dict[str, dict]:
    """name -> {"title", "header", "rows"} for each dataset of the page."""
    current = view["current"] or {}
    shares = view["shares"]
    result: dict[str, dict] = {}

    result["kpis"] = {
        "title": "Key figures",
        "header": ["figure", "value", "previous month", "change"],
        "rows": [
            [card["label"], card["display"], card["previous_display"], card["change"]["text"]]
            for card in view["kpis"]
        ],
    }
    rows = []
    for share in shares:
        for group in ("within", "borrowed"):
            for metric in ("turnaround", "wait", "run"):
                stats = share[metric][group]
                rows.append(
                    [share_label(share, with_queue), group, metric]
                    + [stats.get(key) for key in STAT_KEYS]
                )
    result["turnaround"] = {
        "title": "Completion time by share (seconds)",
        "header": ["share", "ran", "measure", *STAT_KEYS],
        "rows": rows,
    }
    result["lender-wait"] = {
        "title": "Lender wait for reclaims by share (seconds)",
        "header": ["share", *STAT_KEYS],
        "rows": [
            [share_label(share, with_queue)] + [share["lender_wait"].get(key) for key in STAT_KEYS]
            for share in shares
            if share["lender_wait"].get("n")
        ],
    }
    result["preemptions"] = {
        "title": "Preemptions and lost GPU-hours per week",
        "header": [
            "week starting",
            "reclaim",
            "priority",
            "capacity_change",
            "lost GPU-hours",
        ],
        "rows": [
            [
                week["week"],
                week["preemptions"]["reclaim"],
                week["preemptions"]["priority"],
                week["preemptions"]["capacity_change"],
                round(week["lost_gpu_seconds"] / 3600, 1),
            ]
            for week in current.get("weeks", [])
        ],
    }
    result["recovery"] = {
        "title": "Recovery of preempted jobs that ended this month",
        "header": ["stage", "jobs"],
        "rows": [
            ["Preempted", current.get("preempted_ended", 0)],
            ["Resumed", current.get("preempted_resumed", 0)],
            ["Completed", current.get("preempted_succeeded", 0)],
            ["Failed", current.get("preempted_failed", 0)],
            ["Failed: retries exhausted", current.get("retries_exhausted", 0)],
        ],
    }
    urgencies = sorted(
        {name for week in current.get("weeks", []) for name in week["exceptions_filed"]}
    )
    result["policy"] = {
        "title": "Policy edits and exception requests filed per week",
        "header": ["week starting", "policy edits", "exception changes", *urgencies],
        "rows": [
            [week["week"], week["policy_edits"], week["exception_changes"]]
            + [week["exceptions_filed"].get(name, 0) for name in urgencies]
            for week in current.get("weeks", [])
        ],
    }
    result["yielders"] = {
        "title": "Repeated yielders (3 or more preemptions)",
        "header": [
            "job",
            "queue",
            "share",
            "team",
            "preemptions",
            "lost GPU-hours",
            "state",
            "ended",
        ],
        "rows": [
            [
                y["name"],
                y["queue"],
                y["share"],
                y["team"],
                y["preemptions"],
                round(y["lost_gpu_seconds"] / 3600, 1),
                y["state"] + (f" ({y['reason']})" if y["reason"] else ""),
                y["finished_at"],
            ]
            for y in view["yielders"]
        ],
    }
    result["shares"] = {
        "title": "Signals by share",
        "header": [
            "queue",
            "share",
            "team",
            "jobs ended",
            "succeeded",
            "failed",
            "median turnaround (s)",
            "p90 wait (s)",
            "preemptions",
            "jobs preempted",
            "lost GPU-hours",
            "restart overhead GPU-hours",
            "median wait after interruption (s)",
            "completion rate of preempted",
            "retries exhausted",
            "goodput",
            "policy edits",
            "exceptions filed",
            "exceptions approved",
            "exceptions denied",
            "exceptions active",
            "revocations",
            "priority changes",
            "capacity-change preemptions",
        ],
        "rows": [
            [
                share.get("queue_name", ""),
                share.get("share_name", ""),
                share.get("team_name", ""),
                share["jobs_ended"],
                share["jobs_succeeded"],
                share["jobs_failed"],
                share["turnaround"]["all"].get("median"),
                share["wait"]["all"].get("p90"),
                share["preemptions_total"],
                share["jobs_preempted"],
                round(share["lost_gpu_seconds"] / 3600, 1),
                round(share["restart_overhead_gpu_seconds"] / 3600, 1),
                share["wait_after_interruption"].get("median"),
                _rounded(share["completion_rate_preempted"]),
                share["retries_exhausted"],
                _rounded(share["goodput"]),
                share["policy_edits"],
                share["exceptions"]["filed"],
                share["exceptions"]["approved"],
                share["exceptions"]["denied"],
                share["exceptions"]["active"],
                share["exceptions"]["revoked"],
                share["priority_changes"],
                share["capacity_change_preemptions"],
            ]
            for share in shares
        ],
    }
    return result


def _rounded(value):
    return None if value is None else round(value, 4)


def dashboard_view(*, month: dt.date, queue_id: int | None) -> dict:
    """Everything the page and its CSV exports show, from one rollup query."""
    stored = dashboard_rollups(month=month, queue_id=queue_id)
    current, previous, shares = stored["current"], stored["previous"], stored["shares"]
    with_queue = queue_id is None and len({s.get("queue_id") for s in shares}) > 1
    yielders = sorted(
        (y for share in shares for y in share["yielders"]),
        key=lambda y: (-y["preemptions"], -y["lost_gpu_seconds"], y["name"]),
    )
    view = {
        "month": month,
        "previous_month": previous_month(month),
        "current": current,
        "previous": previous,
        "shares": shares,
        "computed_at": stored["computed_at"],
        "kpis": kpi_cards(current, previous),
        "yielders": yielders,
        "figures": {},
    }
    if current:
        labels = {id(share): share_label(share, with_queue) for share in shares}
        view["figures"] = {
            "turnaround": figures.turnaround_boxes(
                [
                    {
                        "name": labels[id(share)],
                        "within": share["turnaround"]["within"],
                        "borrowed": share["turnaround"]["borrowed"],
                    }
                    for share in shares
                ]
            ),
            "lender-wait": figures.lender_wait_bars(
                [{"name": labels[id(share)], "stats": share["lender_wait"]} for share in shares]
            ),
            "preemptions": figures.preemptions_weekly(current["weeks"]),
            "recovery": figures.recovery_funnel(
                preempted=current["preempted_ended"],
                resumed=current["preempted_resumed"],
                succeeded=current["preempted_succeeded"],
                failed=current["preempted_failed"],
            ),
            "policy": figures.policy_weekly(current["weeks"]),
        }
    view["tables"] = tables(view, with_queue=with_queue)
    return view


# The charts in page order: (dataset, title, caption: what it shows, what to look for).
CHARTS = (
    (
        "turnaround",
        "Turnaround by share",
        "Time from submission to finish of the jobs that completed this month, per share: "
        "blue boxes for jobs that ran only within their share's limit, amber for jobs that "
        "ran on borrowed capacity (box: middle half; line: median; whiskers: shortest and "
        "longest). Look for shares whose boxes sit high, or borrowed jobs far slower.",
    ),
    (
        "lender-wait",
        "Lender wait for reclaims",
        "How long a team's job waited before capacity it had lent was taken back for it "
        "(median and 90th percentile, per share). Long bars mean lending costs the lender.",
    ),
    (
        "preemptions",
        "Preemptions and lost work per week",
        "Preemptions per week by cause (bars) and the GPU-hours of work redone because of "
        "them (line). A rising line means checkpoints are too far apart or reclaims too many.",
    ),
    (
        "recovery",
        "Recovery of preempted jobs",
        "Of the jobs that ended this month after at least one preemption: how many started "
        "again, and how many then completed or failed. Failures here are lost to the team.",
    ),
    (
        "policy",
        "Policy edits and exceptions per week",
        "Admin edits of shares, capacity and urgency (grey) and exception requests filed, "
        "by urgency (purple), per week. Steady low bars mean a stable policy.",
    ),
)


def charts(view: dict, csv_urls: dict[str, str]) -> list[dict]:
    return [
        {
            "dataset": dataset,
            "element_id": f"figure-{dataset}",
            "title": title,
            "caption": caption,
            "figure": view["figures"][dataset],
            "csv_url": csv_urls[dataset],
        }
        for dataset, title, caption in CHARTS
        if dataset in view["figures"]
    ]
