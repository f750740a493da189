"""Liveness of the live scheduler's moving parts, the writes: runners and the
scheduler's tick say they are alive.

A runner is a Celery worker that consumes `instances.<type>` queues and runs the jobs
of `process` queues. It registers when it is ready (with the instance types it
serves), beats every `RUNNER_BEAT_SECONDS` (reporting its clock's offset from the
database's), and marks itself stopped when it shuts down; one silent for three beats
is gone (killed, frozen, or cut off from the database). On PostgreSQL it also holds a
liveness lock for its whole life (`runner_take_liveness_lock`), which is free the moment
the process dies: the sweep requeues a dead runner's runs in seconds, not at lease end.
Stored times are the database's clock (`Now()`), never the worker's.
The scheduler's liveness is its periodic tick: beat, a scheduling worker
and the database all have to work for a tick to run, so the time of the last tick
says whether jobs are being scheduled at all. The reads (`/healthz/`, a waiting job's
reason) are in `scheduler.selectors`, what both agree on in `scheduler.liveness`.
"""

from __future__ import annotations

import datetime as dt

from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

from fleet.models import Job
from scheduler.liveness import TICK_KEY, liveness_lock_key, tick_cache
from scheduler.models import Runner

INSTANCES_PREFIX = "instances."


def instance_types_of_queues(queue_names) -> list[str]:
    """The instance types a worker consuming these Celery queues serves."""
    return sorted(
        {name[len(INSTANCES_PREFIX) :] for name in queue_names if name.startswith(INSTANCES_PREFIX)}
    )


def _now(now: dt.datetime | None):
    """The time to store: the one given (tests, replays) or the database's own."""
    return now if now is not None else Now()


def runner_register(
    *,
    name: str,
    hostname: str,
    pid: int,
    instance_types: list[str],
    clock_offset: float | None = None,
    now: dt.datetime | None = None,
) -> Runner:
    """A runner starts: a row of its own incarnation (name and pid).

    Rows of earlier incarnations under the same name stay while a run still names
    their worker (the sweep needs them to requeue those runs); the others go.
    """
    now = _now(now)
    # A STOPPING run names its worker too (the sweep stops it if the runner is gone).
    running = Job.objects.filter(state__in=Job.HOLDING_STATES).exclude(worker="")
    claimed = set(running.values_list("worker", flat=True))
    earlier = Runner.objects.filter(name=name).exclude(pid=pid)
    gone = [row.pk for row in earlier if f"{row.hostname}:{row.pid}" not in claimed]
    Runner.objects.filter(pk__in=gone).delete()
    runner, _ = Runner.objects.update_or_create(
        name=name,
        pid=pid,
        defaults={
            "hostname": hostname,
            "instance_types": sorted(set(instance_types)),
            "started_at": now,
            "last_seen_at": now,
            "stopped_at": None,
            "clock_offset_seconds": clock_offset,
        },
    )
    return runner


def runner_beat(
    *,
    name: str,
    hostname: str,
    pid: int,
    instance_types: list[str],
    clock_offset: float | None = None,
    now: dt.datetime | None = None,
) -> None:
    """A runner is alive, serves these instance types (its queues may change) and its
    clock is `clock_offset` seconds off the database's."""
    updated = Runner.objects.filter(name=name, pid=pid, stopped_at__isnull=True).update(
        last_seen_at=_now(now),
        instance_types=sorted(set(instance_types)),
        clock_offset_seconds=clock_offset,
    )
    if not updated:
        # Its row was marked stopped (or removed) while this process was cut off: it is
        # alive, so it says so again.
        runner_register(
            name=name,
            hostname=hostname,
            pid=pid,
            instance_types=instance_types,
            clock_offset=clock_offset,
            now=now,
        )


def runner_stopped(*, name: str, pid: int, now: dt.datetime | None = None) -> None:
    now = _now(now)
    Runner.objects.filter(name=name, pid=pid).update(stopped_at=now, last_seen_at=now)


def runner_take_liveness_lock(*, name: str, hostname: str, pid: int) -> bool:
    """Take this incarnation's liveness lock on this thread's connection (PostgreSQL).

    The lock is a session advisory lock: it lasts while the connection does, and the
    kernel closes the connection when the process dies, however it dies. True once it
    is held and recorded (`liveness_locked_at`, which tells the sweep that whatever it
    saw free before is over); False while someone else holds it (the sweep, for a
    moment). The caller keeps the connection for as long as it counts on the lock.
    """
    key = liveness_lock_key(f"{hostname}:{pid}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        if not cursor.fetchone()[0]:
            return False
    recorded = Runner.objects.filter(name=name, pid=pid).update(
        liveness_locked_at=Now(), liveness_free_since=None
    )
    if not recorded:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return False
    return True


def runner_liveness_confirmed() -> bool:
    """This thread's connection (the one holding the lock) still works."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0] == 1


def scheduler_ticked(*, now: dt.datetime | None = None) -> None:
    """The periodic tick ran (called by the tick task itself)."""
    now = now or timezone.now()
    tick_cache().set(TICK_KEY, now.timestamp(), timeout=None)
