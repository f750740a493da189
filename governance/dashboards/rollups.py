"""Monthly rollups: the signals of a month, computed once and stored.

`rollups_refresh` recomputes one month from the raw record and replaces its rows in
one transaction (idempotent: running it twice leaves the same rows). The beat task
(governance.dashboard_tasks) refreshes the current and the previous month; admins
refresh any month on demand from the dashboard.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from governance.dashboards.selectors import (
    month_signals,
    month_start,
    previous_month,
)
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
    signals = month_signals(month=month)
    rows = [
        MonthlyRollup(month=month, scope=scope, data=data, computed_at=now, **_scope_ids(data))
        for scope, data in signals.items()
    ]
    with transaction.atomic():
        MonthlyRollup.objects.filter(month=month).delete()
        MonthlyRollup.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def rollups_refresh_recent(*, now: dt.datetime | None = None) -> list[dt.date]:
    """The beat's refresh: the month under way and the one before it (late events, such
    as jobs that ended after the month turned, still change the last full month)."""
    now = now or timezone.now()
    current = month_start(now.astimezone(dt.UTC).date())
    months = [previous_month(current), current]
    for month in months:
        rollups_refresh(month=month, now=now)
    return months
