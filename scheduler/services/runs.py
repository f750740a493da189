"""Writes about runs of the `process` executor: claiming a run and its lease,
heartbeats, how the run ended, and recovery of runs whose runner went silent.

A run is one attempt of a job. The runner that claims it gets a lease: a random token
and an expiry. Only the holder of the current attempt's token may report for the run
(heartbeats, its exit, a refusal, a release), and each heartbeat pushes the expiry
forward. The recovery sweep requeues a claimed run only once its lease expired (or its
runner is dead, see `_requeue_runs_of_dead_runners`). Any end of a run (a requeue, a
preemption, a termination) fences the attempt: its token no longer matches a running
attempt, so its next heartbeat or report is refused and its runner stops the process.

The rule both sides keep, so a requeued run never has a live process behind it: the
lease a runner asks for is the time it keeps its process without news from the
database *plus* the time it needs to stop it (the definition's grace and a kill
margin, `scheduler.executors.process.run.lease_seconds_for`). A runner that cannot renew
keeps its process until only that stopping time is left, then stops it; so a database
stall shorter than the keeping time stops nothing, and the expiry the sweep waits for
is after the process is gone.

Lease expiries are written and compared on the database's clock (`Now()`), never the
caller's: a runner or sweeper whose clock is off cannot make a lease look expired. So
are the times written from a runner's report (an end, its event): the database's clock
read at the report (`liveness.database_now`), and never before the run's start, so no
job ends before it starts whatever the runner's clock says (its offset stays on its
Runner row). A `now` given explicitly (tests, replays) is used as is.

Finished work never runs twice. A runner writes how its program ended in the run area
(`run_area.write_exit_record`) before it reaps it and reports it, and retries that
report for as long as it takes. The sweep, before it requeues a lost run (lease
expired, dead runner), reads that record: a run whose program ended is recorded as it
ended (0 SUCCEEDED, else FAILED with the code) at the record's end time (the runner's
estimate of the database's clock, kept within the run's start and now), not requeued.

Fencing: what the sweep waits for. A runner's watchdog (a process of its own,
scheduler.executors.process.watchdog) kills a run's group by the end of its last
renewed lease less the kill margin, or, for a run with notice, the end of its grace,
even while the runner is frozen; a dead runner's groups die with it. So the sweep frees
a claimed run's capacity only once its lease expired: a lost RUNNING run at its
expiry (`jobs_requeue_lost`), a STOPPING one no sooner than the later of its grace end
plus `JOB_KILL_MARGIN_SECONDS` (`stop_at`) and its lease's expiry
(`passes.stop_due`, `jobs_stop_overdue`).

Every change of a live job's state happens under its queue's row lock, as in
`scheduler.services.jobs`; a heartbeat is a conditional update of the run it names.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import signal
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import DateTimeField, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from fleet.locks import lock_queue
from fleet.models import InstanceType, Job, JobEvent, JobQueue
from scheduler import work
from scheduler.executors import executor_for, executor_names
from scheduler.executors.run_area import RunArea, read_exit_record
from scheduler.liveness import (
    database_now,
    liveness_lock_key,
    runner_dead_after,
    served_instance_types,
    uses_liveness_lock,
)
from scheduler.models import Runner
from scheduler.services.jobs import locked_live_job
from scheduler.services.passes import (
    DECIDED_FIELDS,
    end_notice,
    release_holds,
    request_pass,
    stop_due,
    stop_job,
)

# Causes a run ends with besides an exit code (FAILED) or that put it back (REQUEUED);
# an executor declares its own (`Executor.causes`).
WALL_CLOCK_LIMIT = "wall_clock_limit"  # FAILED: it ran longer than its definition allows
RUNNER_REFUSED = "runner_refused"  # FAILED: the runner cannot run it safely (detail: why)
WORKER_LOST = "worker_lost"  # REQUEUED: its runner stopped renewing the lease
NOT_CLAIMED = "not_claimed"  # REQUEUED: no runner took the run in time (a lost message)
RUNNER_STOPPED = "runner_stopped"  # REQUEUED: its runner shut down and stopped it
CHECKPOINT_BUSY = "checkpoint_busy"  # REQUEUED: an older attempt's process still held it
# FAILED: the runner cannot write the checkpoint directory (full, read-only; detail: why)
CHECKPOINT_DISK_FULL = "checkpoint_disk_full"

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
    now = now if now is not None else Now()
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


@dataclass(frozen=True)
class Renewal:
    """A renewed lease (truthy). `notice_left` is not None when the run has notice
    (STOPPING): seconds of its grace left on the database's clock, after which the
    runner kills its process (SIGTERM at once, SIGKILL then)."""

    notice_left: float | None = None


def job_heartbeat(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    progress: int,
    checkpointed: int,
    lease_seconds: float,
    now: dt.datetime | None = None,
) -> Renewal | None:
    """Renew a run's lease and record its progress; None when the run is over (stop it).

    A conditional update, no lock: it only touches the run it names, and whatever ended
    the run changed its state, attempt or token, so the update matches nothing. A run
    with notice (STOPPING) is still its runner's: its lease is renewed and the reply
    says how much grace is left.
    """
    if not lease_token:
        return None
    now = now if now is not None else Now()
    run = Job.objects.filter(pk=job_id, attempt=attempt, lease_token=lease_token)
    figures = {
        "progress": max(0, progress),
        "checkpointed": max(0, checkpointed),
        "heartbeat_at": now,
        "lease_expires_at": now + _seconds(lease_seconds),
    }
    if run.filter(state=Job.State.RUNNING).update(**figures):
        return Renewal()
    if not run.filter(state=Job.State.STOPPING).update(**figures):
        return None
    return Renewal(notice_left=job_notice_left(job_id=job_id, attempt=attempt, now=now) or 0.0)


def job_notice_left(*, job_id: int, attempt: int, now=None) -> float | None:
    """Seconds of grace left to a run with notice (database clock); None without."""
    row = (
        Job.objects.filter(pk=job_id, attempt=attempt, state=Job.State.STOPPING)
        .annotate(
            clock=Value(now, output_field=DateTimeField())
            if isinstance(now, dt.datetime)
            else Now()
        )
        .values_list("grace_until", "clock")
        .first()
    )
    if row is None or row[0] is None:
        return None
    return max(0.0, (row[0] - row[1]).total_seconds())


def _locked_run(
    job_id: int, attempt: int, lease_token: str, now: dt.datetime
) -> tuple[JobQueue, Job] | None:
    """The run with its queue locked, if it is still the lease holder's; else None."""
    queue, job = locked_live_job(job_id, now)
    current = (
        job.state in Job.HOLDING_STATES
        and job.attempt == attempt
        and bool(lease_token)
        and job.lease_token == lease_token
    )
    return (queue, job) if current else None


def _report_time(now: dt.datetime | None) -> dt.datetime:
    """The time a runner's report is written at: the database's clock (or `now`)."""
    return now if now is not None else database_now()


def _not_before_start(job: Job, at: dt.datetime) -> dt.datetime:
    """An end never before the run's start (its start was stamped by another clock)."""
    return max(at, job.started_at) if job.started_at is not None else at


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
    now = _report_time(now)
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        _report_figures(job, progress, checkpointed)
        return _exited(queue, job, exit_code=exit_code, now=_not_before_start(job, now))


def _exited(queue: JobQueue, job: Job, *, exit_code: int, now: dt.datetime) -> bool:
    """Record that the run's program ended by itself; caller holds the queue lock."""
    job.exit_code = exit_code
    releases = []
    if job.state == Job.State.STOPPING:
        if exit_code != 0 or job.terminate_at_stop:
            # Its runner had not told it to stop yet: it stops now all the same.
            return _stopped(queue, job, now=now, exit_code=exit_code)
        releases = end_notice(job, at=now, hold=True)  # its work done first (V7)
    if exit_code == 0:
        work.on_finish(job, at=now, speed=executor_for(queue).speed)
        event = JobEvent(job=job, at=now, type=JobEvent.Type.SUCCEEDED, attempt=job.attempt)
    else:
        detail = {"exit_code": exit_code}
        if exit_code < 0:
            detail["signal"] = _signal_name(-exit_code)
        event = _fail(job, queue, now=now, cause="exit_code", detail=detail)
    job.save()
    event.save()
    release_holds(releases)
    request_pass(queue.pk)
    return True


def job_run_stopped(
    *,
    job_id: int,
    attempt: int,
    lease_token: str,
    exit_code: int | None,
    progress: int | None = None,
    checkpointed: int | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """The runner stopped a run with notice (SIGTERM, SIGKILL at the grace) and its
    process group is gone: the job stops now (spec V9) and its capacity is free. The
    figures are the status file's last: what the process checkpointed is kept."""
    now = _report_time(now)
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None or run[1].state != Job.State.STOPPING:
            return False
        queue, job = run
        _report_figures(job, progress, checkpointed)
        return _stopped(queue, job, now=_not_before_start(job, now), exit_code=exit_code)


def _stopped(queue: JobQueue, job: Job, *, now: dt.datetime, exit_code: int | None) -> bool:
    """Stop a STOPPING run whose process is gone; caller holds the queue lock."""
    job.exit_code = exit_code
    events, release = stop_job(
        job,
        at=now,
        speed=executor_for(queue).speed,
        progress=job.progress,
        saved=job.checkpointed,
    )
    if exit_code is not None and events:
        events[0].detail["exit_code"] = exit_code
    Job.objects.bulk_update(
        [job], [*DECIDED_FIELDS, "lease_token", "lease_expires_at", "exit_code"]
    )
    JobEvent.objects.bulk_create(events)
    release_holds(release)
    request_pass(queue.pk)
    return True


def jobs_stop_overdue(*, now: dt.datetime | None = None) -> list[int]:
    """Stop the STOPPING runs of process queues whose runner never reported the exit
    by the end of their grace plus the kill margin (`stop_at`): the runner killed the
    process at the grace, or it is gone (and its processes with it)."""
    now = now or timezone.now()
    queue_ids = sorted(
        set(
            Job.objects.filter(
                state=Job.State.STOPPING,
                stop_at__lte=now,
                queue__executor__in=executor_names(needs_runner=True, reconciles=True),
            ).values_list("queue_id", flat=True)
        )
    )
    stopped: list[int] = []
    for queue_id in queue_ids:
        with transaction.atomic():
            queue = lock_queue(queue_id)
            done = stop_due(queue, now=now)
            if done:
                request_pass(queue.pk)
            stopped += done
    return stopped


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
    """The runner ended a run FAILED for `cause` (`wall_clock_limit`, `runner_refused`,
    `checkpoint_disk_full`)."""
    now = _report_time(now)
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        now = _not_before_start(job, now)
        _report_figures(job, progress, checkpointed)
        job.exit_code = exit_code
        releases = end_notice(job, at=now, hold=True) if job.state == Job.State.STOPPING else []
        event = _fail(job, queue, now=now, cause=cause, detail=detail or {})
        job.save()
        event.save()
        release_holds(releases)
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
    detail: dict | None = None,
) -> bool:
    """The runner gave a run back without finishing it (`runner_stopped`,
    `checkpoint_busy`): requeue it at once rather than when its lease runs out.
    `detail` is added to the REQUEUED event's (what its cause's wording names)."""
    now = _report_time(now)
    with transaction.atomic():
        run = _locked_run(job_id, attempt, lease_token, now)
        if run is None:
            return False
        queue, job = run
        now = _not_before_start(job, now)
        _report_figures(job, progress, checkpointed)
        if job.state == Job.State.STOPPING:  # given back during notice: it has stopped
            return _stopped(queue, job, now=now, exit_code=None)
        event = _requeue(job, now=now, speed=executor_for(queue).speed, cause=cause)
        event.detail.update(detail or {})
        Job.objects.bulk_update([job], _REQUEUE_FIELDS)
        event.save()
        request_pass(queue.pk)
    return True


def jobs_requeue_lost(*, claim_timeout: float, now: dt.datetime | None = None) -> list[int]:
    """Requeue running jobs of process queues whose run is lost.

    A claimed run is lost once its lease expired: its runner stopped renewing it and,
    if alive, stopped the process before that (the lease covers the stop, see the
    module's docstring). On PostgreSQL a run is lost sooner when its runner is dead:
    its liveness lock stayed free for `RUNNER_DEAD_AFTER_SECONDS`
    (`_requeue_runs_of_dead_runners`). A run no runner claimed within `claim_timeout`
    is lost only while some runner serves its instance type (its message went
    missing); with none, the message waits in the broker for a runner and requeueing
    would only start the run again.

    Times are compared on the database's clock unless `now` is given (tests, replays).
    """
    clock = now if now is not None else Now()
    event_time = now or timezone.now()
    lost = _lost(clock, claim_timeout)
    candidates = (
        _process_runs().filter(lost).values_list("queue_id", flat=True).order_by("queue_id")
    )
    queue_ids = sorted(set(candidates))
    requeued: list[int] = []
    if queue_ids:
        served = set(
            InstanceType.objects.filter(name__in=served_instance_types(now=now)).values_list(
                "pk", flat=True
            )
        )
        for queue_id in queue_ids:
            requeued.extend(
                _requeue_in_queue(
                    queue_id,
                    lost,
                    now=event_time,
                    keep=lambda job: bool(job.worker) or job.instance_type_id in served,
                )
            )
    if now is None and uses_liveness_lock():
        requeued.extend(_requeue_runs_of_dead_runners(now=event_time))
    return requeued


def _process_runs():
    # Runs under a runner's lease; a run without a runner has none (its executor
    # reconciles it).
    return Job.objects.filter(
        state=Job.State.RUNNING,
        queue__executor__in=executor_names(needs_runner=True, reconciles=True),
    )


def _requeue_in_queue(queue_id: int, lost: Q, *, now: dt.datetime, keep) -> list[int]:
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
            if keep(job)
        ]
        if not jobs:
            return []
        ended = [job for job in jobs if _end_by_record(queue, job, now=now)]
        jobs = [job for job in jobs if job not in ended]
        events = [_requeue(job, now=now, speed=speed, cause=_lost_cause(job)) for job in jobs]
        Job.objects.bulk_update(jobs, _REQUEUE_FIELDS)
        JobEvent.objects.bulk_create(events)
        request_pass(queue.pk)
    return [job.pk for job in jobs]


def _end_by_record(queue: JobQueue, job: Job, *, now: dt.datetime) -> bool:
    """End a lost run as its program ended, if its runner kept an exit record
    (`run_area.write_exit_record`); False when there is none: the run is lost."""
    if not job.worker:
        return False
    record = read_exit_record(RunArea.of(job.pk, job.attempt).exit)
    if record is None or record.get("attempt", job.attempt) != job.attempt:
        return False
    at = now
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        at = min(now, dt.datetime.fromtimestamp(float(record["ended_at"]), tz=dt.UTC))
    _report_figures(job, record.get("progress"), record.get("checkpointed"))
    job.lease_token = ""
    job.lease_expires_at = None
    return _exited(queue, job, exit_code=record["exit_code"], now=_not_before_start(job, at))


def _requeue_runs_of_dead_runners(*, now: dt.datetime) -> list[int]:
    """Requeue the runs of runners whose liveness lock has been free long enough.

    A runner holds its lock (a session advisory lock, `runner_take_liveness_lock`) for
    its whole life; a killed runner's connection closes and the lock is free at once.
    A free lock alone proves nothing (a live runner's connection may have dropped), so
    the first sweep that finds it free notes the time on the runner's row, and the
    runs are requeued only when a later sweep finds it still free
    `RUNNER_DEAD_AFTER_SECONDS` after that, with no new taking of the lock between
    (taking it clears the note). The lock was held when the runner last confirmed it,
    so the note, and any requeue, comes at least that long after its last confirmation;
    a live runner that could not confirm its lock for that long has stopped its
    processes by then, its watchdog does it even if the runner is frozen
    (scheduler.executors.process.run, "Liveness"), and a dead one's processes died with
    it (PR_SET_PDEATHSIG, its watchdog): no live process is behind a requeued run. A
    runner that re-takes its lock sooner (a connection lost for a few seconds) keeps
    its runs. The sweep holds the lock itself (for its
    transaction) while it decides, so the runner cannot take it back meanwhile.

    Runners that never took a lock (SQLite, or a runner of an older release) are left
    to their leases.
    """
    workers = sorted(set(_process_runs().exclude(worker="").values_list("worker", flat=True)))
    dead_after = dt.timedelta(seconds=runner_dead_after())
    requeued: list[int] = []
    for worker in workers:
        hostname, _, pid = worker.rpartition(":")
        if not pid.isdigit():
            continue
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [liveness_lock_key(worker)])
                if not cursor.fetchone()[0]:
                    continue  # held: the runner is alive
            runner = (
                Runner.objects.select_for_update()
                .filter(hostname=hostname, pid=int(pid), liveness_locked_at__isnull=False)
                .first()
            )
            if runner is None:
                continue
            if runner.liveness_free_since is None:
                Runner.objects.filter(pk=runner.pk).update(liveness_free_since=Now())
                continue
            dead = Runner.objects.filter(
                pk=runner.pk, liveness_free_since__lte=Now() - dead_after
            ).exists()
            if not dead:
                continue
            runs_of = Q(worker=worker)
            queues = _process_runs().filter(runs_of).values_list("queue_id", flat=True)
            queue_ids = sorted(set(queues))
            for queue_id in queue_ids:
                requeued.extend(_requeue_in_queue(queue_id, runs_of, now=now, keep=bool))
    return requeued


def _lost_cause(job: Job) -> str:
    return WORKER_LOST if job.worker else NOT_CLAIMED


def _lost(clock, claim_timeout: float) -> Q:
    """Claimed runs whose lease expired (or that never had one), and runs nobody
    claimed within the timeout; `clock` is a time or the database's `Now()`."""
    claimed = ~Q(worker="")
    expired = Q(lease_expires_at__lt=clock) | Q(lease_expires_at__isnull=True)
    unclaimed = Q(worker="", started_at__lt=clock - _seconds(claim_timeout))
    return (claimed & expired) | unclaimed
