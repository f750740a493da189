"""What the liveness writes (scheduler.services.runners: runners register and beat, the
tick marks itself) and its reads (scheduler.selectors: `/healthz/`, a waiting job's
reason; scheduler.services.runs: runs go only to served instance types, runs of dead
runners are requeued) agree on: how often a runner beats and when it counts as gone,
its liveness lock, where the last tick is kept, and which runners are live. Neither a
service nor a selector, so both can use it.

Every comparison of a stored time with "now" uses the database's clock (`Now()`), as
every write does: a worker whose own clock is off by minutes neither looks dead nor
makes others look dead. A worker's own clock matters only for its offset, which it
measures (`database_clock_offset`) and reports; past `RUNNER_CLOCK_SKEW_LIMIT_SECONDS`
the health check says "degraded".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.db.models.functions import Now

from core.cache import liveness_cache
from scheduler.models import Runner

TICK_KEY = "scheduler:last-tick"


def runner_beat_seconds() -> float:
    return float(getattr(settings, "RUNNER_BEAT_SECONDS", 5))


def runner_timeout() -> float:
    """Seconds without a beat after which a runner counts as gone."""
    return 3 * runner_beat_seconds()


def clock_skew_limit() -> float:
    return float(getattr(settings, "RUNNER_CLOCK_SKEW_LIMIT_SECONDS", 2))


def runner_dead_after() -> float:
    """Seconds a runner's liveness lock must stay free before its runs are requeued.

    The runner's side of the rule: one that cannot confirm it holds its lock for this
    long has stopped its processes by then (scheduler.executors.process.run); so a run is
    requeued only once no live process can be behind it.
    """
    return float(getattr(settings, "RUNNER_DEAD_AFTER_SECONDS", 6))


def liveness_check_seconds() -> float:
    """How often a runner confirms it still holds its liveness lock."""
    return float(getattr(settings, "RUNNER_LIVENESS_CHECK_SECONDS", 0.5))


def uses_liveness_lock() -> bool:
    """Session advisory locks exist on PostgreSQL; on SQLite (the demo, one machine)
    the lease alone tells a dead runner."""
    return connection.vendor == "postgresql"


def liveness_lock_key(worker: str) -> int:
    """The advisory lock key of a runner incarnation (`host:pid`, as runs name it)."""
    digest = hashlib.sha256(f"qg-runner:{worker}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def database_clock_offset() -> float:
    """This process's clock minus the database's, in seconds (positive: ahead).

    The database's time is read between two readings of ours; the offset is taken at
    the midpoint, so it is off by at most half the round trip. SQLite runs in this
    process, on its clock: the offset is 0 by construction.
    """
    if connection.vendor != "postgresql":
        return 0.0
    with connection.cursor() as cursor:
        before = time.time()
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
        database = float(cursor.fetchone()[0])
        after = time.time()
    return (before + after) / 2 - database


def database_now() -> dt.datetime:
    """The database's clock now (aware, UTC): what a time written from a runner's report
    uses, so an end is never stamped by a runner whose clock is off. PostgreSQL's
    `clock_timestamp()` (not `now()`, the transaction's start); SQLite's `'now'`, read
    by its C library."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT clock_timestamp()")
            return cursor.fetchone()[0]
        cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        text = cursor.fetchone()[0]
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def tick_cache():
    # The scheduler's tick is read by other processes (/healthz/): core's liveness cache.
    return liveness_cache()


def _since(now: dt.datetime | None, seconds: float):
    """`now` (or the database's now) minus `seconds`, for a filter."""
    return (now if now is not None else Now()) - dt.timedelta(seconds=seconds)


def live_runners(*, now: dt.datetime | None = None) -> QuerySet[Runner]:
    return Runner.objects.filter(
        stopped_at__isnull=True, last_seen_at__gte=_since(now, runner_timeout())
    )


def served_instance_types(*, now: dt.datetime | None = None) -> set[str]:
    served: set[str] = set()
    for types in live_runners(now=now).values_list("instance_types", flat=True):
        served.update(types)
    return served
