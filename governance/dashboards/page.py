"""What the leadership dashboard shows, from stored rollups only: the KPI cards with
their n, month-over-month change and 12-month sparkline, the charts, the per-team
table, and the tables behind them (the CSV exports and the monthly pack reuse them, so
a download always matches the page).

Tables hold raw values in base units (seconds, hours, counts, fractions) with a units
row; the page formats them for people.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from core.formatting import duration, percent
from engine.strategies import spoken_list, strategies_that
from governance.dashboards import figures
from governance.dashboards import formulas as f
from governance.dashboards.cost import cost_figures
from governance.dashboards.selectors.calendar import previous_month

LOWER, HIGHER = "lower", "higher"
NO_DIRECTION = None


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    meaning: str
    # Whether lower or higher is better; None where a change is neither (volume, use of
    # lending, justified decisions): its change is shown in grey, without an arrow.
    better: str | None
    kind: str  # duration | count | gpu_hours | fraction | rate
    unit: str  # the CSV's unit
    definition: str  # a key of formulas.DEFINITIONS


KPIS = (
    Kpi(
        "delivered_gpu_hours",
        "GPU-hours delivered",
        "GPU-hours the jobs ran, within limits and borrowed: the volume behind every other figure.",
        NO_DIRECTION,
        "gpu_hours",
        "GPU-hours",
        "capacity",
    ),
    Kpi(
        "borrowed_fraction",
        "Ran on borrowed capacity",
        "Part of the GPU-hours delivered that ran beyond the running share's limit, on "
        "capacity other shares lent.",
        NO_DIRECTION,
        "fraction",
        "fraction",
        "capacity",
    ),
    Kpi(
        "entitlement_honoured",
        "Entitlement honoured",
        "Of the jobs that fitted within their share's limit when they became runnable, "
        "the part that started within 5 minutes.",
        HIGHER,
        "fraction",
        "fraction",
        "entitlement_honoured",
    ),
    Kpi(
        "reclaim_time_p90",
        "Time to reclaim, p90",
        "How long a lender's job waited, once it could start only by taking back lent "
        "capacity, for the borrowers' protection and notice to run out: one in ten "
        "waited longer.",
        LOWER,
        "duration",
        "seconds",
        "reclaim_time",
    ),
    Kpi(
        "time_to_reclaim_p90",
        "Lender wait, p90",
        "How long a job within its limit waited while its capacity was lent out, its "
        "own share's queue included: one in ten waited longer.",
        LOWER,
        "duration",
        "seconds",
        "time_to_reclaim",
    ),
    Kpi(
        "preemptions_avoided",
        "Preemptions avoided by protection",
        "Times a job would have been preempted but its minimum runtime protected it "
        "(n: the jobs spared).",
        NO_DIRECTION,
        "count",
        "victim choices",
        "preemptions_avoided",
    ),
    Kpi(
        "turnaround_p50",
        "Median turnaround",
        "Half of the jobs that succeeded took longer than this from submission to finish.",
        LOWER,
        "duration",
        "seconds",
        "turnaround",
    ),
    Kpi(
        "wait_p90",
        "p90 wait to first start",
        "One job in ten that started this month waited longer than this in the queue.",
        LOWER,
        "duration",
        "seconds",
        "wait",
    ),
    Kpi(
        "jobs_waiting_at_end",
        "Still waiting at month end",
        "Jobs queued when the month ended (the oldest's age in the change line).",
        NO_DIRECTION,
        "count",
        "jobs",
        "wait",
    ),
    Kpi(
        "lost_per_1000",
        "Lost GPU-hours per 1,000 delivered",
        "Work redone or thrown away (preemptions, terminations, failures) for every "
        "1,000 GPU-hours run.",
        LOWER,
        "rate",
        "GPU-hours per 1,000 GPU-hours",
        "lost",
    ),
    Kpi(
        "preemptions_per_1000",
        "Preemptions per 1,000 GPU-hours",
        "Running jobs stopped to make room. Reclaims among them are lending working as agreed.",
        NO_DIRECTION,
        "rate",
        "preemptions per 1,000 GPU-hours",
        "per_thousand",
    ),
    Kpi(
        "goodput",
        "Goodput",
        "Part of the GPU-hours delivered that was neither lost nor spent restarting.",
        HIGHER,
        "fraction",
        "fraction",
        "goodput",
    ),
    Kpi(
        "completion_rate_preempted",
        "Preempted jobs completed",
        "Of the jobs that ended this month after a preemption, the part that succeeded.",
        HIGHER,
        "fraction",
        "fraction",
        "recovery",
    ),
    Kpi(
        "exceptions_approved",
        "Exceptions approved",
        "Temporary departures from policy granted; a justified exception is the process working.",
        NO_DIRECTION,
        "count",
        "requests",
        "policy",
    ),
    Kpi(
        "policy_edits",
        "Policy edits",
        "Changes to shares, capacity or urgency by admins (reverts included); policy "
        "imported or replayed from a recorded history is not counted.",
        NO_DIRECTION,
        "count",
        "changes",
        "policy",
    ),
)
KPI_BY_KEY = {kpi.key: kpi for kpi in KPIS}


def kpi_values(data: dict | None) -> dict[str, tuple]:
    """Each KPI's raw value and its n (the observations behind it) in one rollup;
    (None, None) where the month has no figures."""
    if not data:
        return {kpi.key: (None, None) for kpi in KPIS}
    runs = data["runs"]
    waiting = data["jobs_waiting_at_end"]
    return {
        "delivered_gpu_hours": (data["delivered_gpu_hours"], runs),
        "borrowed_fraction": (data["borrowed_fraction"], runs),
        "entitlement_honoured": (
            data["entitlement_honoured"]["fraction"],
            data["entitlement_honoured"]["n"],
        ),
        "reclaim_time_p90": (data["reclaim_time_s"].get("p90"), data["reclaim_time_s"]["n"]),
        "time_to_reclaim_p90": (
            data["time_to_reclaim_s"].get("p90"),
            data["time_to_reclaim_s"]["n"],
        ),
        "preemptions_avoided": (
            data["preemptions_avoided"]["avoided"],
            data["preemptions_avoided"]["jobs"],
        ),
        "turnaround_p50": (data["turnaround_s"].get("p50"), data["turnaround_s"]["n"]),
        "wait_p90": (data["wait_s"].get("p90"), data["wait_s"]["n"]),
        "jobs_waiting_at_end": (waiting["n"], waiting["n"]),
        "lost_per_1000": (data["lost_gpu_hours_per_1000"], runs),
        "preemptions_per_1000": (data["preemptions_per_1000"], runs),
        "goodput": (data["goodput"], runs),
        "completion_rate_preempted": (
            data["completion_rate_preempted"],
            data["preempted_ended"],
        ),
        "exceptions_approved": (data["exceptions"]["approved"], None),
        "policy_edits": (data["policy_edits"], None),
    }


def display(kind: str, value) -> str:
    if value is None:
        return "—"
    if kind == "duration":
        return duration(value)
    if kind == "fraction":
        return percent(value)
    if kind == "gpu_hours":
        return f"{value:,.1f}"
    if kind == "rate":
        return f"{value:,.1f}"
    return f"{value:,}"


def _amount(kpi: Kpi, delta) -> str | None:
    """The size of a change as the card shows it; None when it rounds to nothing."""
    size = abs(delta)
    if kpi.kind == "fraction":
        return None if round(size * 100) == 0 else f"{size * 100:.0f} points"
    if kpi.kind == "duration":
        return None if round(size) == 0 else duration(size)
    if kpi.kind in ("gpu_hours", "rate"):
        return None if round(size, 1) == 0 else f"{size:,.1f}"
    return None if size == 0 else f"{size:,}"


# Figures that grow with the time measured: a partial month's are not set against a
# whole month's at all. The others (fractions, durations, rates) show their change,
# flagged, without a verdict.
EXTENSIVE_KINDS = ("count", "gpu_hours")


def days_label(days: float) -> str:
    """1.5 days, 1 day, 29 days; under a day in hours (2 hours, 1 hour, 0.5 hours)."""
    count, unit = (days * 24, "hour") if days < 1 else (days, "day")
    text = f"{count:,.1f}".removesuffix(".0")
    return f"{text} {unit}" if text == "1" else f"{text} {unit}s"


def partial_label(data: dict | None) -> str:
    """ "1.5 days" when a rollup measures part of its month only (its scope's first
    month started mid-month, or the month under way); "" for a whole month."""
    coverage = (data or {}).get("coverage")
    if not coverage or not coverage["partial"]:
        return ""
    return days_label(coverage["seconds"] / 86400)


def comparable(kpi: Kpi, n_now, n_before) -> bool:
    """A change earns an arrow and a better / worse word only when the figure has a
    direction and both months have at least `formulas.MIN_SAMPLE` observations."""
    if kpi.better is None:
        return False
    return (n_now or 0) >= f.MIN_SAMPLE and (n_before or 0) >= f.MIN_SAMPLE


def change(kpi: Kpi, current: tuple, previous: tuple, partial: str = "") -> dict:
    """The month-over-month change: arrow, words and tone ("good", "bad", "flat").

    `partial` says which of the two months measures part of its month only ("March
    2025 measures 1.5 days"): then there is no verdict, and a figure that grows with
    the time measured is not compared at all."""
    (now, n_now), (before, n_before) = current, previous
    if now is None or before is None:
        return {"arrow": "", "text": "no figure to compare with", "tone": "flat", "word": ""}
    if partial and kpi.kind in EXTENSIVE_KINDS:
        return {"arrow": "", "text": f"not compared: {partial}", "tone": "flat", "word": ""}
    delta = now - before
    amount = _amount(kpi, delta)
    if amount is None:
        # Smaller than the figure's precision: nothing a reader could see changed.
        return {"arrow": "", "text": "no change", "tone": "flat", "word": ""}
    text = f"{'up' if delta > 0 else 'down'} {amount}"
    few = kpi.better is not None and not comparable(kpi, n_now, n_before)
    if few:
        smallest = min(n_now or 0, n_before or 0)
        text += f"; too few to compare (n = {smallest:,}, under {f.MIN_SAMPLE})"
    if partial:
        text += f"; not a whole month: {partial}"
    if kpi.better is None or few or partial:
        return {"arrow": "", "text": text, "tone": "flat", "word": ""}
    good = (delta > 0) == (kpi.better == HIGHER)
    return {
        "arrow": "▲" if delta > 0 else "▼",
        "text": text,
        "tone": "good" if good else "bad",
        "word": "better" if good else "worse",
    }


SPARK_WIDTH, SPARK_HEIGHT = 120, 28


def sparkline(values: list) -> dict:
    """SVG polyline segments of a 12-month series (a gap where a month has no figure),
    drawn on the server: no script, and it prints."""
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return {"segments": [], "last": None}
    low, high = min(known), max(known)
    span = (high - low) or 1
    step = SPARK_WIDTH / max(1, len(values) - 1)
    segments, current = [], []
    last = None
    for index, value in enumerate(values):
        if value is None:
            if len(current) > 1:
                segments.append(" ".join(current))
            current = []
            continue
        x = round(index * step, 1)
        y = round(SPARK_HEIGHT - 2 - (value - low) / span * (SPARK_HEIGHT - 4), 1)
        current.append(f"{x},{y}")
        last = (x, y)
    if len(current) > 1:
        segments.append(" ".join(current))
    return {"segments": segments, "last": last}


def partial_months(current: dict | None, previous: dict | None, month: dt.date | None) -> str:
    """Which of the two months compared measures part of its month only, in words
    ("December 2026 measures 1.5 days"); "" when both are whole months."""
    notes = []
    for data, which in ((previous, previous_month(month) if month else None), (current, month)):
        label = partial_label(data)
        if label:
            notes.append(f"{which:%B %Y} measures {label}" if which else f"{label} measured")
    return ", ".join(notes)


def kpi_cards(
    current: dict | None, previous: dict | None, trend: list, month: dt.date | None = None
) -> list[dict]:
    now, before = kpi_values(current), kpi_values(previous)
    partial = partial_months(current, previous, month)
    series = [(m, kpi_values(data), partial_label(data)) for m, data in trend]
    cards = []
    for kpi in KPIS:
        # A partial month's volume is no point on a line of whole months: a gap.
        values = [
            None if label and kpi.kind in EXTENSIVE_KINDS else values[kpi.key][0]
            for _, values, label in series
        ]
        value, n = now[kpi.key]
        history = ", ".join(
            f"{m:%b %Y} {display(kpi.kind, values[kpi.key][0])}"
            + (f" ({label} measured)" if label else "")
            for m, values, label in series
        )
        cards.append(
            {
                "key": kpi.key,
                "label": kpi.label,
                "meaning": kpi.meaning,
                "value": value,
                "n": n,
                "display": display(kpi.kind, value),
                "previous_display": display(kpi.kind, before[kpi.key][0]),
                "change": change(kpi, now[kpi.key], before[kpi.key], partial),
                "direction": kpi.better,
                "sparkline": sparkline(values),
                "trend_text": history,
                "extra": _extra(kpi.key, current),
            }
        )
    return cards


def _extra(key: str, data: dict | None) -> str:
    """A line of context some cards need to be read right."""
    if not data:
        return ""
    if key == "jobs_waiting_at_end" and data["jobs_waiting_at_end"]["n"]:
        return f"oldest waiting {duration(data['jobs_waiting_at_end']['oldest_s'])}"
    if key == "preemptions_per_1000":
        causes = data["preemptions"]
        return (
            f"{data['preemptions_total']:,} in all: {causes['reclaim']:,} reclaims, "
            f"{causes['priority']:,} in-share priority, "
            f"{causes['capacity_change']:,} capacity changes"
        )
    if key == "lost_per_1000":
        return f"{data['lost_gpu_hours_total']:,.1f} GPU-hours lost in all"
    if key == "reclaim_time_p90" and data["reclaim_time_s"]["n"]:
        stats = data["reclaim_time_s"]
        return f"p50 {duration(stats['p50'])}, longest {duration(stats['max'])}"
    return ""


def share_label(data: dict, with_queue: bool) -> str:
    name = data.get("share_name", "")
    return f"{data.get('queue_name', '')} / {name}" if with_queue else name


def team_rows(teams: list[dict], shares: list[dict], queues: dict) -> list[dict]:
    """One row per team: what it received against what it was entitled to, and how it
    was served. Fairness is compared in each queue where the team has a share, against
    that queue's totals (`queues`), and combined over the queues in scope
    (formulas.fairness_across_queues); never against every queue's entitlement."""
    by_team = f.fairness_by_team(shares, queues)
    empty = f.fairness_across_queues([])
    rows = []
    for team in teams:
        fair = by_team.get(team.get("team_id"), empty)
        rows.append(
            {
                "name": team.get("team_name", ""),
                "data": team,
                "fairness": fair,
                "fairness_text": fairness_text(fair),
            }
        )
    return rows


def fairness_text(fair: dict) -> str:
    """A team's fairness as the page and the pack print it: the ratio, and each
    queue's where it combines several ("1.40: gpu-a 2.00, gpu-b 0.50")."""
    if fair["ratio"] is None:
        return "—"
    text = f"{fair['ratio']:.2f}"
    counted = [q for q in fair["by_queue"] if q["ratio"] is not None]
    if len(counted) > 1:
        text += ": " + ", ".join(f"{q['queue_name']} {q['ratio']:.2f}" for q in counted)
    return text


COST_LABELS = {"within_limit": "within limit", "borrowed": "borrowed", "lent": "lent to others"}


def cost_view(prices: dict, shares: list[dict], teams: list[dict]) -> dict:
    """GPU-hours and cost by team and by share (governance.dashboards.cost); `priced`
    is False when no instance type has a price: then no cost is shown at all."""
    currency = settings.COST_CURRENCY
    return {
        "currency": currency,
        "priced": bool(prices),
        "prices": {name: str(price) for name, price in sorted(prices.items())},
        "teams": [
            {"name": row["name"], **cost_figures(row["data"], prices, currency)} for row in teams
        ],
        "shares": [
            {
                "queue": share.get("queue_name", ""),
                "name": share.get("share_name", ""),
                "team": share.get("team_name", ""),
                **cost_figures(share, prices, currency),
            }
            for share in shares
        ],
    }


def _cost_table(cost: dict) -> dict:
    """A row per team, then per share: GPU-hours within limit, borrowed and lent to
    others, and, when any type has a price, their cost (empty where the scope's types
    have none) and the types left uncosted."""
    categories = list(COST_LABELS)
    header = [
        "scope",
        "queue",
        "share",
        "team",
        *(f"{COST_LABELS[c]} GPU-hours" for c in categories),
    ]
    units = ["", "", "", "", *["GPU-hours"] * len(categories)]
    if cost["priced"]:
        header += [f"cost {COST_LABELS[c]}" for c in categories] + ["types without a price"]
        units += [cost["currency"]] * len(categories) + [""]

    def cells(row: dict) -> list:
        values = [row["gpu_hours"][c] for c in categories]
        if cost["priced"]:
            money = row["cost"] or {}
            values += [money.get(c) for c in categories] + [" ".join(row["unpriced_types"])]
        return values

    rows = [["team", "", "", row["name"], *cells(row)] for row in cost["teams"]]
    rows += [
        ["share", row["queue"], row["name"], row["team"], *cells(row)] for row in cost["shares"]
    ]
    return {
        "title": "GPU-hours and cost by team and by share",
        "header": header,
        "units": units,
        "rows": rows,
    }


# -- the tables behind every figure (also the CSV exports and the pack) -----------------

STAT_KEYS = ("n", "p50", "p90", "q1", "q3", "min", "max", "mean")
RECLAIM_KEYS = ("n", "p50", "p90", "max")
NO_CLASS_LABEL = "(no class)"


def _stats(stats: dict) -> list:
    return [stats.get(key) for key in STAT_KEYS]


def _share_cells(share: dict) -> list:
    return [share.get("queue_name", ""), share.get("share_name", ""), share.get("team_name", "")]


def tables(view: dict) -> dict[str, dict]:
    """name -> {"title", "header", "units", "rows"} for each dataset of the page."""
    current = view["current"] or {}
    shares = view["shares"]
    result: dict[str, dict] = {}
    previous_values = kpi_values(view["previous"])
    partial = partial_months(view["current"], view["previous"], view["month"])
    result["kpis"] = {
        "title": "Key figures",
        "header": ["figure", "value", "unit", "n", "previous month", "previous n", "comparable"],
        "units": ["", "(see unit)", "", "count", "(see unit)", "count", "yes/no"],
        "rows": [
            [
                card["label"],
                card["value"],
                KPI_BY_KEY[card["key"]].unit,
                card["n"],
                previous_values[card["key"]][0],
                previous_values[card["key"]][1],
                "yes"
                if not partial
                and comparable(KPI_BY_KEY[card["key"]], card["n"], previous_values[card["key"]][1])
                else "no",
            ]
            for card in view["kpis"]
        ],
    }
    categories = f.CAPACITY_CATEGORIES
    result["capacity"] = {
        "title": "Capacity use by share",
        "header": [
            "queue",
            "share",
            "team",
            *(f"{c} GPU-hours" for c in categories),
            *(f"{c} instance-hours" for c in categories),
            "entitlement use",
        ],
        "units": ["", "", "", *["GPU-hours"] * 4, *["instance-hours"] * 4, "fraction"],
        "rows": [
            _share_cells(share)
            + [share["gpu_hours"][c] for c in categories]
            + [share["instance_hours"][c] for c in categories]
            + [share["entitlement_use"]]
            for share in shares
        ],
    }
    turnaround_rows = []
    for share in shares:
        for group in ("within", "borrowed"):
            turnaround_rows.append(
                _share_cells(share) + [group, *_stats(share["turnaround_by_borrowing_s"][group])]
            )
    result["turnaround"] = {
        "title": "Turnaround by share and by whether the job ran on borrowed capacity",
        "header": ["queue", "share", "team", "ran", *STAT_KEYS],
        "units": ["", "", "", "", "count", *["seconds"] * 7],
        "rows": turnaround_rows,
    }
    result["waiting"] = {
        "title": "Waiting, entitlement honoured and time to reclaim by share",
        "header": [
            "queue",
            "share",
            "team",
            "wait n",
            "wait p50",
            "wait p90",
            "entitled starts",
            "honoured",
            "entitlement honoured",
            "time to reclaim n",
            "time to reclaim p50",
            "time to reclaim p90",
            "waiting at end",
            "oldest waiting",
        ],
        "units": [
            "",
            "",
            "",
            "count",
            "seconds",
            "seconds",
            "count",
            "count",
            "fraction",
            "count",
            "seconds",
            "seconds",
            "jobs",
            "seconds",
        ],
        "rows": [
            _share_cells(share)
            + [
                share["wait_s"]["n"],
                share["wait_s"].get("p50"),
                share["wait_s"].get("p90"),
                share["entitlement_honoured"]["n"],
                share["entitlement_honoured"]["honoured"],
                share["entitlement_honoured"]["fraction"],
                share["time_to_reclaim_s"]["n"],
                share["time_to_reclaim_s"].get("p50"),
                share["time_to_reclaim_s"].get("p90"),
                share["jobs_waiting_at_end"]["n"],
                share["jobs_waiting_at_end"]["oldest_s"],
            ]
            for share in shares
        ],
    }
    result["reclaim"] = {
        "title": "Time to reclaim by share (the lender that waited)",
        "header": ["queue", "share", "team", "n", "p50", "p90", "max"],
        "units": ["", "", "", "count", "seconds", "seconds", "seconds"],
        "rows": [
            _share_cells(share) + [share["reclaim_time_s"].get(key) for key in RECLAIM_KEYS]
            for share in shares
        ],
    }
    result["classes"] = {
        "title": "Reclaims and interruptions by workload class",
        "header": [
            "workload class",
            "time to reclaim n",
            "time to reclaim p50",
            "time to reclaim p90",
            "time to reclaim max",
            *(f"stops {kind}" for kind in f.STOP_KINDS),
            *(f"lost {kind}" for kind in f.STOP_KINDS),
            "preemptions avoided",
            "jobs spared",
        ],
        "units": [
            "",
            "count",
            *["seconds"] * 3,
            *["count"] * len(f.STOP_KINDS),
            *["GPU-hours"] * len(f.STOP_KINDS),
            "count",
            "jobs",
        ],
        "rows": [
            [name or NO_CLASS_LABEL]
            + [figures_["reclaim_time_s"].get(key) for key in RECLAIM_KEYS]
            + [figures_["stops"][kind] for kind in f.STOP_KINDS]
            + [figures_["lost_gpu_hours_by_stop"][kind] for kind in f.STOP_KINDS]
            + [figures_["preemptions_avoided"]["avoided"], figures_["preemptions_avoided"]["jobs"]]
            for name, figures_ in current.get("by_class", {}).items()
        ],
    }
    stops = current.get("stops", {}).get("by_cause", {})
    lost_by_stop = current.get("lost_gpu_hours_by_stop", {}).get("by_cause", {})
    result["stops"] = {
        "title": "Lost GPU-hours by cause and by how the preempted job stopped",
        "header": ["cause", "stopped", "stops", "lost GPU-hours"],
        "units": ["", "", "count", "GPU-hours"],
        "rows": [
            [cause, kind, stops[cause][kind], lost_by_stop[cause][kind]]
            for cause in f.PREEMPTION_CAUSES
            if cause in stops
            for kind in f.STOP_KINDS
        ],
    }
    result["lost"] = {
        "title": "Lost GPU-hours by cause and preemptions per week",
        "header": [
            "week starting",
            *(f"lost {c}" for c in f.LOST_CAUSES),
            *(f"preemptions {c}" for c in f.PREEMPTION_CAUSES),
        ],
        "units": ["date", *["GPU-hours"] * len(f.LOST_CAUSES), *["count"] * 3],
        "rows": [
            [week["week"]]
            + [week["lost_gpu_hours"][c] for c in f.LOST_CAUSES]
            + [week["preemptions"][c] for c in f.PREEMPTION_CAUSES]
            for week in current.get("weeks", [])
        ],
    }
    result["recovery"] = {
        "title": "Recovery of preempted jobs that ended this month",
        "header": ["stage", "jobs"],
        "units": ["", "count"],
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
        "units": ["date", "count", "count", *["count"] * len(urgencies)],
        "rows": [
            [week["week"], week["policy_edits"], week["exception_changes"]]
            + [week["exceptions_filed"].get(name, 0) for name in urgencies]
            for week in current.get("weeks", [])
        ],
    }
    result["yielders"] = {
        "title": f"Repeated yielders ({f.REPEATED_YIELDER_PREEMPTIONS} or more preemptions)",
        "header": ["job", "queue", "share", "team", "preemptions", "state", "reason", "ended"],
        "units": ["", "", "", "", "count", "", "", "UTC"],
        "rows": [
            [
                y["name"],
                y["queue"],
                y["share"],
                y["team"],
                y["preemptions"],
                y["state"],
                y["reason"],
                y["finished_at"],
            ]
            for y in view["yielders"]
        ],
    }
    result["shares"] = _signals_table("Signals by share", shares, "share")
    result["teams"] = _teams_table(view["teams"])
    result["trend"] = _trend_table(view["trend"])
    result["cost"] = _cost_table(view["cost"])
    return result


SIGNAL_COLUMNS = (
    # (header, unit, how to read it from a rollup)
    ("GPU-hours delivered", "GPU-hours", lambda d: d["delivered_gpu_hours"]),
    ("entitled GPU-hours", "GPU-hours", lambda d: d["entitled_gpu_hours"]),
    ("borrowed GPU-hours", "GPU-hours", lambda d: d["gpu_hours"]["borrowed"]),
    ("idle lendable GPU-hours", "GPU-hours", lambda d: d["gpu_hours"]["idle_lendable"]),
    ("idle reserved GPU-hours", "GPU-hours", lambda d: d["gpu_hours"]["idle_reserved"]),
    ("entitlement use", "fraction", lambda d: d["entitlement_use"]),
    ("runs", "count", lambda d: d["runs"]),
    ("jobs succeeded", "count", lambda d: d["jobs_succeeded"]),
    ("jobs failed", "count", lambda d: d["jobs_failed"]),
    ("jobs ended", "count", lambda d: d["jobs_ended"]),
    ("turnaround p50", "seconds", lambda d: d["turnaround_s"].get("p50")),
    ("turnaround n", "count", lambda d: d["turnaround_s"]["n"]),
    ("wait p90", "seconds", lambda d: d["wait_s"].get("p90")),
    ("wait n", "count", lambda d: d["wait_s"]["n"]),
    ("waiting at end", "jobs", lambda d: d["jobs_waiting_at_end"]["n"]),
    ("entitlement honoured", "fraction", lambda d: d["entitlement_honoured"]["fraction"]),
    ("entitled starts", "count", lambda d: d["entitlement_honoured"]["n"]),
    ("lender wait p90", "seconds", lambda d: d["time_to_reclaim_s"].get("p90")),
    ("lender wait n", "count", lambda d: d["time_to_reclaim_s"]["n"]),
    ("time to reclaim p50", "seconds", lambda d: d["reclaim_time_s"].get("p50")),
    ("time to reclaim p90", "seconds", lambda d: d["reclaim_time_s"].get("p90")),
    ("time to reclaim max", "seconds", lambda d: d["reclaim_time_s"].get("max")),
    ("time to reclaim n", "count", lambda d: d["reclaim_time_s"]["n"]),
    (
        "lost stopped without checkpoint",
        "GPU-hours",
        lambda d: d["lost_gpu_hours_by_stop"]["total"]["stopped_without_checkpoint"],
    ),
    (
        "stops checkpointed on notice",
        "count",
        lambda d: d["stops"]["total"]["checkpointed_on_notice"],
    ),
    ("preemptions avoided", "count", lambda d: d["preemptions_avoided"]["avoided"]),
    ("preemptions", "count", lambda d: d["preemptions_total"]),
    ("reclaims", "count", lambda d: d["preemptions"]["reclaim"]),
    ("jobs preempted", "count", lambda d: d["jobs_preempted"]),
    ("lost GPU-hours", "GPU-hours", lambda d: d["lost_gpu_hours_total"]),
    ("lost per 1,000 GPU-hours", "GPU-hours", lambda d: d["lost_gpu_hours_per_1000"]),
    ("restart overhead GPU-hours", "GPU-hours", lambda d: d["restart_overhead_gpu_hours"]),
    ("goodput", "fraction", lambda d: d["goodput"]),
    ("completion rate of preempted", "fraction", lambda d: d["completion_rate_preempted"]),
    ("preempted jobs ended", "count", lambda d: d["preempted_ended"]),
    ("retries exhausted", "count", lambda d: d["retries_exhausted"]),
    ("policy edits", "count", lambda d: d["policy_edits"]),
    ("exceptions approved", "count", lambda d: d["exceptions"]["approved"]),
    ("exceptions active", "count", lambda d: d["exceptions"]["active"]),
    ("priority changes", "count", lambda d: d["priority_changes"]),
)


def _signals_table(title: str, rows: list[dict], kind: str) -> dict:
    names = ["queue", "share", "team"] if kind == "share" else ["team"]
    return {
        "title": title,
        "header": [*names, *(header for header, _, _ in SIGNAL_COLUMNS)],
        "units": [*[""] * len(names), *(unit for _, unit, _ in SIGNAL_COLUMNS)],
        "rows": [
            (_share_cells(row) if kind == "share" else [row.get("team_name", "")])
            + [read(row) for _, _, read in SIGNAL_COLUMNS]
            for row in rows
        ],
    }


def _teams_table(team_rows_: list[dict]) -> dict:
    table = _signals_table("Signals by team", [row["data"] for row in team_rows_], "team")
    table["header"] += [*FAIRNESS_COLUMNS]
    table["units"] += ["GPU-hours", "ratio", "count", "fraction", "fraction"]
    for cells, row in zip(table["rows"], team_rows_, strict=True):
        fair = row["fairness"]
        cells += [
            fair["fair_gpu_hours"],
            fair["ratio"],
            fair["queues"],
            fair["delivered_fraction"],
            fair["entitled_fraction"],
        ]
    return table


# The team table's fairness (formulas.fairness_across_queues): the ratio combines the
# team's queues; the parts are of its one queue (empty when it worked in several).
FAIRNESS_COLUMNS = (
    "fair GPU-hours",
    "fairness ratio",
    "queues compared",
    "part of its queue's delivered",
    "part of its queue's entitlement",
)


def _trend_table(trend: list) -> dict:
    """A row per month; a month without figures has empty cells (never zeros), and a
    partial month says how many days it measures."""
    return {
        "title": "The last 12 months",
        "header": ["month", *(kpi.label for kpi in KPIS), "days measured", "whole month"],
        "units": ["YYYY-MM", *(kpi.unit for kpi in KPIS), "days", "yes/no"],
        "rows": [
            [f"{month:%Y-%m}"] + [kpi_values(data)[kpi.key][0] for kpi in KPIS] + _measured(data)
            for month, data in trend
        ],
    }


def _measured(data: dict | None) -> list:
    if not data or "coverage" not in data:
        return [None, None]
    coverage = data["coverage"]
    return [coverage["seconds"] / 86400, "no" if coverage["partial"] else "yes"]


def dashboard_view(*, stored: dict, month: dt.date, queue_id: int | None) -> dict:
    """Everything the page, its CSV exports and the pack show, from stored rollups
    (rollups.rollups_read)."""
    current, previous, shares = stored["current"], stored["previous"], stored["shares"]
    with_queue = queue_id is None and len({s.get("queue_id") for s in shares}) > 1
    yielders = sorted(
        (y for share in shares for y in share["yielders"]),
        key=lambda y: (-y["preemptions"], y["finished_at"], y["name"]),
    )
    teams = team_rows(stored["teams"], shares, stored.get("queues", {}))
    view = {
        "month": month,
        "previous_month": previous_month(month),
        "current": current,
        "previous": previous,
        "shares": shares,
        "teams": teams,
        "trend": stored["trend"],
        "computed_at": stored["computed_at"],
        "kpis": kpi_cards(current, previous, stored["trend"], month),
        "partial": partial_label(current),
        "yielders": yielders,
        "figures": {},
    }
    labels = {id(share): share_label(share, with_queue) for share in shares}
    if current:
        view["figures"] = {
            "capacity": figures.capacity_bars(
                [{"name": labels[id(s)], "gpu_hours": s["gpu_hours"]} for s in shares]
            ),
            "turnaround": figures.turnaround_boxes(
                [
                    {
                        "name": labels[id(share)],
                        "within": share["turnaround_by_borrowing_s"]["within"],
                        "borrowed": share["turnaround_by_borrowing_s"]["borrowed"],
                    }
                    for share in shares
                ]
            ),
            "waiting": figures.wait_bars(
                [{"name": labels[id(share)], "stats": share["wait_s"]} for share in shares]
            ),
            "reclaim": figures.reclaim_bars(
                [{"name": labels[id(s)], "stats": s["reclaim_time_s"]} for s in shares]
            ),
            "stops": figures.stop_bars(
                current["lost_gpu_hours_by_stop"]["total"], current["stops"]["total"]
            ),
            "lost": figures.lost_weekly(current["weeks"]),
            "recovery": figures.recovery_funnel(
                preempted=current["preempted_ended"],
                resumed=current["preempted_resumed"],
                succeeded=current["preempted_succeeded"],
                failed=current["preempted_failed"],
            ),
            "policy": figures.policy_weekly(current["weeks"]),
        }
    if any(data for _, data in stored["trend"]):
        view["figures"]["trend"] = figures.capacity_trend(
            [
                {
                    "month": f"{m:%b %Y}",
                    "partial": partial_label(data),
                    "gpu_hours": data["gpu_hours"] if data else None,
                    "lost_per_1000": data["lost_gpu_hours_per_1000"] if data else None,
                }
                for m, data in stored["trend"]
            ]
        )
    view["cost"] = cost_view(stored.get("prices") or {}, shares, teams)
    view["tables"] = tables(view)
    # The page's table equivalents of the reclaim figures (the same rows as the CSVs).
    view["reclaim_rows"] = [
        [labels[id(share)], *row[3:]]
        for share, row in zip(shares, view["tables"]["reclaim"]["rows"], strict=True)
        if share["reclaim_time_s"]["n"]
    ]
    view["class_rows"] = view["tables"]["classes"]["rows"]
    return view


# The charts in page order: (dataset, title, caption: what it shows, what to look for).
CHARTS = (
    (
        "capacity",
        "Capacity use by share",
        "GPU-hours of each share this month: used within its limit (blue), run on "
        "capacity borrowed from others (amber), its limit left idle and lent (light grey) "
        f"or held for it (hatched grey, {spoken_list(strategies_that(holds_idle=True))}). "
        "Long grey bars are entitlement nobody "
        "used; long amber bars mean the share relies on lending.",
    ),
    (
        "turnaround",
        "Turnaround by share",
        "Time from submission to finish of the jobs that succeeded this month, per share "
        "(n in the label): blue boxes for jobs that ran only within their share's limit, "
        "amber for jobs that ran on borrowed capacity (box: middle half; line: median; "
        "whiskers: shortest and longest). Look for shares whose boxes sit high.",
    ),
    (
        "waiting",
        "Wait to first start by share",
        "p50 and p90 of the time the jobs that first started this month waited after "
        "submission, per share (n in the label). Jobs still waiting at the month's end "
        "are in the table below.",
    ),
    (
        "reclaim",
        "Time to reclaim by share",
        "How long each share's jobs waited to take back capacity they had lent (p50, p90 "
        "and the longest, n in the label): from the moment the job could start only by "
        "reclaiming to its start, while the borrowers' minimum runtime and notice ran. "
        "0 s is an immediate reclaim.",
    ),
    (
        "stops",
        "How preempted jobs stopped",
        "GPU-hours lost by preempted jobs, by how they stopped (n stops in the label): "
        "at once without notice, at the end of their notice without a checkpoint (back "
        "to the last periodic one), or after checkpointing on notice (nothing lost).",
    ),
    (
        "lost",
        "Lost work and preemptions per week",
        "GPU-hours of work lost each week by cause (bars) and the number of preemptions "
        "(line). Reclaims are lending working as agreed; what they lose depends on "
        "checkpoints.",
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
        "by urgency (purple), per week.",
    ),
    (
        "trend",
        "The last 12 months",
        "Capacity use per month by category (bars) and lost GPU-hours per 1,000 delivered "
        "(line). A month without figures is a gap marked “no figures”, never a line drawn "
        "through it; a month measured in part (a first month started mid-month, the month "
        "under way) shows its days on its label.",
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
