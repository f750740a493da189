"""Monthly rollups: the signals of a month, computed once and stored.

`rollups_refresh` recomputes one month from the raw record and replaces its rows in
one transaction (idempotent: running it twice leaves the same rows). The beat task
(governance.dashboards.tasks) refreshes the current and the previous month; admins
refresh any month on demand from the dashboard. Rows an older version of the signals
computed are recomputed when read (`rollups_read`), so a new figure never reads as
missing.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from governance.dashboards.selectors.calendar import month_start, previous_month
from governance.dashboards.selectors.reads import dashboard_rollups
from governance.dashboards.selectors.signals import SIGNALS_VERSION, month_signals
from governance.models import MonthlyRollup


def _scope_ids(data: dict) -> dict:
    return {
        "queue_id": data.get("queue_id"),
        "share_id": data.get("share_id"),
        "team_id": data.get("team_id"),
    }


def rollups_refresh(*, month: dt.date, now: dt.datetime | None = None) -> int:
    """Recompute and store the month's rollups; returns the number of rows."""
    month = month_start(month)
    now = now or timezone.now()
    signals = month_signals(month=month, now=now)
    rows = [
        MonthlyRollup(
            month=month,
            scope=scope,
            data=data,
            version=SIGNALS_VERSION,
            computed_at=now,
            **_scope_ids(data),
        )
        for scope, data in signals.items()
    ]
    with transaction.atomic():
        MonthlyRollup.objects.filter(month=month).delete()
        MonthlyRollup.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def rollups_refresh_recent(*, now: dt.datetime | None = None) -> list[dt.date]:
    """The beat's refresh: the month under way and the one before it (late events, such
    as jobs that ended after the month turned, still change the last full month), and a
    few months an older version computed."""
    now = now or timezone.now()
    current = month_start(now.astimezone(dt.UTC).date())
    months = [previous_month(current), current]
    for month in months:
        rollups_refresh(month=month, now=now)
    return months + rollups_refresh_stale(now=now)


def rollups_read(
    *, month: dt.date, queue_id: int | None = None, team_id: int | None = None
) -> dict:
    """selectors.reads.dashboard_rollups, after recomputing the shown month and the one before
    it if an older version computed them. Older stale months of the trend are left to
    the beat (`rollups_refresh_stale`) and shown as gaps meanwhile: recomputing a year
    would hold the page for minutes."""
    stored = dashboard_rollups(month=month, queue_id=queue_id, team_id=team_id)
    shown = {month_start(month), previous_month(month_start(month))}
    due = [stale for stale in stored["stale"] if stale in shown]
    if not due:
        return _without_stale(stored)
    for stale in due:
        rollups_refresh(month=stale)
    return _without_stale(dashboard_rollups(month=month, queue_id=queue_id, team_id=team_id))


def _without_stale(stored: dict) -> dict:
    stale = set(stored["stale"])
    if stale:
        stored["trend"] = [(m, None if m in stale else data) for m, data in stored["trend"]]
    return stored


def rollups_refresh_stale(*, limit: int = 3, now: dt.datetime | None = None) -> list[dt.date]:
    """Recompute up to `limit` months that an older version of the signals computed,
    newest first (the beat runs it with the 15-minute refresh)."""
    months = list(
        MonthlyRollup.objects.filter(scope="all", version__lt=SIGNALS_VERSION)
        .order_by("-month")
        .values_list("month", flat=True)[:limit]
    )
    for month in months:
        rollups_refresh(month=month, now=now)
    return months
