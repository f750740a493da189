"""Reads of jobs, shaped for pages and the API: lists, timelines, plain-language
reasons, the live queue view and the "needs a decision" list; and the liveness of
runners and of the scheduler's tick (`/healthz/`)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.utils import timezone

from core import rules
from core.bounds import MAX_ID
from core.formatting import duration
from core.search import ContainsWord
from engine.types import (
    BLOCKED_BEHIND_HEAD,
    BORROW_LIMIT_REACHED,
    BORROWABLE_CAPACITY_EXCEEDED,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    SHARE_LIMIT_REACHED,
    WAITING_FOR_CAPACITY,
)
from engine.work import checkpointed
from fleet.models import (
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
)
from fleet.selectors import QueueUsage, ShareUsage, nodes_out, queue_list, queue_usage
from scheduler.executors import cause_described, executor_for, executor_named, executor_names
from scheduler.liveness import (
    TICK_KEY,
    clock_skew_limit,
    database_clock_offset,
    live_runners,
    served_instance_types,
    tick_cache,
)
from scheduler.models import JobDecision, Runner
from scheduler.work import compute_seconds

logger = logging.getLogger(__name__)


# How many words of a search are used (each must match): more would only make the
# query longer, never narrower in practice.
SEARCH_WORDS = 5


def job_list(*, filters: Mapping | None = None, user=None) -> QuerySet[Job]:
    """Jobs, newest first, filtered by queue, share, team and state (ids / state name)
    and by `search` (`job_search_condition`). With `user`, only the jobs they may see
    (rules "job.view"), so a search finds nothing beyond what the list shows them."""
    filters = filters or {}
    jobs = Job.objects.select_related(
        "queue", "share__team", "instance_type", "definition_revision__definition"
    ).order_by("-submitted_at", "-pk")
    if user is not None:
        jobs = rules.visible(user, "job.view", jobs)
    for key, lookup in (
        ("queue", "queue_id"),
        ("share", "share_id"),
        ("team", "share__team_id"),
        ("state", "state"),
    ):
        value = filters.get(key)
        if value not in (None, ""):
            jobs = jobs.filter(**{lookup: value})
    search = (filters.get("search") or "").strip()
    if search:
        jobs = jobs.filter(job_search_condition(search))
    return jobs


def job_search_condition(search: str) -> Q:
    """Jobs that match every word of `search`: a word matches a job whose name contains
    it, whose definition's name contains it or whose submitter's username contains it
    (case-insensitive), or, as a number (`123` or `#123`), the job of that id.

    The definitions and users a word matches are read first (small tables: one query a
    word) and the jobs compared by their ids, so the job table is read with no join and
    PostgreSQL knows how many jobs each id has: on PostgreSQL the name through its
    trigram index (job_name_search_idx) and the ids through theirs, and with a plan
    made for the words, never a prepared one made for any (core.search)."""
    condition = Q()
    for word in search.split()[:SEARCH_WORDS]:
        matches = Q(ContainsWord("name", word))
        revisions, submitters = _search_ids(word)
        if revisions:
            matches |= Q(definition_revision_id__in=revisions)
        if submitters:
            matches |= Q(submitted_by_id__in=submitters)
        number = word.removeprefix("#")
        if number.isascii() and number.isdigit() and 1 <= int(number) <= MAX_ID:
            matches |= Q(pk=int(number))
        condition &= matches
    return condition


def _search_ids(word: str) -> tuple[list[int], list[int]]:
    """The ids of the definition revisions and of the users whose name contains `word`."""
    revisions = (
        JobDefinitionRevision.objects.filter(definition__name__icontains=word)
        .order_by()
        .annotate(kind=Value("revision"))
        .values_list("kind", "pk")
    )
    users = (
        get_user_model()
        .objects.filter(username__icontains=word)
        .order_by()
        .annotate(kind=Value("user"))
        .values_list("kind", "pk")
    )
    found = list(revisions.union(users, all=True))
    return (
        sorted(pk for kind, pk in found if kind == "revision"),
        sorted(pk for kind, pk in found if kind == "user"),
    )


def job_detail_queryset() -> QuerySet[Job]:
    return Job.objects.select_related(
        "queue",
        "share__team",
        "instance_type",
        "submitted_by",
        "urgency",
        "resubmitted_from",
        "definition_revision__definition",
    )


def too_big_condition() -> Q:
    """RUNNABLE jobs bigger than their whole queue: they can never start as they are
    (the engine's SERVICE_ENVIRONMENT_MAX_RESOURCE, known at submission, before a pass
    records the reason). A job that waits only for Slurm nodes to return has that reason
    but no misconfiguration clock (scheduler.services.passes): it is not too big."""
    smaller = QueueCapacity.objects.filter(
        queue_id=OuterRef("queue_id"),
        instance_type_id=OuterRef("instance_type_id"),
        instances__lt=OuterRef("instances"),
    )
    return Q(state=Job.State.RUNNABLE) & (
        Q(reason=SERVICE_ENVIRONMENT_MAX_RESOURCE, misconfigured_since__isnull=False)
        | Q(Exists(smaller))
    )


def is_too_big(job: Job) -> bool:
    """A waiting job bigger than its whole queue (see `too_big_condition`)."""
    return (
        job.state == Job.State.RUNNABLE
        and Job.objects.filter(too_big_condition(), pk=job.pk).exists()
    )


def job_needs_decision(*, job: Job, decision: JobDecision | None) -> bool:
    """A failed job whose cause asks a person (Job.NEEDS_DECISION_CAUSES) and that nobody has
    decided about yet: its page offers the decision form."""
    return (
        job.state == Job.State.FAILED
        and job.reason in Job.NEEDS_DECISION_CAUSES
        and decision is None
    )


def needs_decision_list(*, team_ids=None) -> QuerySet[Job]:
    """Jobs a person must decide about: failed ones with no decision yet, oldest failure
    first, after the waiting jobs bigger than their queue (they go there at once)."""
    jobs = (
        job_list()
        .filter(
            Q(state=Job.State.FAILED, reason__in=Job.NEEDS_DECISION_CAUSES) | too_big_condition()
        )
        .exclude(Exists(JobDecision.objects.filter(job=OuterRef("pk"))))
        .order_by(F("finished_at").asc(nulls_first=True), "pk")
    )
    if team_ids is not None:
        jobs = jobs.filter(share__team_id__in=team_ids)
    return jobs


# Plain language.


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _share_usage(job: Job) -> int:
    used = Job.objects.filter(
        share_id=job.share_id,
        instance_type_id=job.instance_type_id,
        state__in=Job.HOLDING_STATES,
    ).aggregate(n=Sum("instances"))["n"]
    return used or 0


def _share_limit(job: Job) -> int:
    limit = job.share.limits.filter(instance_type_id=job.instance_type_id).first()
    return limit.max_instances if limit else 0


def waiting_reason(job: Job) -> str:
    """Why a RUNNABLE job waits, in one sentence a non-expert understands; on Slurm, with
    the nodes that are out of service and cost the queue capacity of its type."""
    itype = job.instance_type.name
    out = nodes_out(job.queue, itype) if job.queue.capacity_seen else ""
    # Too big only for what the nodes in service hold: no misconfiguration clock runs.
    if out and job.reason == SERVICE_ENVIRONMENT_MAX_RESOURCE and job.misconfigured_since is None:
        return (
            f"waiting: it needs {job.instances} {itype}, more than the queue can use while "
            f"Slurm nodes are out of service ({out}); it starts when they return"
        )
    reason = _waiting_reason(job)
    return f"{reason} (Slurm nodes out of service: {out})" if out else reason


def _waiting_reason(job: Job) -> str:
    itype, share = job.instance_type.name, job.share.name
    code = job.reason
    if code == SERVICE_ENVIRONMENT_MAX_RESOURCE:
        return (
            f"cannot start: it needs {job.instances} {itype} and the queue does not have "
            "that many; lower its instances or ask an admin about the queue's capacity"
        )
    if code == QUOTA_MANAGEMENT_LIMIT_EXCEEDED:
        return (
            f"cannot start: it needs more {itype} than share {share}'s quota allows, "
            "even with borrowing; lower its instances or file an exception for capacity"
        )
    if code == BORROWABLE_CAPACITY_EXCEEDED:
        return (
            f"cannot start: it needs more {itype} than share {share}'s limit plus all "
            "the capacity other shares could ever lend"
        )
    if code == BLOCKED_BEHIND_HEAD:
        return (
            f"waiting its turn: a job ahead of it in share {share}'s queue (higher priority "
            "or submitted earlier) must start first"
        )
    if code == SHARE_LIMIT_REACHED:
        return (
            f"waiting: share {share} is at its limit of {_share_limit(job)} {itype} "
            "and may not borrow; it starts when one of the share's jobs ends"
        )
    if code == BORROW_LIMIT_REACHED:
        return (
            f"waiting: share {share} is at its limit and has borrowed as much {itype} "
            "as its borrow limit allows"
        )
    if code == WAITING_FOR_CAPACITY:
        if _share_usage(job) + job.instances > _share_limit(job):
            return f"waiting: its share is at its limit and no lender has idle {itype}"
        return (
            f"waiting: share {share} has room, but no {itype} is free right now; "
            "it starts as soon as one is"
        )
    if not code:
        return "waiting for the next scheduling pass"
    return f"waiting ({code})"


def failure_reason(job: Job) -> str:
    cause = job.reason
    if cause == "retries_exhausted":
        bound = job.preemption_retries
        return (
            f"failed: preempted {_plural(job.preemptions, 'time')}, more than its retry "
            f"bound of {bound} allows"
        )
    if cause == "time_limit":
        return (
            "failed: it could not start for longer than the queue's runnable time limit "
            f"({job.queue.runnable_time_limit} s)"
        )
    if cause == "share_disabled":
        return f"failed: share {job.share.name} was disabled when it was submitted"
    if cause == "terminated":
        return "failed: terminated by a person"
    if cause == "exit_code":
        return f"failed: its process exited with code {job.exit_code}"
    if cause == "wall_clock_limit":
        limit = job.definition_revision.wall_clock_limit if job.definition_revision else None
        return f"failed: it ran past its definition's wall-clock limit ({limit} s) and was stopped"
    if cause == "runner_refused":
        return "failed: the runner refused to run it (its timeline says why)"
    return f"failed ({cause})"


def _with_runner(job: Job, reason: str) -> str:
    """A process job whose instance type no live runner serves says that first."""
    no_runner = runner_wait_reason(job)
    return f"{no_runner}; {reason}" if no_runner else reason


def stopping_reason(job: Job) -> str:
    """'Stopping (notice until 14:02:10 UTC)': it keeps its capacity until it stops."""
    if job.grace_until is None:
        return "stopping"
    until = job.grace_until.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    why = "terminated" if job.terminate_at_stop else "preempted"
    return f"Stopping (notice until {until}): {why}, it keeps its capacity until it stops"


def current_reason(job: Job) -> str:
    if job.state == Job.State.RUNNABLE:
        return _with_runner(job, waiting_reason(job))
    holding = executor_for(job.queue).holding_reason(job) if job.state in Job.HOLDING_STATES else ""
    if holding:
        return holding
    if job.state == Job.State.RUNNING:
        executor = executor_for(job.queue)
        if not job.worker and executor.capabilities.needs_runner:
            # A simulated job has no runner: it runs from the moment it starts.
            return _with_runner(job, "started, waiting for a runner to take it")
        starting = executor.starting_reason(job)
        if starting:
            return starting
        where = "on borrowed capacity" if job.borrowed else "within its share's limit"
        return f"running {where}"
    if job.state == Job.State.STOPPING:
        return stopping_reason(job)
    if job.state == Job.State.SUCCEEDED:
        return "finished"
    return failure_reason(job)


@dataclass(frozen=True)
class TimelineEntry:
    event: JobEvent
    text: str
    css: str  # a state colour of the visual language
    # On a simulated-clock queue: the queue's seconds since the job's submission.
    clock: int | None = None


def _event_text(event: JobEvent, job: Job) -> tuple[str, str]:
    kind = event.type
    if kind == JobEvent.Type.SUBMITTED:
        return f"submitted to share {job.share.name}", "neutral"
    if kind == JobEvent.Type.STARTED:
        where = "on borrowed capacity" if event.borrowed else "within its share's limit"
        restart = " (restart from its last checkpoint)" if event.attempt > 1 else ""
        return f"started {where}{restart}", "borrowed" if event.borrowed else "within"
    if kind == JobEvent.Type.PREEMPTED:
        lost = event.detail.get("lost_work")
        lost_text = f"; lost {lost} s of work since its last checkpoint" if lost else ""
        by = event.by
        if event.cause == "reclaim":
            who = f"team {by.share.team.name}" if by else "the lending team"
            what = f" for job {by.name}" if by else ""
            return f"preempted: {who} reclaimed its capacity{what}{lost_text}", "failed"
        if event.cause == "priority":
            what = f" job {by.name}" if by else " job"
            return (
                f"preempted: higher-priority{what} of the same share needed the instances"
                f"{lost_text}",
                "failed",
            )
        if event.cause == "capacity_change":
            return f"preempted: the queue's capacity was lowered{lost_text}", "failed"
        return f"preempted ({event.cause}){lost_text}", "failed"
    if kind == JobEvent.Type.SUCCEEDED:
        return "succeeded", "done"
    if kind == JobEvent.Type.FAILED:
        if event.cause == "terminated":
            who = event.actor.get_username() if event.actor else "a person"
            return f"terminated by {who}", "stopped"
        if event.cause == "exit_code":
            return f"failed: exited with code {event.detail.get('exit_code')}", "failed"
        texts = {
            "retries_exhausted": "failed: its retry bound is spent",
            "time_limit": "failed: waited past the queue's runnable time limit",
            "share_disabled": "failed: its share is disabled",
            "wall_clock_limit": "failed: stopped at its definition's wall-clock limit",
        }
        described = cause_described(event.cause, event.detail)
        return described or texts.get(event.cause, f"failed ({event.cause})"), "failed"
    if kind == JobEvent.Type.PRIORITY_CHANGED:
        change = f"priority changed from {event.detail.get('from')} to {event.detail.get('to')}"
        if event.cause == "exception":
            exception = f"exception #{event.detail.get('exception')}"
            step = event.detail.get("step")
            if step == "raised":
                return f"{change}: {exception} raised it", "neutral"
            by = f" by {event.actor.get_username()}" if event.actor else ""
            return f"{change}: {exception} {step}{by}, its raise taken back", "neutral"
        who = event.actor.get_username() if event.actor else "a person"
        return f"{change} by {who}", "neutral"
    if kind in _NOTE_TEXTS:
        return _NOTE_TEXTS[kind](event)
    return kind, "neutral"


def _requeued_text(event: JobEvent) -> tuple[str, str]:
    texts = {
        "checkpoint_busy": ("requeued: a process of an earlier attempt still held its checkpoint"),
    }
    lost = "requeued: its runner stopped responding; it resumes from its last checkpoint"
    described = cause_described(event.cause, event.detail)
    return described or texts.get(event.cause, lost), "failed"


def _running_text(event: JobEvent) -> str:
    """The executor's words for when its cluster began running the job ("Slurm began
    running it (Slurm job 12 on node1, GPUs node1:0), 4.2 s after it was started; ...")."""
    described = cause_described(event.cause, event.detail)
    return described or "began running; its run time counts from here"


# Timeline notes that are not lifecycle events: their text and colour.
_NOTE_TEXTS = {
    JobEvent.Type.REQUEUED: _requeued_text,
    JobEvent.Type.RUNNING: lambda event: (_running_text(event), "neutral"),
}


STARTING = "STARTING"


def shown_state(*, state: str, placement: Mapping | None, executor: str, worker: str = "") -> str:
    """A job's state as the API and the pages show it: STARTING for a RUNNING job whose
    executor says it does not run yet (Slurm: started by the product, not yet run by
    Slurm; its capacity is counted all the same), else its state."""
    if state != Job.State.RUNNING:
        return state
    try:
        runs_on = executor_named(executor)
    except KeyError:
        return state
    probe = Job(state=state, placement=placement or None, worker=worker)
    return STARTING if runs_on.starting_reason(probe) else state


def job_shown_state(job: Job) -> str:
    return shown_state(
        state=job.state, placement=job.placement, executor=job.queue.executor, worker=job.worker
    )


def job_placement(placement: Mapping | None) -> dict | None:
    """Where its executor runs it, as the API shows it (Slurm: job id, nodes, GPU
    indexes per node, state, Slurm's reason while it waits); None for none."""
    if not placement:
        return None
    return {
        "job_id": placement.get("job_id", ""),
        "state": placement.get("state", ""),
        "reason": placement.get("reason", ""),
        "nodes": placement.get("nodes", ""),
        "devices": placement.get("devices") or {},
        "submitted_at": placement.get("submitted_at", ""),
    }


def job_timeline(job: Job) -> list[TimelineEntry]:
    """The job's events; on a simulated-clock queue each also says when it happened in
    the queue's clock (seconds since submission), the clock its durations are in."""
    events = job.events.select_related("by__share__team", "actor").order_by("at", "pk")
    executor = executor_for(job.queue)
    simulated = executor.capabilities.modelled_clock
    speed = executor.speed
    return [
        TimelineEntry(
            event,
            *_event_text(event, job),
            clock=compute_seconds(job.submitted_at, event.at, speed) if simulated else None,
        )
        for event in events
    ]


@dataclass(frozen=True)
class QueueClock:
    """How a queue's pages read time: real, or a simulated clock `speed` times faster."""

    simulated: bool
    speed: float

    @property
    def note(self) -> str:
        if not self.simulated:
            return ""
        return (
            f"This queue runs on a simulated clock: one real second is {self.speed:g} "
            "simulated seconds. Durations, waiting times, checkpoints, estimates and the "
            "timeline's clock are simulated time; dates are real."
        )


def queue_clock(queue: JobQueue) -> QueueClock:
    executor = executor_for(queue)
    simulated = executor.capabilities.modelled_clock
    return QueueClock(simulated, executor.speed if simulated else 1.0)


def job_last_checkpoint(job: Job, progress: int) -> int | None:
    """Compute seconds saved at the job's last checkpoint (None: it never checkpoints).
    A simulated job saves by the model (every interval of progress, the last one when it
    finishes), a process job what it reported."""
    if not job.checkpoint_interval:
        return None
    if executor_for(job.queue).capabilities.reports_progress:
        return job.checkpointed
    return max(job.checkpointed, checkpointed(progress, job.checkpoint_interval))


def job_progress(job: Job, now: dt.datetime | None = None) -> int:
    """Compute seconds done now (modelled for simulated queues, reported for processes)."""
    if job.state not in Job.HOLDING_STATES:
        return job.progress
    return executor_for(job.queue).progress(job, now or timezone.now())


def executor_speeds() -> dict[str, float]:
    """Seconds of a job's work per wall-clock second, by executor name: accelerated where
    the executor's clock is modelled (the simulated one), 1.0 where it runs real work."""
    return {name: executor_named(name).speed for name in executor_names()}


def job_waiting(job: Job, now: dt.datetime | None = None) -> int:
    """Compute seconds RUNNABLE in all, counting the current wait."""
    if job.state != Job.State.RUNNABLE or job.runnable_since is None:
        return job.waiting_time
    speed = executor_for(job.queue).speed
    return job.waiting_time + compute_seconds(job.runnable_since, now or timezone.now(), speed)


# The live queue view.


@dataclass(frozen=True)
class ShareHead:
    share: QuotaShare
    job: Job | None
    waiting: int
    reason: str


@dataclass(frozen=True)
class LiveRow:
    usage: ShareUsage
    head: ShareHead


@dataclass(frozen=True)
class LiveQueue:
    usage: QueueUsage
    rows: list[LiveRow]
    running: list[Job]
    preemptions: list[TimelineEntry]


RECENT_PREEMPTIONS = 10


def live_queue_get_queryset() -> QuerySet[JobQueue]:
    return queue_list()


def live_queue(queue: JobQueue) -> LiveQueue:
    """Usage per share, the running jobs, each share's runnable head, recent preemptions.

    A fixed number of queries whatever the number of jobs: the heads come from one
    query ordered the way the engine orders a share's queue.
    """
    usage = queue_usage(queue)
    running = list(
        Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES)
        .select_related("share__team", "instance_type", "queue")
        .order_by("share__position", "-priority", "started_at", "pk")
    )
    waiting_rows = (
        Job.objects.filter(queue=queue, state=Job.State.RUNNABLE)
        .exclude(reason=BLOCKED_BEHIND_HEAD)
        .select_related("share__team", "instance_type", "queue")
        .order_by("share_id", "-priority", "submitted_at", "pk")
    )
    first: dict[int, Job] = {}
    for job in waiting_rows:
        first.setdefault(job.share_id, job)
    counts = dict(
        Job.objects.filter(queue=queue, state=Job.State.RUNNABLE)
        .order_by()
        .values("share_id")
        .annotate(n=Count("pk"))
        .values_list("share_id", "n")
    )
    rows = []
    for share_usage in usage.shares:
        share = share_usage.share
        job = first.get(share.pk)
        head = ShareHead(
            share=share,
            job=job,
            waiting=counts.get(share.pk, 0),
            reason=_head_reason(job) if job else "",
        )
        rows.append(LiveRow(usage=share_usage, head=head))
    events = (
        JobEvent.objects.filter(job__queue=queue, type=JobEvent.Type.PREEMPTED)
        .select_related("job__share__team", "by__share__team")
        .order_by("-at", "-pk")[:RECENT_PREEMPTIONS]
    )
    preemptions = [TimelineEntry(event, *_event_text(event, event.job)) for event in events]
    return LiveQueue(usage=usage, rows=rows, running=running, preemptions=preemptions)


def _head_reason(job: Job) -> str:
    """A head's reason without per-job queries (the detail page says more)."""
    if job.reason in (WAITING_FOR_CAPACITY, SHARE_LIMIT_REACHED, BORROW_LIMIT_REACHED):
        return {
            WAITING_FOR_CAPACITY: f"no {job.instance_type.name} free for it now",
            SHARE_LIMIT_REACHED: "its share is at its limit and may not borrow",
            BORROW_LIMIT_REACHED: "its share has borrowed all its borrow limit allows",
        }[job.reason]
    if job.reason:
        return "cannot start as configured"
    return "waiting for the next pass"


# Job definitions.


def _latest_revision_id():
    return Subquery(
        JobDefinitionRevision.objects.filter(definition=OuterRef("pk"))
        .order_by("-revision")
        .values("pk")[:1]
    )


def definition_list(
    *, queue_id: int | None = None, retired: bool | None = None
) -> QuerySet[JobDefinition]:
    """Definitions by name, with the id of their latest revision (`with_latest` loads them)."""
    definitions = (
        JobDefinition.objects.select_related("created_by", "retired_by")
        .prefetch_related("queues")
        .annotate(latest_revision_id=_latest_revision_id())
        .order_by("name")
    )
    if queue_id is not None:
        definitions = definitions.filter(queues=queue_id)
    if retired is not None:
        definitions = definitions.filter(retired_at__isnull=not retired)
    return definitions


def with_latest(definitions) -> list[JobDefinition]:
    """The definitions (of `definition_list`), each with `.latest`: one query for all."""
    definitions = list(definitions)
    revisions = JobDefinitionRevision.objects.select_related(
        "instance_type", "created_by", "workload_class"
    ).in_bulk([definition.latest_revision_id for definition in definitions])
    for definition in definitions:
        definition.latest = revisions[definition.latest_revision_id]
        definition.latest.definition = definition
    return definitions


def definition_get(*, pk: int) -> JobDefinition:
    """One definition with `.latest`; JobDefinition.DoesNotExist when there is none."""
    found = with_latest(definition_list().filter(pk=pk))
    if not found:
        raise JobDefinition.DoesNotExist
    return found[0]


def definition_revisions(definition: JobDefinition) -> list[JobDefinitionRevision]:
    """Every revision, newest first."""
    revisions = list(
        definition.revisions.select_related(
            "instance_type", "created_by", "workload_class"
        ).order_by("-revision")
    )
    for revision in revisions:
        revision.definition = definition
    return revisions


def submittable_definitions(queue_ids) -> list[JobDefinition]:
    """Active definitions that one of the queues may run, each with `.latest`."""
    definitions = definition_list(retired=False).filter(queues__in=list(queue_ids)).distinct()
    return with_latest(definitions)


def parameter_summary(spec: dict) -> str:
    """A parameter in words: `steps: integer 1–1000000, default 120`."""
    kind = spec["type"]
    if kind == "integer":
        rule = f"integer {spec['min']}–{spec['max']}"
    elif kind == "choice":
        rule = f"one of {', '.join(spec['choices'])}"
    else:
        rule = f"text matching {spec['pattern']}"
    default = f", default {spec['default']}" if "default" in spec else ", required"
    return f"{spec['name']}: {rule}{default}"


@dataclass(frozen=True)
class DiffRow:
    label: str
    old: str
    new: str


@dataclass(frozen=True)
class RevisionEntry:
    revision: JobDefinitionRevision
    diff: list[DiffRow]  # changes from the revision before (empty for the first)


def _seconds(value) -> str:
    return "—" if value is None else duration(value)


def revision_facts(revision: JobDefinitionRevision, *, show_values: bool) -> dict[str, str]:
    environment = revision.environment
    return {
        "Queues": ", ".join(revision.queue_names) or "none",
        "Command": " ".join(revision.command) or "none (simulated only)",
        "Parameters": "; ".join(parameter_summary(spec) for spec in revision.parameters) or "none",
        "Environment": ", ".join(
            f"{name}={value}" if show_values else name for name, value in environment.items()
        )
        or "none",
        "Instance type": revision.instance_type.name if revision.instance_type else "each job's",
        "Instances": str(revision.instances),
        "Expected duration": _seconds(revision.expected_duration),
        "Checkpoint interval": _seconds(revision.checkpoint_interval),
        "Restart overhead": _seconds(revision.restart_overhead),
        "Stop grace period": _seconds(revision.stop_grace_seconds),
        "Wall-clock limit": _seconds(revision.wall_clock_limit),
        "Address space limit": "—"
        if revision.max_address_space_mb is None
        else f"{revision.max_address_space_mb} MB",
        "CPU time limit": _seconds(revision.max_cpu_seconds),
        "Network": "yes (the runner's)" if revision.network else "none",
        "Workload class": revision.workload_class.name
        if revision.workload_class
        else "the share's default",
    }


def definition_history(
    revisions: list[JobDefinitionRevision], *, show_values: bool
) -> list[RevisionEntry]:
    """The revisions (newest first) with what each changed from the one before it."""
    shown = [revision_facts(revision, show_values=show_values) for revision in revisions]
    entries = []
    for index, revision in enumerate(revisions):
        before = shown[index + 1] if index + 1 < len(shown) else None
        diff = (
            []
            if before is None
            else [
                DiffRow(label, before[label], value)
                for label, value in shown[index].items()
                if before[label] != value
            ]
        )
        entries.append(RevisionEntry(revision, diff))
    return entries


# Runners and the scheduler's liveness (scheduler.services.runners records them; what
# both sides agree on is scheduler.liveness), small enough for `/healthz/` and a job's
# page: one query for the live runners, one for the instance types process queues have
# capacity of.

# A tick this many periods late means the scheduler is not ticking (beat or every
# scheduling worker down); a few periods of slack absorb a busy worker.
TICK_PERIODS_LATE = 5
TICK_SLACK_SECONDS = 10


def instance_types_without_runner(*, now: dt.datetime | None = None) -> list[str]:
    """Instance types some `process` queue has capacity of and no live runner serves."""
    needed = set(
        QueueCapacity.objects.filter(
            queue__executor__in=executor_names(needs_runner=True), instances__gt=0
        ).values_list("instance_type__name", flat=True)
    )
    return sorted(needed - served_instance_types(now=now))


def runner_wait_reason(job: Job, *, now: dt.datetime | None = None) -> str:
    """ "no runner is serving <type>" for a live job of a process queue no runner serves.

    Such a job waits in the broker (or for its turn) until a runner for its instance
    type starts; the job's page says so instead of waiting silently.
    """
    if not job.is_live or not executor_for(job.queue).capabilities.needs_runner:
        return ""
    itype = job.instance_type.name
    if itype in served_instance_types(now=now):
        return ""
    return f"no runner is serving {itype}"


def scheduler_liveness(*, now: dt.datetime | None = None) -> dict:
    """{"status": "ok" | "late" | "unknown", "last_tick_age_seconds": float | None}."""
    now = now or timezone.now()
    try:
        last = tick_cache().get(TICK_KEY)
    except Exception:  # noqa: BLE001 - an unreachable cache is reported, not raised
        logger.exception("cannot read the scheduler's last tick")
        return {"status": "unknown", "last_tick_age_seconds": None}
    if last is None:
        return {"status": "unknown", "last_tick_age_seconds": None}
    age = max(0.0, now.timestamp() - float(last))
    period = float(getattr(settings, "SCHEDULER_TICK_SECONDS", 2))
    late = age > TICK_PERIODS_LATE * period + TICK_SLACK_SECONDS
    return {"status": "late" if late else "ok", "last_tick_age_seconds": round(age, 1)}


def runner_clocks(*, now: dt.datetime | None = None) -> dict:
    """The live runners' clock offsets from the database's (as each last measured it):
    {"status": "ok" | "degraded", "max_offset_seconds": float | None, "skewed": n}.
    "degraded" past `RUNNER_CLOCK_SKEW_LIMIT_SECONDS` either way. Leases and liveness
    do not depend on it (they use the database's clock); logs and job timelines do."""
    offsets = [
        offset
        for offset in live_runners(now=now).values_list("clock_offset_seconds", flat=True)
        if offset is not None
    ]
    if not offsets:
        return {"status": "ok", "max_offset_seconds": None, "skewed": 0}
    limit = clock_skew_limit()
    worst = max(offsets, key=abs)
    skewed = sum(1 for offset in offsets if abs(offset) > limit)
    return {
        "status": "degraded" if skewed else "ok",
        "max_offset_seconds": round(worst, 3),
        "skewed": skewed,
    }


def system_health(*, now: dt.datetime | None = None) -> dict:
    """What `/healthz/` reports once the database answered.

    "degraded" (still served with 200: the product works, some jobs cannot run) when
    the scheduler is not ticking, an instance type of a process queue has no live
    runner, a live runner cannot run some of its jobs (`runner_problems`), or a live
    runner's clock is off the database's by more than `RUNNER_CLOCK_SKEW_LIMIT_SECONDS`.
    Runner names and hosts are left out: the endpoint needs no login. Runner liveness
    is judged on the database's clock.
    """
    scheduler = scheduler_liveness(now=now or timezone.now())
    without = instance_types_without_runner(now=now)
    problems = runner_problems(now=now)
    clocks = runner_clocks(now=now)
    degraded = (
        scheduler["status"] != "ok" or bool(without) or bool(problems) or clocks["status"] != "ok"
    )
    return {
        "status": "degraded" if degraded else "ok",
        "database": "ok",
        "scheduler": scheduler,
        "runners": {
            "live": live_runners(now=now).count(),
            "instance_types_without_runner": without,
            "problems": problems,
            "clock": clocks,
        },
    }


def runner_problems(*, now: dt.datetime | None = None) -> list[dict]:
    """What live runners found at start they cannot do for their jobs (the interpreter
    or a program their job account cannot execute, a network they cannot isolate):
    [{"runner": its number, "instance_types": [...], "problems": [...]}]. A runner is
    named by its row's id, not its host: `/healthz/` needs no login."""
    rows = live_runners(now=now).values_list("pk", "instance_types", "problems")
    return [
        {"runner": pk, "instance_types": types, "problems": problems}
        for pk, types, problems in rows
        if problems
    ]


@dataclass(frozen=True)
class RunnerRow:
    """One runner incarnation as the runners page shows it."""

    name: str
    hostname: str
    pid: int
    instance_types: list[str]
    status: str  # live | gone (silent past its timeout) | stopped
    started_at: dt.datetime
    last_seen_at: dt.datetime
    last_seen_seconds: float
    clock_offset_seconds: float | None
    clock_skewed: bool
    problems: list[str]
    running_jobs: int


def runner_overview(*, now: dt.datetime | None = None, limit: int = 200) -> dict:
    """The runners page: every runner incarnation, live ones first (newest first), with
    what `/healthz/` judges from them (instance types nobody serves, clock skew, what a
    runner cannot run), named, since the page is for admins. Runners stopped or gone
    more than a day ago are left out. Times are the database's clock, as the beats."""
    # The ages are on the database's clock, as the beats are (this process's may drift).
    reference = now or timezone.now() - dt.timedelta(seconds=database_clock_offset())
    live_ids = set(live_runners(now=now).values_list("pk", flat=True))
    limit_skew = clock_skew_limit()
    recent = Runner.objects.filter(last_seen_at__gte=reference - dt.timedelta(days=1))
    running = dict(
        Job.objects.filter(state__in=Job.HOLDING_STATES)
        .exclude(worker="")
        .order_by()
        .values("worker")
        .annotate(n=Count("pk"))
        .values_list("worker", "n")
    )
    rows = []
    for runner in recent.order_by("-last_seen_at")[:limit]:
        if runner.pk in live_ids:
            status = "live"
        elif runner.stopped_at is not None:
            status = "stopped"
        else:
            status = "gone"
        offset = runner.clock_offset_seconds
        rows.append(
            RunnerRow(
                name=runner.name,
                hostname=runner.hostname,
                pid=runner.pid,
                instance_types=list(runner.instance_types),
                status=status,
                started_at=runner.started_at,
                last_seen_at=runner.last_seen_at,
                last_seen_seconds=max(0.0, (reference - runner.last_seen_at).total_seconds()),
                clock_offset_seconds=offset,
                clock_skewed=status == "live" and offset is not None and abs(offset) > limit_skew,
                problems=list(runner.problems or []) if status == "live" else [],
                running_jobs=running.get(f"{runner.hostname}:{runner.pid}", 0),
            )
        )
    rows.sort(key=lambda row: (row.status != "live", -row.last_seen_at.timestamp()))
    health = system_health(now=now)
    return {
        "status": health["status"],
        "rows": rows,
        "without_runner": health["runners"]["instance_types_without_runner"],
        "clock": health["runners"]["clock"],
        "skew_limit": limit_skew,
        "live": sum(1 for row in rows if row.status == "live"),
    }


# Interruption contracts (spec v2): what a job's copied contract, or a workload class,
# promises, in words; and, for a running job, until when its current run is protected.


def _span(seconds: int) -> str:
    """Seconds as a contract is written: "120 s", "30 min", "2 h"."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 600:
        return f"{seconds // 60} min"
    return f"{seconds} s" if seconds < 600 else duration(seconds)


def contract_words(contract) -> list[str]:
    """A contract (a job's copied fields, or a workload class: min_runtime_reclaim,
    min_runtime_preempt, grace, checkpoint_on_notice) as sentences, one per promise."""
    words = []
    for seconds, cause in (
        (contract.min_runtime_reclaim, "reclaim"),
        (contract.min_runtime_preempt, "in-share preemption"),
    ):
        if seconds:
            words.append(f"protected from {cause} for {_span(seconds)} after each start")
        else:
            words.append(f"not protected from {cause}")
    grace, checkpoint = contract.grace, contract.checkpoint_on_notice
    if not grace:
        words.append("no notice: a victim stops at once")
    elif checkpoint is None:
        words.append(
            f"{_span(grace)} notice, does not checkpoint on notice (it stops at the end of "
            "its notice and resumes from its last periodic checkpoint)"
        )
    elif checkpoint <= grace:
        words.append(f"{_span(grace)} notice, checkpoints in {_span(checkpoint)}")
    else:
        words.append(
            f"{_span(grace)} notice, but checkpointing takes {_span(checkpoint)}: it stops at "
            "the end of its notice and resumes from its last periodic checkpoint"
        )
    return words


@dataclass(frozen=True)
class JobContract:
    """The job page's contract: the class it came from, its promises in words, and, while
    the job runs, until when its current run is protected (None: not protected now)."""

    workload_class: str
    words: list[str]
    protected_from_reclaim_until: dt.datetime | None
    protected_from_preemption_until: dt.datetime | None


def job_contract(job: Job, *, now: dt.datetime | None = None) -> JobContract:
    """The job's copied contract. Protection counts from the start of the current run
    (Job.started_at) in real seconds, as the scheduler's pass reads it."""
    now = now or timezone.now()
    until = {}
    for name, seconds in (
        ("reclaim", job.min_runtime_reclaim),
        ("preemption", job.min_runtime_preempt),
    ):
        end = None
        if job.state == Job.State.RUNNING and job.started_at is not None and seconds:
            end = job.started_at + dt.timedelta(seconds=seconds)
            if end <= now:
                end = None
        until[name] = end
    return JobContract(
        workload_class=job.workload_class,
        words=contract_words(job),
        protected_from_reclaim_until=until["reclaim"],
        protected_from_preemption_until=until["preemption"],
    )
