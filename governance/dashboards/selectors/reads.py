"""What the dashboard, the signals API and the monthly pack read: the stored rollups (one
query a scope), the months that have them, whether they are current, the figures of an
empty scope, and what the policy record says was in force at an instant.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db.models import Q

from fleet.models import InstanceType, JobQueue, QuotaShare
from fleet.selectors import queue_document, share_document
from governance.dashboards.selectors.calendar import (
    month_bounds,
    month_start,
    month_weeks,
    months_back,
    previous_month,
)
from governance.dashboards.selectors.scopes import ALL, Scope, scope_key
from governance.dashboards.selectors.signals import SIGNALS_VERSION, policy_at
from governance.models import MonthlyRollup, PolicyChange

TREND_MONTHS = 12


def dashboard_rollups(
    *, month: dt.date, queue_id: int | None = None, team_id: int | None = None
) -> dict:
    """The stored figures of one scope: one query (and one for the prices).

    Returns {"current", "previous": data or None, "trend": [(month, data or None)] over
    the `TREND_MONTHS` months ending with `month`, "shares": [data of each share in
    scope, by queue then share name], "teams": [data of each team in scope, by name],
    "queues": {queue id: data of each queue in scope} (the totals fairness compares a
    team with), "prices": instance_type_prices(), "computed_at", "stale": [months whose
    rows an older version computed]}.
    """
    month = month_start(month)
    trend_months = months_back(month, TREND_MONTHS)
    scope = scope_key(queue_id=queue_id, team_id=team_id)
    if queue_id is not None:
        shares = Q(scope__startswith=f"q{queue_id}/s")
        teams = Q(scope__startswith=f"q{queue_id}/t")
    else:
        shares = Q(scope__contains="/s")
        teams = Q(scope__startswith="t")
    if team_id is not None:
        shares &= Q(team_id=team_id)
        teams &= Q(team_id=team_id)
    queues = Q(queue_id__isnull=False, share_id__isnull=True, team_id__isnull=True)
    if queue_id is not None:
        queues &= Q(queue_id=queue_id)
    rows = list(
        MonthlyRollup.objects.filter(
            Q(month__in=trend_months, scope=scope) | (Q(month=month) & (shares | teams | queues))
        ).values_list("month", "scope", "data", "computed_at", "version")
    )
    by_month = {}
    result = {
        "current": None,
        "previous": None,
        "shares": [],
        "teams": [],
        "queues": {},
        "computed_at": None,
        "stale": set(),
    }
    for row_month, row_scope, data, computed_at, version in rows:
        if version < SIGNALS_VERSION:
            result["stale"].add(row_month)
        queue_row = row_scope.startswith("q") and "/" not in row_scope
        if row_month == month and queue_row:
            result["queues"][int(row_scope[1:])] = data
        if row_scope == scope:
            by_month[row_month] = data
            if row_month == month:
                result["computed_at"] = computed_at
                if team_id is not None:
                    result["teams"].append(data)  # the one team of the table
        elif queue_row:
            continue  # another queue's row, read for its totals only
        elif "/s" in row_scope:
            result["shares"].append(data)
        else:
            result["teams"].append(data)
    result["current"] = by_month.get(month)
    result["previous"] = by_month.get(previous_month(month))
    result["trend"] = [(m, by_month.get(m)) for m in trend_months]
    result["shares"].sort(key=lambda d: (d.get("queue_name", ""), d.get("share_name", "")))
    result["teams"].sort(key=lambda d: d.get("team_name", ""))
    result["stale"] = sorted(result["stale"])
    result["prices"] = instance_type_prices()
    return result


def team_fairness_rollups(*, month: dt.date, team_id: int) -> tuple[list[dict], dict]:
    """What a team's fairness across queues is computed from (formulas.fairness_by_team):
    the month's rollups of the team's shares, and of the queues they are in (queue id ->
    data). Two queries."""
    month = month_start(month)
    shares = list(
        MonthlyRollup.objects.filter(
            month=month, team_id=team_id, share_id__isnull=False
        ).values_list("data", flat=True)
    )
    queues = {
        data["queue_id"]: data
        for data in MonthlyRollup.objects.filter(
            month=month,
            queue_id__in={share["queue_id"] for share in shares},
            share_id__isnull=True,
            team_id__isnull=True,
        ).values_list("data", flat=True)
    }
    return shares, queues


def instance_type_prices() -> dict[str, Decimal]:
    """The price per instance-hour of each instance type that has one, by name."""
    return dict(
        InstanceType.objects.filter(price_per_hour__isnull=False).values_list(
            "name", "price_per_hour"
        )
    )


def rollup_months() -> list[dt.date]:
    """Months that have rollups, newest first (the month picker)."""
    return list(
        MonthlyRollup.objects.filter(scope=ALL).order_by("-month").values_list("month", flat=True)
    )


def rollup_scope(*, month: dt.date, scope: str) -> tuple[dict, dt.datetime] | None:
    """The stored figures of one scope and month with when they were computed, or None."""
    return (
        MonthlyRollup.objects.filter(month=month_start(month), scope=scope)
        .values_list("data", "computed_at")
        .first()
    )


def rollup_current(*, month: dt.date) -> bool:
    """Whether the month has rollups computed by this version of the signals (or a newer
    one, during a rolling deploy: they hold every figure this version reads)."""
    return MonthlyRollup.objects.filter(
        month=month_start(month), scope=ALL, version__gte=SIGNALS_VERSION
    ).exists()


def empty_signals(*, month: dt.date) -> dict:
    """The figures of a scope with nothing in the month (a share created later)."""
    start, end = month_bounds(month)
    return Scope(len(month_weeks(month))).finish(month_weeks(month), (start, end))


def policy_in_force(*, at: dt.datetime, share_id: int | None = None, queue_id=None) -> dict:
    """What the policy record says a share's policy (`share_document`'s shape), or a
    queue's capacity ({"capacity": {type: instances}}), was at `at` (`signals.policy_at`)."""
    if share_id is not None:
        share = QuotaShare.objects.select_related("team").get(pk=share_id)
        current, key = share_document(share), "capacity_limits"
        records = PolicyChange.objects.filter(target=PolicyChange.Target.SHARE, share_id=share_id)
    else:
        queue = JobQueue.objects.get(pk=queue_id)
        current, key = {"capacity": queue_document(queue)["capacity"]}, "capacity"
        records = PolicyChange.objects.filter(target=PolicyChange.Target.QUEUE, queue_id=queue_id)
    rows = list(records.order_by("created_at", "id").values_list("created_at", "before", "after"))
    return policy_at(rows, at, key, current)
