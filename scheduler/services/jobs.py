"""Writes to jobs: submission (one or in bulk), priority, termination, what processes
report (heartbeats, exits), recovery from dead workers, and decisions on failed jobs.

Every change of a live job's state happens under its queue's row lock (the pass's
lock), so a finish, a termination or a requeue can never cross a pass deciding about
the same job. Each change appends JobEvent rows and asks for a pass after commit.
`now` is a parameter everywhere so tests drive time without sleeping.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from django.db import transaction
from django.utils import timezone

from governance.models import InstanceType, JobQueue, QueueCapacity, QuotaShare, UrgencyDefinition
from scheduler.executors import executor_for
from scheduler.models import Job, JobDecision, JobEvent
from scheduler.services import work
from scheduler.services.passes import finish_due, lock_queue, request_pass

MAX_PRIORITY = 9999
MAX_BULK = 5000
NON_FIELD = "non_field_errors"
# Failures that need a person to decide what happens next (the "needs a decision" list).
NEEDS_DECISION_CAUSES = ("retries_exhausted", "time_limit", "exit_code")


class JobError(Exception):
    """A request about jobs breaks a rule. `errors` maps a field name to its messages."""

    def __init__(self, errors: Mapping[str, list[str]]):
        self.errors = {key: list(messages) for key, messages in errors.items()}
        first_field, first_messages = next(iter(self.errors.items()))
        super().__init__(f"{first_field}: {first_messages[0]}")


@dataclass(frozen=True)
class JobData:
    """A job as the form, the API or a resubmission gives it.

    `priority` None takes the urgency definition's priority (or 0);
    `preemption_retries` None takes the queue's default retry bound.
    """

    share: QuotaShare
    name: str
    instance_type: InstanceType
    expected_duration: int
    instances: int = 1
    priority: int | None = None
    urgency: UrgencyDefinition | None = None
    checkpoint_interval: int | None = None
    restart_overhead: int = 0
    preemption_retries: int | None = None
    command: str = ""


# Submission.


def _queue_types(queue_ids: set[int]) -> dict[int, set[int]]:
    types: dict[int, set[int]] = defaultdict(set)
    for queue_id, type_id in QueueCapacity.objects.filter(queue_id__in=queue_ids).values_list(
        "queue_id", "instance_type_id"
    ):
        types[queue_id].add(type_id)
    return types


def _urgency_teams(urgencies: set[UrgencyDefinition]) -> dict[int, set[int]]:
    teams: dict[int, set[int]] = {u.pk: set() for u in urgencies}
    through = UrgencyDefinition.invokers.through
    for urgency_id, team_id in through.objects.filter(urgencydefinition_id__in=teams).values_list(
        "urgencydefinition_id", "team_id"
    ):
        teams[urgency_id].add(team_id)
    return teams


def _errors_of(data: JobData, queue_types: set[int], urgency_teams: dict[int, set[int]]):
    errors: dict[str, list[str]] = {}

    def add(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    if not data.name.strip():
        add("name", "give the job a name")
    if data.instance_type.pk not in queue_types:
        add(
            "instance_type",
            f"queue {data.share.queue.name} has no {data.instance_type.name}; "
            "choose one of the queue's instance types",
        )
    if data.instances < 1:
        add("instances", "a job needs at least 1 instance")
    if data.expected_duration < 1:
        add("expected_duration", "must be at least 1 second")
    if data.priority is not None and not 0 <= data.priority <= MAX_PRIORITY:
        add("priority", f"must be between 0 and {MAX_PRIORITY}")
    if data.checkpoint_interval is not None and data.checkpoint_interval < 1:
        add("checkpoint_interval", "must be at least 1 second (or empty: never)")
    if data.restart_overhead < 0:
        add("restart_overhead", "cannot be negative")
    if data.preemption_retries is not None and data.preemption_retries < 0:
        add("preemption_retries", "cannot be negative (empty: the queue's default)")
    if data.urgency is not None:
        allowed = urgency_teams.get(data.urgency.pk, set())
        if allowed and data.share.team_id not in allowed:
            add(
                "urgency",
                f"team {data.share.team.name} may not invoke {data.urgency.name}; "
                "pick another urgency or set a priority",
            )
    if data.share.queue.executor == JobQueue.Executor.PROCESS and not data.command.strip():
        add("command", f"queue {data.share.queue.name} runs real processes: say what to run")
    return errors


def jobs_validate(*, items: Sequence[JobData]) -> dict[str, list[str]]:
    """Every problem with the items; keys are `field` for one item, `jobs[i].field` else."""
    if not items:
        return {NON_FIELD: ["submit at least one job"]}
    if len(items) > MAX_BULK:
        return {NON_FIELD: [f"submit at most {MAX_BULK} jobs at once"]}
    queue_types = _queue_types({item.share.queue_id for item in items})
    urgency_teams = _urgency_teams({item.urgency for item in items if item.urgency is not None})
    errors: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        for key, messages in _errors_of(
            item, queue_types[item.share.queue_id], urgency_teams
        ).items():
            errors[key if len(items) == 1 else f"jobs[{index}].{key}"] = messages
    return errors


def jobs_submit(
    *,
    items: Sequence[JobData],
    submitted_by=None,
    now: dt.datetime | None = None,
    resubmitted_from: Job | None = None,
) -> list[Job]:
    """Submit jobs (all or none): SUBMITTED events, then a pass of each queue after commit.

    A job submitted into a DISABLED share is accepted and ends FAILED at once (cause
    `share_disabled`), as the scenario format says.
    """
    errors = jobs_validate(items=items)
    if errors:
        raise JobError(errors)
    now = now or timezone.now()
    jobs = []
    for item in items:
        share = item.share
        disabled = not share.enabled
        priority = item.priority
        if priority is None:
            priority = item.urgency.priority if item.urgency is not None else 0
        retries = item.preemption_retries
        if retries is None:
            retries = share.queue.default_preemption_retries
        jobs.append(
            Job(
                queue_id=share.queue_id,
                share=share,
                name=item.name.strip(),
                priority=priority,
                urgency=item.urgency,
                instance_type=item.instance_type,
                instances=item.instances,
                expected_duration=item.expected_duration,
                checkpoint_interval=item.checkpoint_interval,
                restart_overhead=item.restart_overhead,
                preemption_retries=retries,
                command=item.command.strip(),
                submitted_by=submitted_by if getattr(submitted_by, "pk", None) else None,
                submitted_at=now,
                resubmitted_from=resubmitted_from,
                state=Job.State.FAILED if disabled else Job.State.RUNNABLE,
                reason="share_disabled" if disabled else "",
                runnable_since=None if disabled else now,
                finished_at=now if disabled else None,
            )
        )
    with transaction.atomic():
        Job.objects.bulk_create(jobs, batch_size=1000)
        events = []
        for job in jobs:
            events.append(JobEvent(job=job, at=now, type=JobEvent.Type.SUBMITTED))
            if job.state == Job.State.FAILED:
                events.append(
                    JobEvent(job=job, at=now, type=JobEvent.Type.FAILED, cause="share_disabled")
                )
        JobEvent.objects.bulk_create(events, batch_size=2000)
        for queue_id in sorted({job.queue_id for job in jobs if job.state == Job.State.RUNNABLE}):
            request_pass(queue_id)
    return jobs


def job_submit(*, data: JobData, submitted_by=None, now: dt.datetime | None = None) -> Job:
    return jobs_submit(items=[data], submitted_by=submitted_by, now=now)[0]


# Changes of live jobs, under the queue lock.


def locked_live_job(job_id: int, now: dt.datetime) -> tuple[JobQueue, Job]:
    """The job with its queue locked, after ending what finished by `now` (a simulated
    job whose work is done is not terminated or reprioritised: it succeeded)."""
    queue_id = Job.objects.values_list("queue_id", flat=True).get(pk=job_id)
    queue = lock_queue(queue_id)
    finish_due(queue, now=now)
    job = Job.objects.select_related("share__team").get(pk=job_id)
    return queue, job


def job_set_priority(
    *, job_id: int, priority: int, actor=None, now: dt.datetime | None = None
) -> Job:
    if not 0 <= priority <= MAX_PRIORITY:
        raise JobError({"priority": [f"must be between 0 and {MAX_PRIORITY}"]})
    now = now or timezone.now()
    with transaction.atomic():
        queue, job = locked_live_job(job_id, now)
        if not job.is_live:
            raise JobError({"priority": [f"the job has ended ({job.get_state_display()})"]})
        if job.priority == priority:
            return job
        JobEvent.objects.create(
            job=job,
            at=now,
            type=JobEvent.Type.PRIORITY_CHANGED,
            actor=_user(actor),
            attempt=job.attempt,
            detail={"from": job.priority, "to": priority},
        )
        job.priority = priority
        job.save(update_fields=["priority"])
        request_pass(queue.pk)
    return job


def job_terminate(*, job_id: int, actor=None, now: dt.datetime | None = None) -> Job:
    """End a live job FAILED (cause `terminated`); a running process is stopped."""
    now = now or timezone.now()
    with transaction.atomic():
        queue, job = locked_live_job(job_id, now)
        if not job.is_live:
            raise JobError({NON_FIELD: [f"the job has already ended ({job.get_state_display()})"]})
        was_running = job.state == Job.State.RUNNING
        executor = executor_for(queue)
        if was_running:
            job.progress = executor.progress(job, now)
        work.on_fail(job, now=now, speed=executor.speed, cause="terminated")
        job.save()
        JobEvent.objects.create(
            job=job,
            at=now,
            type=JobEvent.Type.FAILED,
            cause="terminated",
            actor=_user(actor),
            attempt=job.attempt,
        )
        request_pass(queue.pk)
    return job


def _user(actor):
    return actor if getattr(actor, "pk", None) else None


# Decisions on failed jobs.


def job_decide(
    *,
    job_id: int,
    kind: str,
    actor=None,
    note: str = "",
    resubmit: Mapping | None = None,
    now: dt.datetime | None = None,
) -> JobDecision:
    """Record what happens to a job that needs a decision.

    `RESUBMITTED` submits a copy (`resubmit` may change `share`, `preemption_retries`
    and `priority`); `EXCEPTION_FILED` notes that an exception request was filed;
    `CLOSED` needs a reason in `note`.
    """
    now = now or timezone.now()
    if kind not in JobDecision.Kind.values:
        raise JobError({"kind": ["choose resubmit, file an exception, or close"]})
    if kind == JobDecision.Kind.CLOSED and not note.strip():
        raise JobError({"note": ["say why the job is closed"]})
    with transaction.atomic():
        job = (
            Job.objects.select_for_update()
            .select_related("share__queue", "instance_type")
            .get(pk=job_id)
        )
        if job.state != Job.State.FAILED or job.reason not in NEEDS_DECISION_CAUSES:
            raise JobError({NON_FIELD: ["only a failed job that needs a decision can have one"]})
        if JobDecision.objects.filter(job=job).exists():
            raise JobError({NON_FIELD: ["a decision on this job was already recorded"]})
        new_job = None
        if kind == JobDecision.Kind.RESUBMITTED:
            changes = dict(resubmit or {})
            data = JobData(
                share=job.share,
                name=job.name,
                instance_type=job.instance_type,
                expected_duration=job.expected_duration,
                instances=job.instances,
                priority=job.priority,
                checkpoint_interval=job.checkpoint_interval,
                restart_overhead=job.restart_overhead,
                preemption_retries=job.preemption_retries,
                command=job.command,
            )
            data = replace(data, **{k: v for k, v in changes.items() if k in _RESUBMIT_FIELDS})
            new_job = jobs_submit(items=[data], submitted_by=actor, now=now, resubmitted_from=job)[
                0
            ]
        return JobDecision.objects.create(
            job=job,
            kind=kind,
            note=note.strip(),
            decided_by=_user(actor),
            decided_at=now,
            new_job=new_job,
        )


_RESUBMIT_FIELDS = {"share", "preemption_retries", "priority", "name"}
