"""Writes to jobs: submission (one or in bulk, idempotent with a client token),
priority, termination, and decisions on failed jobs.

A job runs a registered job definition (`scheduler.services.job_definitions`): the
submission names a revision and gives values for its parameters; the revision's
defaults fill what the submission leaves out, and its command with the values
substituted is the job's argument vector. Nothing a submitter types is a command.

Every change of a live job's state happens under its queue's row lock (the pass's
lock), so a finish, a termination or a requeue can never cross a pass deciding about
the same job. Each change appends JobEvent rows and asks for a pass after commit.
`now` is a parameter everywhere so tests drive time without sleeping.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import rules
from core.errors import Conflict, InvalidInput
from fleet.locks import lock_queue
from fleet.models import (
    InstanceType,
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    UrgencyDefinition,
    WorkloadClass,
)
from scheduler import work
from scheduler.executors import executor_for
from scheduler.models import JobDecision
from scheduler.services.job_definitions import BOUNDS, isolation_problems, parameters_resolve
from scheduler.services.passes import (
    end_notice,
    finish_due,
    notice_stop_at,
    release_holds,
    request_pass,
    stop_due,
)
from scheduler.services.priorities import job_priority_refusal

MAX_PRIORITY = 9999
MAX_BULK = 5000
MAX_CLIENT_TOKEN = 64
MAX_RETRIES = 10_000
NON_FIELD = "non_field_errors"
# A submission racing another with the same client token loses at the unique
# constraint and, on its next try, finds the winner's job.
TOKEN_TRIES = 3


class JobError(InvalidInput):
    """A request about jobs breaks a rule. `errors` maps a field name to its messages."""


class TokenConflict(Conflict):
    """A client token was used before for another request body.

    `errors` names the token fields; `originals` maps each of them to the job the
    token made.
    """

    def __init__(self, errors: Mapping[str, list[str]], originals: Mapping[str, int]):
        super().__init__(errors)
        self.originals = dict(originals)

    def details(self) -> dict:
        return {"job": next(iter(self.originals.values())), "original_jobs": self.originals}


@dataclass(frozen=True)
class JobData:
    """A job as the form, the API or a resubmission gives it.

    `revision` is the definition revision it runs and `parameters` the submitter's
    values for it. The revision's defaults fill `instance_type`, `instances`,
    `expected_duration`, `checkpoint_interval` and `restart_overhead` when they are
    None. `priority` None takes the urgency definition's priority (or 0);
    `preemption_retries` None takes the queue's default retry bound.
    `client_token` (API) makes the submission idempotent for its submitter;
    `fingerprint` is the hash of the request body it came with (`request_fingerprint`).
    """

    share: QuotaShare
    name: str
    revision: JobDefinitionRevision | None = None
    parameters: Mapping = field(default_factory=dict)
    instance_type: InstanceType | None = None
    expected_duration: int | None = None
    instances: int | None = None
    priority: int | None = None
    urgency: UrgencyDefinition | None = None
    checkpoint_interval: int | None = None
    restart_overhead: int | None = None
    preemption_retries: int | None = None
    client_token: str = ""
    fingerprint: str = ""


@dataclass(frozen=True)
class Submitted:
    """One item's outcome: its job, and whether this request created it (False: the
    client token's original job)."""

    job: Job
    created: bool


def request_fingerprint(body: Mapping) -> str:
    """The hash of a request body without its client token: equal bodies, equal hashes,
    whatever the order of their keys."""
    canonical = {key: value for key, value in body.items() if key != "client_token"}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# Submission.


@dataclass(frozen=True)
class _Resolved:
    """A checked item with the revision's defaults filled in."""

    instance_type: InstanceType
    instances: int
    expected_duration: int
    checkpoint_interval: int | None
    restart_overhead: int
    parameters: dict
    argv: list[str]


def _queue_types(queue_ids: set[int]) -> dict[int, set[int]]:
    types: dict[int, set[int]] = defaultdict(set)
    for queue_id, type_id in QueueCapacity.objects.filter(queue_id__in=queue_ids).values_list(
        "queue_id", "instance_type_id"
    ):
        types[queue_id].add(type_id)
    return types


def _urgency_teams(urgencies: set[UrgencyDefinition]) -> dict[int, set[int]]:
    teams: dict[int, set[int]] = {u.pk: set() for u in urgencies}
    if not teams:
        return teams  # most submissions invoke none: no query to build
    through = UrgencyDefinition.invokers.through
    for urgency_id, team_id in through.objects.filter(urgencydefinition_id__in=teams).values_list(
        "urgencydefinition_id", "team_id"
    ):
        teams[urgency_id].add(team_id)
    return teams


def _definition_queues(definition_ids: set[int]) -> dict[int, set[int]]:
    queues: dict[int, set[int]] = defaultdict(set)
    through = JobDefinition.queues.through
    for definition_id, queue_id in through.objects.filter(
        jobdefinition_id__in=definition_ids
    ).values_list("jobdefinition_id", "jobqueue_id"):
        queues[definition_id].add(queue_id)
    return queues


def _pick(given, default):
    return default if given is None else given


def _resolve(
    data: JobData,
    queue_types: set[int],
    urgency_teams: dict[int, set[int]],
    definition_queues: dict[int, set[int]],
) -> tuple[_Resolved | None, dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}

    def add(problems: Iterable[tuple[str, str]]) -> None:
        for key, message in problems:
            errors.setdefault(key, []).append(message)

    revision = data.revision
    if not data.name.strip():
        add([("name", "give the job a name")])
    if revision is None:
        add([("definition", "choose a job definition: jobs run a registered job definition")])
        return None, errors
    add(_definition_problems(data.share.queue, revision, definition_queues))
    parameters, argv, problems = parameters_resolve(revision=revision, values=data.parameters)
    for key, messages in problems.items():
        errors.setdefault(key, []).extend(messages)
    itype = _pick(data.instance_type, revision.instance_type)
    instances = _pick(data.instances, revision.instances)
    expected = _pick(data.expected_duration, revision.expected_duration)
    checkpoint = _pick(data.checkpoint_interval, revision.checkpoint_interval)
    overhead = _pick(data.restart_overhead, revision.restart_overhead)
    add(_size_problems(data.share.queue, revision, queue_types, itype, instances, expected))
    add(_bound_problems(data, checkpoint, overhead))
    add(_urgency_problems(data, urgency_teams))
    above_ceiling = job_priority_refusal(
        share=data.share, priority=_asked_priority(data), urgency=data.urgency
    )
    if above_ceiling and "priority" not in errors:
        add([("priority", above_ceiling)])
    if errors:
        return None, errors
    return _Resolved(itype, instances, expected, checkpoint, overhead, parameters, argv), {}


def _definition_problems(
    queue: JobQueue, revision: JobDefinitionRevision, definition_queues: dict[int, set[int]]
) -> Iterator[tuple[str, str]]:
    """Whether the revision's definition may run in the queue: not retired, allowed there,
    and with a command when the queue runs real processes."""
    definition = revision.definition
    if definition.retired_at is not None:
        yield "definition", f"{definition.name} is retired; choose another job definition"
    elif queue.pk not in definition_queues.get(definition.pk, set()):
        yield (
            "definition",
            f"{definition.name} may not run in queue {queue.name}; choose a definition "
            "that allows it, or ask an admin to allow this queue",
        )
    elif executor_for(queue).capabilities.runs_programs and not revision.command:
        yield (
            "definition",
            f"{_label(revision)} has no command and queue {queue.name} runs real processes",
        )
    else:
        # Registered before its queue's executor was checked (or by an import): the
        # isolation it promises must still be kept, or the job refused.
        for key, message in isolation_problems(
            queues=[queue],
            network=revision.network,
            max_address_space_mb=revision.max_address_space_mb,
        ):
            yield "definition", f"{_label(revision)}: {key} {message}"


def _label(revision: JobDefinitionRevision) -> str:
    return f"{revision.definition.name}:{revision.revision}"


def _size_problems(
    queue: JobQueue,
    revision: JobDefinitionRevision,
    queue_types: set[int],
    itype: InstanceType | None,
    instances: int,
    expected: int | None,
) -> Iterator[tuple[str, str]]:
    """The job's size, its own or its definition's: an instance type of the queue, a
    number of instances and compute seconds within bounds."""
    if itype is None:
        yield (
            "instance_type",
            f"{_label(revision)} has no default instance type: choose one of the queue's",
        )
    elif itype.pk not in queue_types:
        yield (
            "instance_type",
            f"queue {queue.name} has no {itype.name}; choose one of the queue's instance types",
        )
    if instances < 1:
        yield "instances", "a job needs at least 1 instance"
    elif instances > BOUNDS["instances"][1]:
        yield "instances", f"must be at most {BOUNDS['instances'][1]}"
    if expected is None:
        yield (
            "expected_duration",
            f"{_label(revision)} has no default: say how many compute seconds the job needs",
        )
    elif expected < 1:
        yield "expected_duration", "must be at least 1 second"
    elif expected > BOUNDS["expected_duration"][1]:
        yield "expected_duration", f"must be at most {BOUNDS['expected_duration'][1]} seconds"


def _bound_problems(
    data: JobData, checkpoint: int | None, overhead: int
) -> Iterator[tuple[str, str]]:
    """The priority, checkpoint interval, restart overhead and retries within bounds."""
    if data.priority is not None and not 0 <= data.priority <= MAX_PRIORITY:
        yield "priority", f"must be between 0 and {MAX_PRIORITY}"
    if checkpoint is not None and not 1 <= checkpoint <= BOUNDS["checkpoint_interval"][1]:
        yield (
            "checkpoint_interval",
            f"must be between 1 and {BOUNDS['checkpoint_interval'][1]} seconds "
            "(or empty: the definition's)",
        )
    if overhead < 0:
        yield "restart_overhead", "cannot be negative"
    elif overhead > BOUNDS["restart_overhead"][1]:
        yield "restart_overhead", f"must be at most {BOUNDS['restart_overhead'][1]} seconds"
    if data.preemption_retries is not None and not 0 <= data.preemption_retries <= MAX_RETRIES:
        yield (
            "preemption_retries",
            f"must be between 0 and {MAX_RETRIES} (empty: the queue's default)",
        )


def _urgency_problems(
    data: JobData, urgency_teams: dict[int, set[int]]
) -> Iterator[tuple[str, str]]:
    """An urgency that names its invokers is invoked by one of them."""
    if data.urgency is None:
        return
    allowed = urgency_teams.get(data.urgency.pk, set())
    if allowed and data.share.team_id not in allowed:
        yield (
            "urgency",
            f"team {data.share.team.name} may not invoke {data.urgency.name}; "
            "pick another urgency or set a priority",
        )


def _asked_priority(data: JobData) -> int:
    """The priority given, else the urgency's, else 0."""
    if data.priority is not None:
        return data.priority
    return data.urgency.priority if data.urgency is not None else 0


def _key(index: int, total: int, name: str) -> str:
    return name if total == 1 else f"jobs[{index}].{name}"


def _size_errors(items: Sequence[JobData]) -> dict[str, list[str]]:
    if not items:
        return {NON_FIELD: ["submit at least one job"]}
    if len(items) > MAX_BULK:
        return {NON_FIELD: [f"submit at most {MAX_BULK} jobs at once"]}
    return {}


def _resolve_all(
    items: Sequence[JobData], indexes: Sequence[int], total: int
) -> tuple[dict[int, _Resolved], dict[str, list[str]]]:
    chosen = [items[index] for index in indexes]
    queue_types = _queue_types({item.share.queue_id for item in chosen})
    urgency_teams = _urgency_teams({item.urgency for item in chosen if item.urgency is not None})
    definition_queues = _definition_queues(
        {item.revision.definition_id for item in chosen if item.revision is not None}
    )
    resolved: dict[int, _Resolved] = {}
    errors: dict[str, list[str]] = {}
    for index in indexes:
        item = items[index]
        outcome, problems = _resolve(
            item, queue_types[item.share.queue_id], urgency_teams, definition_queues
        )
        for key, messages in problems.items():
            errors[_key(index, total, key)] = messages
        if outcome is not None:
            resolved[index] = outcome
    return resolved, errors


def job_preview(*, data: JobData) -> _Resolved:
    """The job a submission of `data` would make (the definition's defaults filled in),
    checked as a submission is, with nothing stored; raises JobError like a submission.
    The submit form's and the API's "if you submit this now" estimate start here."""
    resolved, errors = _resolve_all([data], [0], 1)
    if errors:
        raise JobError(errors)
    return resolved[0]


def _token_errors(items: Sequence[JobData], submitted_by) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        token = item.client_token
        if not token:
            continue
        key = _key(index, len(items), "client_token")
        if len(token) > MAX_CLIENT_TOKEN or not token.isprintable():
            errors[key] = [f"at most {MAX_CLIENT_TOKEN} printable characters"]
        elif _user(submitted_by) is None:
            errors[key] = ["a client token needs a signed-in submitter"]
        elif token in first:
            errors[key] = [f"jobs[{first[token]}] of this request has the same token"]
        else:
            first[token] = index
    return errors


def _replays(
    items: Sequence[JobData], submitted_by
) -> tuple[dict[int, Job], dict[str, list[str]], dict[str, int]]:
    """The items whose client token made a job already: {index: that job}, and the
    conflicts (the token's job came from another request body)."""
    tokens = {item.client_token for item in items if item.client_token}
    if not tokens:
        return {}, {}, {}
    existing = {
        job.client_token: job
        for job in Job.objects.filter(submitted_by=submitted_by, client_token__in=tokens).exclude(
            client_token=""
        )
    }
    replays: dict[int, Job] = {}
    errors: dict[str, list[str]] = {}
    originals: dict[str, int] = {}
    for index, item in enumerate(items):
        job = existing.get(item.client_token) if item.client_token else None
        if job is None:
            continue
        if job.request_fingerprint == item.fingerprint:
            replays[index] = job
            continue
        key = _key(index, len(items), "client_token")
        errors[key] = [
            f"was used for job {job.pk} ({job.name}) with a different request; send that "
            "request again to get the job, or use a new token"
        ]
        originals[key] = job.pk
    return replays, errors, originals


def _classes_of(items: Sequence[JobData]) -> dict[int, WorkloadClass]:
    """The workload classes the items' contracts come from, in one query."""
    ids = {item.share.default_workload_class_id for item in items}
    ids |= {item.revision.workload_class_id for item in items if item.revision is not None}
    ids.discard(None)
    return WorkloadClass.objects.in_bulk(ids) if ids else {}


def contract_fields(item: JobData, classes: Mapping[int, WorkloadClass]) -> dict:
    """The interruption contract a job copies at submission (spec v2): its definition
    revision's class, else its share's default class, else none (all 0). Copied, so a
    later change of the class never changes a submitted job."""
    class_id = item.revision.workload_class_id if item.revision is not None else None
    if class_id is None:
        class_id = item.share.default_workload_class_id
    workload_class = classes.get(class_id) if class_id is not None else None
    if workload_class is None:
        return {}
    return {
        "workload_class": workload_class.name,
        "min_runtime_reclaim": workload_class.min_runtime_reclaim,
        "min_runtime_preempt": workload_class.min_runtime_preempt,
        "grace": workload_class.grace,
        "checkpoint_on_notice": workload_class.checkpoint_on_notice,
    }


def _new_job(
    item: JobData,
    resolved: _Resolved,
    *,
    submitted_by,
    now,
    resubmitted_from,
    classes: Mapping[int, WorkloadClass],
) -> Job:
    share = item.share
    disabled = not share.enabled
    priority = item.priority
    if priority is None:
        priority = item.urgency.priority if item.urgency is not None else 0
    retries = item.preemption_retries
    if retries is None:
        retries = share.queue.default_preemption_retries
    return Job(
        queue=share.queue,
        share=share,
        name=item.name.strip(),
        priority=priority,
        urgency=item.urgency,
        instance_type=resolved.instance_type,
        instances=resolved.instances,
        expected_duration=resolved.expected_duration,
        checkpoint_interval=resolved.checkpoint_interval,
        restart_overhead=resolved.restart_overhead,
        preemption_retries=retries,
        definition_revision=item.revision,
        parameters=resolved.parameters,
        argv=resolved.argv,
        client_token=item.client_token,
        request_fingerprint=item.fingerprint if item.client_token else "",
        submitted_by=_user(submitted_by),
        submitted_at=now,
        resubmitted_from=resubmitted_from,
        state=Job.State.FAILED if disabled else Job.State.RUNNABLE,
        reason="share_disabled" if disabled else "",
        runnable_since=None if disabled else now,
        finished_at=now if disabled else None,
        **contract_fields(item, classes),
    )


def _submit_once(items, submitted_by, now, resubmitted_from) -> list[Submitted]:
    replays, conflicts, originals = _replays(items, submitted_by)
    if conflicts:
        raise TokenConflict(conflicts, originals)
    fresh = [index for index in range(len(items)) if index not in replays]
    resolved, errors = _resolve_all(items, fresh, len(items))
    if errors:
        raise JobError(errors)
    classes = _classes_of([items[index] for index in fresh])
    jobs = {
        index: _new_job(
            items[index],
            resolved[index],
            submitted_by=submitted_by,
            now=now,
            resubmitted_from=resubmitted_from,
            classes=classes,
        )
        for index in fresh
    }
    if jobs:
        Job.objects.bulk_create(list(jobs.values()), batch_size=1000)
        events = []
        for job in jobs.values():
            events.append(JobEvent(job=job, at=now, type=JobEvent.Type.SUBMITTED))
            if job.state == Job.State.FAILED:
                events.append(
                    JobEvent(job=job, at=now, type=JobEvent.Type.FAILED, cause="share_disabled")
                )
        JobEvent.objects.bulk_create(events, batch_size=2000)
        runnable = {job.queue_id for job in jobs.values() if job.state == Job.State.RUNNABLE}
        for queue_id in sorted(runnable):
            request_pass(queue_id)
    return [
        Submitted(replays[index], False) if index in replays else Submitted(jobs[index], True)
        for index in range(len(items))
    ]


def jobs_submit_outcomes(
    *,
    items: Sequence[JobData],
    submitted_by=None,
    now: dt.datetime | None = None,
    resubmitted_from: Job | None = None,
) -> list[Submitted]:
    """Submit jobs (all or none): SUBMITTED events, then a pass of each queue after commit.

    An item whose client token made a job already returns that job when it comes with
    the same request body (nothing is created for it) and raises TokenConflict when it
    comes with another. A job submitted into a DISABLED share is accepted and ends
    FAILED at once (cause `share_disabled`), as the scenario format says.
    """
    if getattr(submitted_by, "pk", None):
        for item in items:
            rules.require(submitted_by, "job.submit", item.share)
    errors = _size_errors(items) or _token_errors(items, submitted_by)
    if errors:
        raise JobError(errors)
    now = now or timezone.now()
    has_tokens = any(item.client_token for item in items)
    tries = 0
    while True:
        try:
            with transaction.atomic():
                return _submit_once(items, submitted_by, now, resubmitted_from)
        except IntegrityError:
            # The same token committed by a concurrent request: look again (the
            # savepoint is gone, the other request's job is visible now).
            tries += 1
            if not has_tokens or tries >= TOKEN_TRIES:
                raise


def jobs_submit(
    *,
    items: Sequence[JobData],
    submitted_by=None,
    now: dt.datetime | None = None,
    resubmitted_from: Job | None = None,
) -> list[Job]:
    """`jobs_submit_outcomes`, only the jobs."""
    outcomes = jobs_submit_outcomes(
        items=items, submitted_by=submitted_by, now=now, resubmitted_from=resubmitted_from
    )
    return [outcome.job for outcome in outcomes]


def job_submit(*, data: JobData, submitted_by=None, now: dt.datetime | None = None) -> Job:
    return jobs_submit(items=[data], submitted_by=submitted_by, now=now)[0]


# Changes of live jobs, under the queue lock.


def locked_live_job(job_id: int, now: dt.datetime) -> tuple[JobQueue, Job]:
    """The job with its queue locked, after ending what finished by `now` (a simulated
    job whose work is done is not terminated or reprioritised: it succeeded)."""
    queue_id = Job.objects.values_list("queue_id", flat=True).get(pk=job_id)
    queue = lock_queue(queue_id)
    finish_due(queue, now=now)
    stop_due(queue, now=now)
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
        if getattr(actor, "pk", None):
            rules.require(actor, "job.manage", job)
        if job.priority == priority:
            return job
        _change_priority(queue, job, priority, actor=actor, now=now)
    return job


# Why an exception request changed a job's priority (the event's detail "step").
EXCEPTION_STEPS = ("raised", "expired", "revoked")


def job_set_priority_by_exception(
    *,
    job_id: int,
    priority: int,
    exception_id: int,
    step: str,
    actor=None,
    now: dt.datetime | None = None,
) -> Job | None:
    """Set a live job's priority as the effect of exception request `exception_id`: its
    raise (`step` "raised") or its take-back ("expired", "revoked").

    The request's decision is the authority, so `actor` (the owner who approved it, the
    person who revoked it, None for an expiry) needs no right over the job; the share's
    ceiling still holds (a raise is within it while the request is active). The
    PRIORITY_CHANGED event has cause `exception` and names the request and the step, so
    the job's timeline says why its priority changed and the dashboard counts it. None
    when the job has ended (a simulated job whose work is done by `now` succeeded).
    """
    if step not in EXCEPTION_STEPS:
        raise ValueError(f"unknown exception step {step!r}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise JobError({"priority": [f"must be between 0 and {MAX_PRIORITY}"]})
    now = now or timezone.now()
    with transaction.atomic():
        queue, job = locked_live_job(job_id, now)
        if not job.is_live:
            return None
        if job.priority != priority:
            cause = {"exception": exception_id, "step": step}
            _change_priority(queue, job, priority, actor=actor, now=now, cause=cause)
    return job


def job_protect_by_exception(
    *, job_id: int, until: dt.datetime | None, unless_changed_from=...
) -> bool:
    """Protect a job from preemption until `until` (None: no protection), as the effect of
    an exception request; with `unless_changed_from`, only while the job's
    protection is still that value (a take-back leaves another's protection alone).
    True when the job's protection changed (the request's `applied` record says by whom);
    the engine reads it at the next pass."""
    jobs = Job.objects.filter(pk=job_id)
    if unless_changed_from is not ...:
        jobs = jobs.filter(protected_until=unless_changed_from)
    return jobs.update(protected_until=until) == 1


def _change_priority(queue, job: Job, priority: int, *, actor, now, cause=None) -> None:
    """Give the locked live `job` its new `priority` if the share's ceiling allows it:
    the PRIORITY_CHANGED event (with `cause`, an exception's reference, in its detail)
    and a pass after commit."""
    above_ceiling = job_priority_refusal(
        share=job.share, priority=priority, urgency=job.urgency, job=job
    )
    if above_ceiling:
        raise JobError({"priority": [above_ceiling]})
    JobEvent.objects.create(
        job=job,
        at=now,
        type=JobEvent.Type.PRIORITY_CHANGED,
        cause="exception" if cause else "",
        actor=_user(actor),
        attempt=job.attempt,
        detail={"from": job.priority, "to": priority, **(cause or {})},
    )
    job.priority = priority
    job.save(update_fields=["priority"])
    request_pass(queue.pk)


def job_terminate(*, job_id: int, actor=None, now: dt.datetime | None = None) -> Job:
    """End a live job FAILED (cause `terminated`).

    A running process is not stopped at the decision but given its definition's grace:
    the job is STOPPING (its runner sends SIGTERM at once and SIGKILL at the end of the
    grace) and keeps its capacity until its exit is reported, when it ends FAILED
    terminated; so does a STOPPING process, whose notice runs on. Elsewhere (a
    modelled clock) the job ends at once, a STOPPING one too (spec V10.2)."""
    now = now or timezone.now()
    with transaction.atomic():
        queue, job = locked_live_job(job_id, now)
        if getattr(actor, "pk", None):
            rules.require(actor, "job.manage", job)
        if not job.is_live:
            raise JobError({NON_FIELD: [f"the job has already ended ({job.get_state_display()})"]})
        executor = executor_for(queue)
        if job.state in Job.HOLDING_STATES and executor.capabilities.stops_with_notice:
            _terminate_with_notice(job, executor, actor=actor, now=now)
            return job
        releases = []
        if job.state in Job.HOLDING_STATES:
            job.progress = executor.progress(job, now)
        if job.state == Job.State.STOPPING:
            releases = end_notice(job, at=now, hold=True)
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
        release_holds(releases)
        request_pass(queue.pk)
    return job


def _terminate_with_notice(job: Job, executor, *, actor, now: dt.datetime) -> None:
    """STOPPING until the process has exited, then FAILED terminated (`stop_job`), its
    event naming `actor`."""
    if job.state == Job.State.RUNNING:
        revision = job.definition_revision
        grace = revision.stop_grace_seconds if revision is not None else 0
        job.state = Job.State.STOPPING
        job.notice_at = now
        job.grace_until = now + dt.timedelta(seconds=grace)
        job.stop_at = notice_stop_at(executor, job.grace_until, job.grace_until)
        job.notice_for = None
        job.stop_cause = "terminated"
    job.terminate_at_stop = True
    job.stop_actor = _user(actor)
    job.save()
    transaction.on_commit(lambda: executor.notify([job.pk]))


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
            Job.objects.select_for_update(of=("self",))
            .select_related("share__queue", "instance_type", "definition_revision__definition")
            .get(pk=job_id)
        )
        if job.state != Job.State.FAILED or job.reason not in Job.NEEDS_DECISION_CAUSES:
            raise JobError({NON_FIELD: ["only a failed job that needs a decision can have one"]})
        if JobDecision.objects.filter(job=job).exists():
            raise JobError({NON_FIELD: ["a decision on this job was already recorded"]})
        new_job = None
        if kind == JobDecision.Kind.RESUBMITTED:
            if job.definition_revision is None:
                raise JobError(
                    {
                        "kind": [
                            "this job was recorded without a job definition, so it cannot "
                            "be resubmitted; file an exception or close it"
                        ]
                    }
                )
            changes = dict(resubmit or {})
            data = JobData(
                share=job.share,
                name=job.name,
                revision=job.definition_revision,
                parameters=job.parameters,
                instance_type=job.instance_type,
                expected_duration=job.expected_duration,
                instances=job.instances,
                priority=job.priority,
                checkpoint_interval=job.checkpoint_interval,
                restart_overhead=job.restart_overhead,
                preemption_retries=job.preemption_retries,
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
