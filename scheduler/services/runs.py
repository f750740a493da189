"""Writes about runs of the `process` executor: claiming a run, heartbeats, the
process's exit, and recovery of runs whose runner stopped reporting.

Every change of a live job's state happens under its queue's row lock, as in
`scheduler.services.jobs`; a heartbeat is a conditional update of the run it names.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.models import JobQueue
from scheduler.executors import executor_for
from scheduler.models import Job, JobEvent
from scheduler.services import work
from scheduler.services.jobs import locked_live_job
from scheduler.services.passes import DECIDED_FIELDS, lock_queue, request_pass


def job_heartbeat(
    *,
    job_id: int,
    attempt: int,
    progress: int,
    checkpointed: int,
    worker: str,
    now: dt.datetime | None = None,
) -> bool:
    """Record a running process's progress; False when its run is over (stop it).

    A conditional update, no lock: it only touches the run it names, and a pass that
    ended the run has changed its state or attempt, so the update matches nothing.
    """
    now = now or timezone.now()
    updated = Job.objects.filter(pk=job_id, attempt=attempt, state=Job.State.RUNNING).update(
        progress=max(0, progress),
        checkpointed=max(0, checkpointed),
        heartbeat_at=now,
        worker=worker,
    )
    return bool(updated)


def job_claim_run(
    *, job_id: int, attempt: int, worker: str, now: dt.datetime | None = None
) -> bool:
    """Claim a run for one worker: true once, for the first worker that asks."""
    now = now or timezone.now()
    updated = Job.objects.filter(
        pk=job_id, attempt=attempt, state=Job.State.RUNNING, worker=""
    ).update(worker=worker, heartbeat_at=now)
    return bool(updated)


def job_process_exited(
    *,
    job_id: int,
    attempt: int,
    exit_code: int,
    progress: int | None = None,
    checkpointed: int | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """A job's process ended by itself: 0 is SUCCEEDED, anything else FAILED.

    Ignored (returns False) when the run is no longer current: it was preempted or
    terminated, and the pass or the termination already recorded that.
    """
    now = now or timezone.now()
    with transaction.atomic():
        queue, job = locked_live_job(job_id, now)
        if job.state != Job.State.RUNNING or job.attempt != attempt:
            return False
        speed = executor_for(queue).speed
        if progress is not None:
            job.progress = progress
        if checkpointed is not None:
            job.checkpointed = checkpointed
        job.exit_code = exit_code
        if exit_code == 0:
            work.on_finish(job, at=now, speed=speed)
            event = JobEvent(job=job, at=now, type=JobEvent.Type.SUCCEEDED, attempt=attempt)
        else:
            work.on_fail(job, now=now, speed=speed, cause="exit_code")
            event = JobEvent(
                job=job,
                at=now,
                type=JobEvent.Type.FAILED,
                cause="exit_code",
                attempt=attempt,
                detail={"exit_code": exit_code},
            )
        job.save()
        event.save()
        request_pass(queue.pk)
    return True


def jobs_requeue_lost(*, timeout: float, now: dt.datetime | None = None) -> list[int]:
    """Requeue running jobs of process queues whose worker stopped sending heartbeats.

    The run is lost, not the job: it goes back to RUNNABLE from its last reported
    checkpoint, `requeues` counts it, and it keeps its retry bound (a dead worker is
    not a preemption). A run never claimed by any worker within `timeout` counts too.
    """
    now = now or timezone.now()
    stale_before = now - dt.timedelta(seconds=timeout)
    candidates = (
        Job.objects.filter(
            state=Job.State.RUNNING, queue__executor=JobQueue.Executor.PROCESS
        ).filter(_stale(stale_before))
    ).values_list("queue_id", flat=True)
    requeued: list[int] = []
    for queue_id in sorted(set(candidates)):
        with transaction.atomic():
            queue = lock_queue(queue_id)
            speed = executor_for(queue).speed
            jobs = list(
                Job.objects.filter(queue=queue, state=Job.State.RUNNING).filter(
                    _stale(stale_before)
                )
            )
            events = []
            for job in jobs:
                lost = work.on_interrupt(
                    job, now=now, speed=speed, progress=job.progress, saved=job.checkpointed
                )
                job.requeues += 1
                events.append(
                    JobEvent(
                        job=job,
                        at=now,
                        type=JobEvent.Type.REQUEUED,
                        cause="worker_lost",
                        attempt=job.attempt,
                        detail={"lost_work": lost, "resumes_from": job.checkpointed},
                    )
                )
                requeued.append(job.pk)
            if jobs:
                Job.objects.bulk_update(jobs, [*DECIDED_FIELDS, "requeues"])
                JobEvent.objects.bulk_create(events)
                request_pass(queue.pk)
    return requeued


def _stale(stale_before: dt.datetime) -> Q:
    """Runs without a heartbeat since `stale_before` (or never claimed since then)."""
    return Q(heartbeat_at__lt=stale_before) | Q(
        heartbeat_at__isnull=True, started_at__lt=stale_before
    )
