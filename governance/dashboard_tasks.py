"""The beat task that keeps the dashboard's monthly rollups fresh.

Thin and idempotent: a refresh replaces the month's rows in one transaction, so a
task delivered twice, or two overlapping, leave the same figures. Imported by
governance.tasks so Celery's autodiscovery registers it with the other periodic tasks.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from governance.celery import app
from governance.dashboards.rollups import rollups_refresh_recent

RETRY = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": 30,
    "retry_backoff_max": 600,
    "max_retries": 5,
}


@shared_task(name="governance.dashboard.refresh_rollups", acks_late=True, **RETRY)
def refresh_rollups() -> list[str]:
    return [month.isoformat() for month in rollups_refresh_recent()]


# Every 15 minutes: the dashboard's figures are at most a quarter of an hour old.
app.conf.beat_schedule.update(
    {
        "dashboard-rollups": {
            "task": "governance.dashboard.refresh_rollups",
            "schedule": 15 * 60.0,
            "options": {"expires": 14 * 60},
        }
    }
)
