"""Liveness of the live scheduler's moving parts, the writes: runners and the
scheduler's tick say they are alive.

A runner is a Celery worker that consumes `instances.<type>` queues and runs the jobs
of `process` queues. It registers when it is ready (with the instance types it
serves), beats every `RUNNER_BEAT_SECONDS`, and marks itself stopped when it shuts
down; one silent for three beats is gone (killed, frozen, or cut off from the
database). The scheduler's liveness is its periodic tick: beat, a scheduling worker
and the database all have to work for a tick to run, so the time of the last tick
says whether jobs are being scheduled at all. The reads (`/healthz/`, a waiting job's
reason) are in `scheduler.selectors`, what both agree on in `scheduler.liveness`.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from scheduler.liveness import TICK_KEY, tick_cache
from scheduler.models import Runner

INSTANCES_PREFIX = "instances."


def instance_types_of_queues(queue_names) -> list[str]:
    """The instance types a worker consuming these Celery queues serves."""
    return sorted(
        {name[len(INSTANCES_PREFIX) :] for name in queue_names if name.startswith(INSTANCES_PREFIX)}
    )


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


def scheduler_ticked(*, now: dt.datetime | None = None) -> None:
    """The periodic tick ran (called by the tick task itself)."""
    now = now or timezone.now()
    tick_cache().set(TICK_KEY, now.timestamp(), timeout=None)
