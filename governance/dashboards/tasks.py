"""The dashboard's beat tasks: fresh monthly rollups, and the monthly leadership pack.

Thin and idempotent: a refresh replaces the month's rows in one transaction, so a
task delivered twice, or two overlapping, leave the same figures; the pack is emailed
once per month (governance.dashboards.pack.pack_send_once). Every process registers
them (GovernanceConfig.ready; workers also autodiscover them); their beat schedule is
in config/celery.py with every periodic task.
"""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from core.celery import retry_policy
from governance.dashboards.pack import pack_send_once
from governance.dashboards.rollups import rollups_refresh_recent
from governance.dashboards.selectors.calendar import last_full_month

RETRY = retry_policy(patient=True)


@shared_task(name="governance.dashboard.refresh_rollups", acks_late=True, **RETRY)
def refresh_rollups() -> list[str]:
    return [month.isoformat() for month in rollups_refresh_recent()]


@shared_task(name="governance.dashboard.monthly_pack", acks_late=True, **RETRY)
def monthly_pack() -> bool:
    """Last month's pack, emailed to leadership (once, however often delivered)."""
    return pack_send_once(month=last_full_month(timezone.now()))
