"""The dashboard's beat tasks: fresh monthly rollups, and the monthly leadership pack.

Thin and idempotent: a refresh replaces the month's rows in one transaction, so a
task delivered twice, or two overlapping, leave the same figures; the pack is emailed
once per month (governance.dashboards.pack.pack_send_once). Imported by
governance.tasks so Celery's autodiscovery registers them with the other periodic tasks.
"""

from __future__ import annotations

from celery import shared_task
from celery.schedules import crontab
from django.db import OperationalError
from django.utils import timezone

from governance.celery import app
from governance.dashboards.pack import pack_send_once
from governance.dashboards.rollups import rollups_refresh_recent
from governance.dashboards.selectors import last_full_month

RETRY = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": 30,
    "retry_backoff_max": 600,
    "max_retries": 5,
}


@shared_task(name="governance.dashboard.refresh_rollups", acks_late=True, **RETRY)
def refresh_rollups() -> list[str]:
    return [month.isoformat() for month in rollups_refresh_recent()]


@shared_task(name="governance.dashboard.monthly_pack", acks_late=True, **RETRY)
def monthly_pack() -> bool:
    """Last month's pack, emailed to leadership (once, however often delivered)."""
    return pack_send_once(month=last_full_month(timezone.now()))


app.conf.beat_schedule.update(
    {
        # Every 15 minutes: the dashboard's figures are at most a quarter of an hour old.
        "dashboard-rollups": {
            "task": "governance.dashboard.refresh_rollups",
            "schedule": 15 * 60.0,
            "options": {"expires": 14 * 60},
        },
        # The first of each month, 06:00 UTC: last month, with its late events counted.
        "dashboard-monthly-pack": {
            "task": "governance.dashboard.monthly_pack",
            "schedule": crontab(minute=0, hour=6, day_of_month=1),
        },
    }
)
