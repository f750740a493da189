"""Writes about runs of the `process` executor: claiming a run and its lease,
heartbeats, how the run ended, and recovery of runs whose runner went silent.

A run is one attempt of a job. The runner that claims it gets a lease: a random token
and an expiry. Only the holder of the current attempt's token may report for the run
(heartbeats, its exit, a refusal, a release), and each heartbeat pushes the expiry
forward. The recovery sweep requeues a claimed run only once its lease expired. Any
end of a run (a requeue, a preemption, a termination) fences the attempt: its token
no longer matches a running attempt, so its next heartbeat or report is refused and
its runner stops the process. The runner keeps its side of the bargain too: one that
cannot renew its lease stops its process before the lease expires
(`scheduler.executors.process`).

Every change of a live job's state happens under its queue's row lock, as in
`scheduler.services.jobs`; a heartbeat is a conditional update of the run it names.
"""

from __future__ import annotations

import datetime as dt
import secrets
import signal

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from fleet.locks import lock_queue
from fleet.models import InstanceType, Job, JobEvent, JobQueue
from scheduler import work
from scheduler.executors import executor_for, executor_names
from scheduler.liveness import served_instance_types
from scheduler.services.jobs import locked_live_job
from scheduler.services.passes import DECIDED_FIELDS, request_pass

# Causes a run ends with besides an exit code (FAILED) or that put it back (REQUEUED).
WALL_CLOCK_LIMIT = "wall_clock_limit"  # FAILED: it ran longer than its definition allows
RUNNER_REFUSED = "runner_refused"  # FAILED: the runner cannot run it safely (detail: why)
WORKER_LOST = "worker_lost"  # REQUEUED: its runner stopped renewing the lease
NOT_CLAIMED = "not_claimed"  # REQUEUED: no runner took the run in time (a lost message)
RUNNER_STOPPED = "runner_stopped"  # REQUEUED: its runner shut down and stopped it
CHECKPOINT_BUSY = "checkpoint_busy"  # REQUEUED: an older attempt's process still held it

_REQUEUE_FIELDS = [*DECIDED_FIELDS, "requeues", "lease_token", "lease_expires_at"]


def _seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


def job_claim_run(
    *,
    job_id: int,
    attempt: int,
    worker: str,
    lease_seconds: float,
    now: dt.datetime | None = None,
) -> str | None:
    """Claim a run for one runner: its lease token, once, for the first runner that asks.

    None when the run is not the job's current one or another runner claimed it.
    """
    now = now or timezone.now()
    token = secrets.token_urlsafe(24)
    updated = Job.objects.filter(
        pk=job_id, attempt=attempt, state=Job.State.RUNNING, worker=""
    ).update(
        worker=worker,
        heartbeat_at=now,
        lease_token=token,
        lease_expires_at=now + _seconds(lease_seconds),
    )
    return token if updated else None


def job_heartbeat(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    progress: int,
    checkpointed: int,
    lease_seconds: float,
    now: dt.datetime | None = None,
) -> bool:
    """Renew a run's lease and record its progress; False when the run is over (stop it).

    A conditional update, no lock: it only touches the run it names, and whatever ended
    the run changed its state, attempt or token, so the update matches nothing.
    """
    if not lease_token:
        return False
    now = now or timezone.now()
    updated = Job.objects.filter(
        pk=job_id, attempt=attempt, lease_token=lease_token, state=Job.State.RUNNING
    ).update(
        progress=max(0, progress),
        checkpointed=max(0, checkpointed),
        heartbeat_at=now,
        lease_expires_at=now + _seconds(lease_seconds),
    )
    return bool(updated)


def _locked_run(
    job_id: int, attempt: int, lease_token: str, now: dt.datetime
) -> tuple[JobQueue, Job] | None:
    """The run with its queue locked, if it is still the lease holder's; else None."""
    queue, job = locked_live_job(job_id, now)
    current = (
        job.state == Job.State.RUNNING
        and job.attempt == attempt
        and bool(lease_token)
        and job.lease_token == lease_token
    )
    return (queue, job) if current else None


def _report_figures(job: Job, progress: int | None, checkpointed: int | None) -> None:
    if progress is not None:
        job.progress = max(0, progress)
    if checkpointed is not None:
        job.checkpointed = max(0, checkpointed)


def _fail(job: Job, queue: JobQueue, *, now: dt.datetime, cause: str, detail: dict) -> JobEvent:
    work.on_fail(job, now=now, speed=executor_for(queue).speed, cause=cause)
    return JobEvent(
        job=job, at=now, type=JobEvent.Type.FAILED, cause=cause, attempt=job.attempt, detail=detail
    )


def job_process_exited(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    exit_code: int,
    progress: int | None = None,
    checkpointed: int | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """A job's process ended by itself: 0 is SUCCEEDED, anything else FAILED.

    Refused (returns False) when the run is no longer the caller's: it was preempted,
    terminated or requeued, and whatever did that already recorded it.
    """
    now = now or timezone.now()
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        _report_figures(job, progress, checkpointed)
        job.exit_code = exit_code
        if exit_code == 0:
            work.on_finish(job, at=now, speed=executor_for(queue).speed)
            event = JobEvent(job=job, at=now, type=JobEvent.Type.SUCCEEDED, attempt=attempt)
        else:
            detail = {"exit_code": exit_code}
            if exit_code < 0:
                detail["signal"] = _signal_name(-exit_code)
            event = _fail(job, queue, now=now, cause="exit_code", detail=detail)
        job.save()
        event.save()
        request_pass(queue.pk)
    return True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def job_run_failed(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    cause: str,
    detail: dict | None = None,
    exit_code: int | None = None,
    progress: int | None = None,
    checkpointed: int | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """The runner ended a run FAILED for `cause` (`wall_clock_limit`, `runner_refused`)."""
    now = now or timezone.now()
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        _report_figures(job, progress, checkpointed)
        job.exit_code = exit_code
        event = _fail(job, queue, now=now, cause=cause, detail=detail or {})
        job.save()
        event.save()
        request_pass(queue.pk)
    return True


def _requeue(job: Job, *, now: dt.datetime, speed: float, cause: str) -> JobEvent:
    """Put a running job back in the queue from its last reported checkpoint.

    The run is lost, not the job: `requeues` counts it and it keeps its retry bound
    (a lost runner is not a preemption).
    """
    lost = work.on_interrupt(
        job, now=now, speed=speed, progress=job.progress, saved=job.checkpointed
    )
    job.requeues += 1
    job.lease_token = ""
    job.lease_expires_at = None
    return JobEvent(
        job=job,
        at=now,
        type=JobEvent.Type.REQUEUED,
        cause=cause,
        attempt=job.attempt,
        detail={"lost_work": lost, "resumes_from": job.checkpointed},
    )


def job_run_released(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    cause: str,
    progress: int | None = None,
    checkpointed: int | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """The runner gave a run back without finishing it (`runner_stopped`,
    `checkpoint_busy`): requeue it at once rather than when its lease runs out."""
    now = now or timezone.now()
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        _report_figures(job, progress, checkpointed)
        event = _requeue(job, now=now, speed=executor_for(queue).speed, cause=cause)
        Job.objects.bulk_update([job], _REQUEUE_FIELDS)
        event.save()
        request_pass(queue.pk)
    return True


def jobs_requeue_lost(*, claim_timeout: float, now: dt.datetime | None = None) -> list[int]:
    """Requeue running jobs of process queues whose run is lost.

    A claimed run is lost once its lease expired: its runner stopped renewing it (and,
    if alive, already stopped the process). A run no runner claimed within
    `claim_timeout` is lost only while some runner serves its instance type (its
    message went missing); with none, the message waits in the broker for a runner and
    requeueing would only start the run again.
    """
    now = now or timezone.now()
    lost = _lost(now, claim_timeout)
    candidates = (
        Job.objects.filter(
            state=Job.State.RUNNING, queue__executor__in=executor_names(reconciles=True)
        )
        .filter(lost)
        .values_list("queue_id", flat=True)
    )
    queue_ids = sorted(set(candidates))
    if not queue_ids:
        return []
    served = set(
        InstanceType.objects.filter(name__in=served_instance_types(now=now)).values_list(
            "pk", flat=True
        )
    )
    requeued: list[int] = []
    for queue_id in queue_ids:
        with transaction.atomic():
            queue = lock_queue(queue_id)
            speed = executor_for(queue).speed
            # Row locks: a heartbeat that renewed the lease meanwhile takes the job out.
            jobs = [
                job
                for job in Job.objects.select_for_update()
                .filter(queue=queue, state=Job.State.RUNNING)
                .filter(lost)
                .order_by("pk")
                if job.worker or job.instance_type_id in served
            ]
            if not jobs:
                continue
            events = [_requeue(job, now=now, speed=speed, cause=_lost_cause(job)) for job in jobs]
            Job.objects.bulk_update(jobs, _REQUEUE_FIELDS)
            JobEvent.objects.bulk_create(events)
            requeued.extend(job.pk for job in jobs)
            request_pass(queue.pk)
    return requeued


def _lost_cause(job: Job) -> str:
    return WORKER_LOST if job.worker else NOT_CLAIMED


def _lost(now: dt.datetime, claim_timeout: float) -> Q:
    """Claimed runs whose lease expired (or that never had one), and runs nobody
    claimed within the timeout."""
    claimed = ~Q(worker="")
    expired = Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    unclaimed = Q(worker="", started_at__lt=now - _seconds(claim_timeout))
    return (claimed & expired) | unclaimed
