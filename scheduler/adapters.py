"""The one bridge between the database and the engine's snapshot types.

`queue_snapshot` reads a queue's policy and its live jobs into an engine
Snapshot; the live scheduler applies the engine's decisions back elsewhere.
Times in a snapshot are integer seconds since the Unix epoch.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from governance.models import JobQueue, QuotaShare
from scheduler.engine import PendingJob, QueueSpec, RunningJob, ShareSpec, Snapshot
from scheduler.models import Job


def epoch_seconds(moment) -> int:
    return int(moment.timestamp())


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


def _running(jobs: Iterable[Job], now: int) -> tuple[RunningJob, ...]:
    return tuple(
        RunningJob(
            id=str(job.pk),
            share=job.share.name,
            priority=job.priority,
            instance_type=job.instance_type.name,
            instances=job.instances,
            started_at=epoch_seconds(job.started_at) if job.started_at else now,
            start_seq=job.start_seq,
            protected_until=epoch_seconds(job.protected_until) if job.protected_until else None,
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
        )
        for job in jobs
    )


def _pending(jobs: Iterable[Job]) -> tuple[PendingJob, ...]:
    return tuple(
        PendingJob(
            id=str(job.pk),
            share=job.share.name,
            priority=job.priority,
            instance_type=job.instance_type.name,
            instances=job.instances,
            submitted_at=epoch_seconds(job.submitted_at),
            submit_seq=job.pk,
        )
        for job in jobs
    )


def queue_snapshot(queue: JobQueue, *, now=None) -> tuple[Snapshot, int]:
    """The queue's policy and live jobs as an engine Snapshot, and `now` in epoch seconds."""
    now_seconds = epoch_seconds(now or timezone.now())
    live = list(
        Job.objects.filter(queue=queue, state__in=[Job.State.RUNNING, Job.State.RUNNABLE])
        .select_related("share", "instance_type")
        .order_by("id")
    )
    snapshot = Snapshot(
        queue=queue_spec(queue),
        shares=tuple(share_spec(share) for share in policy_shares(queue)),
        running=_running([j for j in live if j.state == Job.State.RUNNING], now_seconds),
        pending=_pending([j for j in live if j.state == Job.State.RUNNABLE]),
    )
    return snapshot, now_seconds
