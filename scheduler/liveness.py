"""What the liveness writes (scheduler.services.runners: runners register and beat, the
tick marks itself) and its reads (scheduler.selectors: `/healthz/`, a waiting job's
reason; scheduler.services.runs: runs go only to served instance types) agree on: how
often a runner beats and when it counts as gone, where the last tick is kept, and which
runners are live. Neither a service nor a selector, so both can use it.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.cache import caches
from django.db.models import QuerySet
from django.utils import timezone

from scheduler.models import Runner

TICK_KEY = "scheduler:last-tick"


def runner_beat_seconds() -> float:
    return float(getattr(settings, "RUNNER_BEAT_SECONDS", 5))


def runner_timeout() -> float:
    """Seconds without a beat after which a runner counts as gone."""
    return 3 * runner_beat_seconds()


def tick_cache():
    # A cache other processes can read (Redis, or files on the demo's one machine);
    # without the alias, the default cache.
    return caches["liveness" if "liveness" in settings.CACHES else "default"]


def live_runners(*, now: dt.datetime | None = None) -> QuerySet[Runner]:
    now = now or timezone.now()
    return Runner.objects.filter(
        stopped_at__isnull=True,
        last_seen_at__gte=now - dt.timedelta(seconds=runner_timeout()),
    )


def served_instance_types(*, now: dt.datetime | None = None) -> set[str]:
    served: set[str] = set()
    for types in live_runners(now=now).values_list("instance_types", flat=True):
        served.update(types)
    return served
