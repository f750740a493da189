"""Liveness of the live scheduler's moving parts: runners and the scheduler's tick.

A runner is a Celery worker that consumes `instances.<type>` queues and runs the jobs
of `process` queues. It registers when it is ready (with the instance types it
serves), beats every `RUNNER_BEAT_SECONDS`, and marks itself stopped when it shuts
down; one silent for three beats is gone (killed, frozen, or cut off from the
database). The scheduler's liveness is its periodic tick: beat, a scheduling worker
and the database all have to work for a tick to run, so the time of the last tick
says whether jobs are being scheduled at all.

Reads here are small enough for `/healthz/` and a job's page: one query for the live
runners, one for the instance types process queues have capacity of.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.cache import caches
from django.db.models import QuerySet
from django.utils import timezone

from governance.models import JobQueue, QueueCapacity
from scheduler.models import Job, Runner

logger = logging.getLogger(__name__)

INSTANCES_PREFIX = "instances."
TICK_KEY = "scheduler:last-tick"
# A tick this many periods late means the scheduler is not ticking (beat or every
# scheduling worker down); a few periods of slack absorb a busy worker.
TICK_PERIODS_LATE = 5
TICK_SLACK_SECONDS = 10


def runner_beat_seconds() -> float:
    return float(getattr(settings, "RUNNER_BEAT_SECONDS", 5))


def runner_timeout() -> float:
    """Seconds without a beat after which a runner counts as gone."""
    return 3 * runner_beat_seconds()


def instance_types_of_queues(queue_names) -> list[str]:
    """The instance types a worker consuming these Celery queues serves."""
    return sorted(
        {name[len(INSTANCES_PREFIX) :] for name in queue_names if name.startswith(INSTANCES_PREFIX)}
    )


# Writes.


def runner_register(
    *,
    name: str,
    hostname: str,
    pid: int,
    instance_types: list[str],
    now: dt.datetime | None = None,
) -> Runner:
    """A runner starts (or starts again under the same Celery node name)."""
    now = now or timezone.now()
    runner, _ = Runner.objects.update_or_create(
        name=name,
        defaults={
            "hostname": hostname,
            "pid": pid,
            "instance_types": sorted(set(instance_types)),
            "started_at": now,
            "last_seen_at": now,
            "stopped_at": None,
        },
    )
    return runner


def runner_beat(
    *,
    name: str,
    hostname: str,
    pid: int,
    instance_types: list[str],
    now: dt.datetime | None = None,
) -> None:
    """A runner is alive and serves these instance types (its queues may change)."""
    now = now or timezone.now()
    updated = Runner.objects.filter(name=name, pid=pid, stopped_at__isnull=True).update(
        last_seen_at=now, instance_types=sorted(set(instance_types))
    )
    if not updated:
        # Its row was marked stopped or taken over by a restart under the same name
        # while this process was cut off: it is alive, so it says so again.
        runner_register(
            name=name, hostname=hostname, pid=pid, instance_types=instance_types, now=now
        )


def runner_stopped(*, name: str, pid: int, now: dt.datetime | None = None) -> None:
    now = now or timezone.now()
    Runner.objects.filter(name=name, pid=pid).update(stopped_at=now, last_seen_at=now)


def _tick_cache():
    # A cache other processes can read (Redis, or files on the demo's one machine);
    # without the alias, the default cache.
    return caches["liveness" if "liveness" in settings.CACHES else "default"]


def scheduler_ticked(*, now: dt.datetime | None = None) -> None:
    """The periodic tick ran (called by the tick task itself)."""
    now = now or timezone.now()
    _tick_cache().set(TICK_KEY, now.timestamp(), timeout=None)


# Reads.


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


def instance_types_without_runner(*, now: dt.datetime | None = None) -> list[str]:
    """Instance types some `process` queue has capacity of and no live runner serves."""
    needed = set(
        QueueCapacity.objects.filter(
            queue__executor=JobQueue.Executor.PROCESS, instances__gt=0
        ).values_list("instance_type__name", flat=True)
    )
    return sorted(needed - served_instance_types(now=now))


def runner_wait_reason(job: Job, *, now: dt.datetime | None = None) -> str:
    """ "no runner is serving <type>" for a live job of a process queue no runner serves.

    Such a job waits in the broker (or for its turn) until a runner for its instance
    type starts; the job's page says so instead of waiting silently.
    """
    if not job.is_live or job.queue.executor != JobQueue.Executor.PROCESS:
        return ""
    itype = job.instance_type.name
    if itype in served_instance_types(now=now):
        return ""
    return f"no runner is serving {itype}"


def scheduler_liveness(*, now: dt.datetime | None = None) -> dict:
    """{"status": "ok" | "late" | "unknown", "last_tick_age_seconds": float | None}."""
    now = now or timezone.now()
    try:
        last = _tick_cache().get(TICK_KEY)
    except Exception:  # noqa: BLE001 - an unreachable cache is reported, not raised
        logger.exception("cannot read the scheduler's last tick")
        return {"status": "unknown", "last_tick_age_seconds": None}
    if last is None:
        return {"status": "unknown", "last_tick_age_seconds": None}
    age = max(0.0, now.timestamp() - float(last))
    period = float(getattr(settings, "SCHEDULER_TICK_SECONDS", 2))
    late = age > TICK_PERIODS_LATE * period + TICK_SLACK_SECONDS
    return {"status": "late" if late else "ok", "last_tick_age_seconds": round(age, 1)}


def system_health(*, now: dt.datetime | None = None) -> dict:
    """What `/healthz/` reports once the database answered.

    "degraded" (still served with 200: the product works, some jobs cannot run) when
    the scheduler is not ticking or an instance type of a process queue has no live
    runner. Runner names and hosts are left out: the endpoint needs no login.
    """
    now = now or timezone.now()
    scheduler = scheduler_liveness(now=now)
    without = instance_types_without_runner(now=now)
    degraded = scheduler["status"] != "ok" or bool(without)
    return {
        "status": "degraded" if degraded else "ok",
        "database": "ok",
        "scheduler": scheduler,
        "runners": {
            "live": live_runners(now=now).count(),
            "instance_types_without_runner": without,
        },
    }
