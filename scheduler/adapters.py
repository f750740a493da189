"""The one bridge between the database and the engine's snapshot types.

`queue_state` reads a queue's policy and its live jobs into an engine Snapshot (plus
the few columns the live scheduler compares its results with); `queue_snapshot` is
the same for callers that only want the snapshot (the impact preview). The live
scheduler applies the engine's decisions back in `scheduler.services.passes`.

Times in a snapshot are integer seconds since the Unix epoch. A job's engine id is
its primary key zero-padded to a fixed width, so the engine's id tie-break (a string
comparison) orders jobs as their submission order does, and `int()` turns it back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import connection
from django.db.models import F, FloatField, Func
from django.utils import timezone

from governance.models import InstanceType, JobQueue, QuotaShare
from scheduler.engine import PendingJob, QueueSpec, RunningJob, ShareSpec, Snapshot
from scheduler.models import Job

ENGINE_ID_WIDTH = 12


def epoch_seconds(moment) -> int:
    return int(moment.timestamp())


def engine_id(pk: int) -> str:
    return f"{pk:0{ENGINE_ID_WIDTH}d}"


def job_pk(job_id: str) -> int:
    return int(job_id)


def share_spec(share: QuotaShare) -> ShareSpec:
    return share_spec_from_document(
        {
            "name": share.name,
            "strategy": share.strategy,
            "borrow_limit": share.borrow_limit,
            "in_share_preemption": share.in_share_preemption,
            "state": share.state,
            "capacity_limits": {
                limit.instance_type.name: limit.max_instances for limit in share.limits.all()
            },
        }
    )


def share_spec_from_document(doc: dict) -> ShareSpec:
    """A ShareSpec from the scenario-format/history document of a share."""
    borrow_limit = doc.get("borrow_limit")
    return ShareSpec(
        name=doc["name"],
        capacity_limits=dict(doc.get("capacity_limits", {})),
        strategy=doc["strategy"],
        borrow_limit=-1 if borrow_limit is None else borrow_limit,
        in_share_preemption=bool(doc.get("in_share_preemption", False)),
        enabled=doc.get("state", QuotaShare.State.ENABLED) == QuotaShare.State.ENABLED,
    )


def queue_spec(queue: JobQueue, capacity: dict[str, int] | None = None) -> QueueSpec:
    if capacity is None:
        capacity = {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}
    return QueueSpec(
        capacity=capacity,
        default_preemption_retries=queue.default_preemption_retries,
        runnable_time_limit=queue.runnable_time_limit,
    )


def policy_shares(queue: JobQueue) -> list[QuotaShare]:
    return list(
        queue.shares.select_related("team")
        .prefetch_related("limits__instance_type")
        .order_by("position", "id")
    )


@dataclass(frozen=True)
class LiveJob:
    """The columns of a live job the pass compares its results with."""

    pk: int
    state: str
    reason: str
    misconfigured: bool  # its misconfiguration clock is running


@dataclass(frozen=True)
class QueueState:
    snapshot: Snapshot
    now: int
    live: dict[int, LiveJob]
    next_start_seq: int


class EpochSeconds(Func):
    """A timestamp as float seconds since the epoch, computed by PostgreSQL.

    Loading 10,000 integers is several times cheaper than parsing 10,000 timestamps,
    and a pass reads every live job's times. Other databases get the timestamp itself
    (SQLite's text timestamps are parsed in Python anyway); `seconds_of` reads both.
    """

    template = "EXTRACT(EPOCH FROM %(expressions)s)::double precision"
    output_field = FloatField()


def epoch_column(name: str):
    return EpochSeconds(F(name)) if connection.vendor == "postgresql" else F(name)


def fetch_rows(queryset) -> list[tuple]:
    """The rows of a `values_list` queryset, on PostgreSQL straight from the cursor.

    Django applies a converter to every value of every row (some 100 ms for a pass's
    11,000 rows × 14 columns); the columns read here (numbers, text, booleans and
    `epoch_column` floats) need none on PostgreSQL, so a pass skips them.
    """
    if connection.vendor != "postgresql":
        return list(queryset)
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def seconds_of(value) -> float | None:
    """Seconds since the epoch of a value read through `epoch_column`."""
    if value is None or isinstance(value, float):
        return value
    return value.timestamp()


def _int_seconds(value) -> int | None:
    seconds = seconds_of(value)
    return None if seconds is None else int(seconds)


def queue_state(queue: JobQueue, *, now: dt.datetime) -> QueueState:
    """The queue's policy and live jobs at `now`: one query for the jobs, values only."""
    now_seconds = epoch_seconds(now)
    shares = policy_shares(queue)
    share_names = {share.pk: share.name for share in shares}
    type_names = dict(InstanceType.objects.values_list("pk", "name"))
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    live: dict[int, LiveJob] = {}
    max_seq = 0
    rows = (
        Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES)
        .order_by("pk")
        .values_list(
            "pk",
            "state",
            "share_id",
            "priority",
            "instance_type_id",
            "instances",
            epoch_column("submitted_at"),
            epoch_column("started_at"),
            "start_seq",
            epoch_column("protected_until"),
            "preemptions",
            "preemption_retries",
            epoch_column("misconfigured_since"),
            "reason",
        )
    )
    for (
        pk,
        state,
        share_id,
        priority,
        itype_id,
        instances,
        submitted_at,
        started_at,
        start_seq,
        protected_until,
        preemptions,
        retries,
        misconfigured_since,
        reason,
    ) in fetch_rows(rows):
        live[pk] = LiveJob(pk, state, reason, misconfigured_since is not None)
        if state == Job.State.RUNNING:
            max_seq = max(max_seq, start_seq)
            started = _int_seconds(started_at)
            running.append(
                RunningJob(
                    id=engine_id(pk),
                    share=share_names[share_id],
                    priority=priority,
                    instance_type=type_names[itype_id],
                    instances=instances,
                    started_at=now_seconds if started is None else started,
                    start_seq=start_seq,
                    protected_until=_int_seconds(protected_until),
                    preemptions=preemptions,
                    preemption_retries=retries,
                )
            )
        else:
            pending.append(
                PendingJob(
                    id=engine_id(pk),
                    share=share_names[share_id],
                    priority=priority,
                    instance_type=type_names[itype_id],
                    instances=instances,
                    submitted_at=_int_seconds(submitted_at),
                    submit_seq=pk,
                    preemptions=preemptions,
                    preemption_retries=retries,
                    protected_until=_int_seconds(protected_until),
                    misconfigured_since=_int_seconds(misconfigured_since),
                )
            )
    snapshot = Snapshot(
        queue=queue_spec(queue),
        shares=tuple(share_spec(share) for share in shares),
        running=tuple(running),
        pending=tuple(pending),
    )
    return QueueState(snapshot=snapshot, now=now_seconds, live=live, next_start_seq=max_seq + 1)


def queue_snapshot(queue: JobQueue, *, now=None) -> tuple[Snapshot, int]:
    """The queue's policy and live jobs as an engine Snapshot, and `now` in epoch seconds."""
    state = queue_state(queue, now=now or timezone.now())
    return state.snapshot, state.now
