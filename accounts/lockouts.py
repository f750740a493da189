"""Login lockouts (django-axes): which username and address pairs are locked now, and
lifting one early. Axes records failed logins in its AccessAttempt table; a pair is
locked while it has AXES_FAILURE_LIMIT failures and the last one is under
AXES_COOLOFF_TIME old."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.models import AccessAttempt
from axes.utils import reset
from django.conf import settings
from django.db.models import Max, Sum
from django.utils import timezone

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lockout:
    username: str
    ip_address: str
    failures: int
    last_failure: datetime
    until: datetime

    @property
    def minutes_left(self) -> int:
        return max(1, math.ceil((self.until - timezone.now()).total_seconds() / 60))


def lockout_list(*, username: str | None = None, ip_address: str | None = None) -> list[Lockout]:
    """The pairs locked now, most recent first (or the one pair asked for)."""
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    now = timezone.now()
    attempts = AccessAttempt.objects.all()
    if username is not None:
        attempts = attempts.filter(username=username)
    if ip_address is not None:
        attempts = attempts.filter(ip_address=ip_address)
    rows = (
        attempts.values("username", "ip_address")
        .annotate(failures=Sum("failures_since_start"), last_failure=Max("attempt_time"))
        .filter(failures__gte=settings.AXES_FAILURE_LIMIT, last_failure__gt=now - cool_off)
        .order_by("-last_failure", "username", "ip_address")
    )
    return [
        Lockout(
            username=row["username"] or "",
            ip_address=row["ip_address"] or "",
            failures=row["failures"],
            last_failure=row["last_failure"],
            until=row["last_failure"] + cool_off,
        )
        for row in rows
    ]


def lockout_clear(*, actor, username: str, ip_address: str) -> int:
    """Lift a lockout before it expires; the number of attempt records removed."""
    removed = reset(username=username, ip=ip_address)
    log.info("%s lifted the login lockout of %r from %s", actor, username, ip_address)
    return removed
