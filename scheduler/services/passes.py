"""The scheduling pass of one queue: load state, run the engine, apply its decisions.

One writer per queue: a pass holds the queue's row lock (fleet.locks)
from reading the jobs to writing the decisions, so two passes never hand
out the same capacity. Everything a pass changes is written in that one transaction:
a pass that crashes halfway leaves the database as it was. Executors are told after
commit, with ids.

Order at one instant (spec rule 9, V11): the executor's finished jobs, then the stops
of STOPPING jobs due (a modelled clock: at the engine's stop instant; a real process
stops when its runner reports the exit, `scheduler.services.runs`), then the engine's
`schedule` (capacity enforcement, time-limit failures, passes to a fixed point).

Interruption contracts (spec v2): a victim with grace is not stopped at the decision
but becomes STOPPING (`notice`); it keeps its capacity, in the database as in the
snapshot, until `stop_job` frees it, and its starter waits (`notice_for`), holding
the instances its other victims freed meanwhile (`held_instances`, V8.2).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.celery import task
from engine import Fail, PassResult, Preempt, Start, schedule
from engine.gc_pause import cyclic_gc_paused
from engine.quota import Policy
from engine.scheduling import schedule_fed
from engine.types import (
    BLOCKED_BEHIND_HEAD,
    MISCONFIGURATION_REASONS,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
)
from fleet.bridge import (
    PAGE,
    SETTLED_REASONS,
    FedState,
    QueuePolicy,
    QueueState,
    epoch_seconds,
    fed_queue_state,
    job_pk,
    queue_policy,
    queue_state,
)
from fleet.locks import lock_queue
from fleet.models import Job, JobEvent, JobQueue
from scheduler import work
from scheduler.executors import executor_for
from scheduler.metrics import pass_measured
from scheduler.models import QueuePassState

logger = logging.getLogger(__name__)

# Columns a pass may change on the jobs it decides about.
DECIDED_FIELDS = [
    "state",
    "reason",
    "misconfigured_since",
    "runnable_since",
    "first_started_at",
    "started_at",
    "start_seq",
    "borrowed",
    "ran_borrowed",
    "finished_at",
    "attempt",
    "run_overhead",
    "heartbeat_at",
    "worker",
    "progress",
    "checkpointed",
    "preemptions",
    "lost_work",
    "restart_overhead_spent",
    "waiting_time",
    "notice_at",
    "grace_until",
    "stop_at",
    "notice_for",
    "saves_on_notice",
    "fails_at_stop",
    "stop_cause",
    "terminate_at_stop",
    "stop_actor",
    "notice_time",
    "held_instances",
    "reclaim_wait_since",
]
_CHUNK = 2000


# A pass asked for and not begun yet makes further requests wait for it, unless it was
# asked for this long ago (its message may be lost: a broker outage, a purge).
PASS_REQUEST_STALE = dt.timedelta(seconds=10)


def request_pass(queue_id: int) -> None:
    """Ask for a pass of the queue once the current transaction commits.

    Requests coalesce: while a pass of the queue is queued and not begun, a request
    only relies on it (that pass reads the queue after the request's commit), so at
    most one pass message per queue waits in the broker however many submissions,
    finishes and policy changes arrive. A broker that cannot take the message loses
    nothing: the periodic tick asks for a pass of every queue with live jobs anyway.
    """

    transaction.on_commit(lambda: send_pass(queue_id))


def send_pass(queue_id: int) -> None:
    """Enqueue a pass of the queue now, unless one is waiting already (see request_pass)."""
    if not claim_pass_request(queue_id):
        return
    try:
        # No result wanted: a Redis result store that is down would hold the request
        # (its subscription to the result retries for some 20 s) after the commit; and
        # no retries of the publish: a lost request is the tick's to repair.
        task("scheduler.run_pass").apply_async((queue_id,), ignore_result=True, retry=False)
    except Exception as error:  # noqa: BLE001 - any broker failure; the tick repairs it
        pass_request_taken(queue_id)
        logger.warning("could not enqueue a pass of queue %s (%s): the tick asks", queue_id, error)


def claim_pass_request(queue_id: int, *, now: dt.datetime | None = None) -> bool:
    """Mark a pass of the queue as asked for; False when one is already waiting."""
    now = now or timezone.now()
    marks = QueuePassState.objects.filter(queue_id=queue_id)
    claimed = marks.filter(
        Q(pass_requested_at__isnull=True) | Q(pass_requested_at__lt=now - PASS_REQUEST_STALE)
    ).update(pass_requested_at=now)
    if claimed:
        return True
    if marks.exists():
        return False
    try:
        with transaction.atomic():
            # No policy judged yet: the first pass reads every waiting job.
            QueuePassState.objects.create(
                queue_id=queue_id, policy_key="", judged_at=now, pass_requested_at=now
            )
    except IntegrityError:
        return False  # another request created it, and sends the pass
    return True


def pass_request_taken(queue_id: int) -> None:
    """A pass of the queue begins (before it reads anything): later requests need a new one."""
    QueuePassState.objects.filter(queue_id=queue_id, pass_requested_at__isnull=False).update(
        pass_requested_at=None
    )


@dataclass
class PassOutcome:
    queue_id: int
    finished: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    noticed: list[int] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.finished
            or self.started
            or self.preempted
            or self.failed
            or self.stopped
            or self.noticed
        )


def scheduling_pass(
    *, queue_id: int, now: dt.datetime | None = None, full: bool = False, page: int = PAGE
) -> PassOutcome:
    """Run one pass of the queue at `now` (default: the current time).

    A pass reads what it can decide on: the running jobs, the waiting jobs at the head
    of each share's queue (more, a page at a time, as heads start), the heads of the
    last pass and the misconfigured jobs due to fail. New submissions are judged
    (misconfigured or not) in bulk by (share, type, size). Every waiting job is read
    and judged again only when the queue's policy (capacity, shares) changed since the
    last such pass, or when `full` asks for it; both ways decide the same (the tests
    compare them on random queues).
    """
    now = now or timezone.now()
    outcome = PassOutcome(queue_id=queue_id)
    began = time.perf_counter()
    with cyclic_gc_paused(), transaction.atomic():
        queue = lock_queue(queue_id)
        executor = executor_for(queue)
        outcome.finished = finish_due(queue, now=now)
        outcome.stopped = stop_due(queue, now=now)
        policy = queue_policy(queue, seen=executor.capacity_seen(queue))
        key = policy.key
        # A real process frees its capacity when it has exited: every victim gets notice.
        floor = 1 if executor.capabilities.stops_with_notice else 0
        judged = (
            QueuePassState.objects.filter(queue_id=queue_id)
            .values_list("policy_key", flat=True)
            .first()
        )
        state: QueueState | FedState
        if full or judged != key:
            state = queue_state(queue, now=now, policy=policy, notice_floor=floor)
            result = schedule(state.snapshot, state.now)
            QueuePassState.objects.update_or_create(
                queue_id=queue_id, defaults={"policy_key": key, "judged_at": now}
            )
        else:
            _judge_new(queue, policy, now)
            state = fed_queue_state(queue, now=now, policy=policy, page=page, notice_floor=floor)
            result = schedule_fed(state.snapshot, state.now, state.feeds)
        launches = _apply(queue, state, result, now, outcome, policy)
        if launches:
            transaction.on_commit(lambda: executor.started(launches))
        if outcome.noticed:
            noticed = list(outcome.noticed)
            transaction.on_commit(lambda: executor.notify(noticed))
    pass_measured(
        queue=queue,
        seconds=time.perf_counter() - began,
        read="full" if full or judged != key else "heads",
        waiting=len(result.reasons),
        started=len(outcome.started),
        preempted=len(outcome.preempted) + len(outcome.noticed),
        finished=len(outcome.finished),
        failed=len(outcome.failed),
    )
    return outcome


def _judge_new(queue: JobQueue, policy: QueuePolicy, now: dt.datetime) -> None:
    """Judge the waiting jobs no pass has seen yet (their reason is empty): one query for
    their distinct (share, type, size), one UPDATE per misconfigured kind (its clock
    starts now, as the engine's `settle` would), one for the rest, which wait behind
    their share's head unless the pass reads them at the head (it then writes their
    reason)."""
    fresh = Job.objects.filter(queue=queue, state=Job.State.RUNNABLE, reason="").exclude(
        reason__in=SETTLED_REASONS
    )
    kinds = list(
        fresh.order_by().values_list("share_id", "instance_type_id", "instances").distinct()
    )
    if not kinds:
        return
    rules = Policy(policy.queue, policy.shares)
    index = {pk: rules.by_name[name].index for pk, name in policy.share_names.items()}
    judged = 0
    for share_id, type_id, instances in kinds:
        type_name = policy.type_names[type_id]
        reason = rules.misconfiguration(index[share_id], type_name, instances)
        if reason is not None:
            for_nodes = reason == SERVICE_ENVIRONMENT_MAX_RESOURCE and (
                policy.too_big_for_now_only(type_name, instances)
            )
            judged += fresh.filter(
                share_id=share_id, instance_type_id=type_id, instances=instances
            ).update(
                reason=reason,
                misconfigured_since=None
                if for_nodes
                else Coalesce(F("misconfigured_since"), Value(now)),
            )
    judged += fresh.update(reason=BLOCKED_BEHIND_HEAD, misconfigured_since=None)
    if judged >= REFRESH_STATISTICS_AFTER and connection.vendor == "postgresql":
        transaction.on_commit(_refresh_statistics)


# A burst of submissions judged at once leaves PostgreSQL's statistics saying that most
# waiting jobs have no reason yet, and the planner then reads the queue whole instead
# of the few rows the partial indexes hold; after such a burst a pass has the
# statistics refreshed (after commit, outside the queue lock; autovacuum would, later).
REFRESH_STATISTICS_AFTER = 2000


def _refresh_statistics() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE scheduler_job")
    except DatabaseError:  # e.g. autovacuum holds the table: it is refreshing them
        logger.warning("could not refresh the statistics of scheduler_job", exc_info=True)


def finish_due(queue: JobQueue, *, now: dt.datetime) -> list[int]:
    """End SUCCEEDED the jobs whose work is done (simulated queues); caller holds the lock.

    A STOPPING job whose work completes before its stop succeeds (V7): its notice ends,
    and a starter waiting for it holds its instances (V8.2)."""
    executor = executor_for(queue)
    if not executor.capabilities.modelled_clock:
        return []
    due = executor.due_finishes(queue, now)
    if not due:
        return []
    events = []
    releases: list[tuple[int, int]] = []
    for job, at in due:
        if job.state == Job.State.STOPPING:
            releases += end_notice(job, at=at, hold=True)
        work.on_finish(job, at=at, speed=executor.speed)
        events.append(JobEvent(job=job, at=at, type=JobEvent.Type.SUCCEEDED, attempt=job.attempt))
    Job.objects.bulk_update([job for job, _ in due], DECIDED_FIELDS)
    JobEvent.objects.bulk_create(events)
    release_holds(releases)
    return [job.pk for job, _ in due]


def stop_due(queue: JobQueue, *, now: dt.datetime) -> list[int]:
    """Stop the STOPPING jobs whose stop instant has come (V9), in the order of their
    notices; caller holds the lock. A modelled clock stops a job at the engine's stop
    instant; a real process is stopped when its runner reports the exit, or, when no
    runner does, once its grace and the kill margin are over (`stop_at`): by then the
    runner has killed it or is gone. A run no runner claimed has no process: it
    stops at once."""
    executor = executor_for(queue)
    if executor.capabilities.confirms_stops:
        # Only the end its executor reports stops it (its reconciliation).
        return []
    due_now = Q(stop_at__lte=now)
    if executor.capabilities.needs_runner:
        # A claimed run also waits out its lease: a runner frozen before it learned the
        # notice has its watchdog kill the group only by the lease's end (see
        # scheduler.executors.process.run, "Fencing").
        due_now &= Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)
        # No runner claimed the run (a claim needs RUNNING): no process to wait for.
        due_now |= Q(worker="")
    due = list(
        Job.objects.filter(due_now, queue=queue, state=Job.State.STOPPING).order_by(
            "notice_at", "pk"
        )
    )
    events: list[JobEvent] = []
    releases: list[tuple[int, int]] = []
    for job in due:
        modelled = executor.capabilities.modelled_clock
        at = job.stop_at if modelled else now
        progress, saved = executor.interrupted(job, at)
        if modelled and job.saves_on_notice:
            saved = progress  # V6.2: saved at its stop instant
        stop_events, release = stop_job(
            job, at=at, speed=executor.speed, progress=progress, saved=saved
        )
        events += stop_events
        releases += release
    if due:
        Job.objects.bulk_update(due, [*DECIDED_FIELDS, "lease_token", "lease_expires_at"])
        JobEvent.objects.bulk_create(events)
        release_holds(releases)
    return [job.pk for job in due]


def end_notice(job: Job, *, at: dt.datetime, hold: bool) -> list[tuple[int, int]]:
    """The job leaves STOPPING at `at`: its notice time counts, its fields clear; return
    the hold to pass on to the starter waiting for it (see `release_holds`)."""
    if job.notice_at is not None:
        job.notice_time += max(0, round((at - job.notice_at).total_seconds()))
    starter = job.notice_for_id
    job.notice_at = job.grace_until = job.stop_at = None
    job.saves_on_notice = job.fails_at_stop = job.terminate_at_stop = False
    job.stop_cause = ""
    job.stop_actor = None
    return [] if starter is None else [(starter, job.instances if hold else 0)]


def stop_job(
    job: Job,
    *,
    at: dt.datetime,
    speed: float,
    progress: int,
    saved: int,
    cause: str | None = None,
    fails: bool | None = None,
) -> tuple[list[JobEvent], list[tuple[int, int]]]:
    """A STOPPING job stops at `at` and frees its capacity (V9); returns its events and
    the hold to pass on (`release_holds`, once saved).

    `progress` / `saved` are what the run reached and what it kept: a modelled job that
    saves on notice keeps all of it (the caller passes `saved = progress`), unless a
    capacity cut (`cause` "capacity_change", V10.1) stops it before its save completes;
    a real process kept what its status file last said it checkpointed.
    Then it is RUNNABLE again in its place, or FAILED: its retry bound spent
    (`retries_exhausted`), or terminated during its notice (`terminated`). The caller
    saves the job and the events, then calls `release_holds`.
    """
    stop_cause = cause or job.stop_cause
    by_id = None if cause == "capacity_change" else job.notice_for_id
    saves = job.saves_on_notice and cause != "capacity_change"
    fails = job.fails_at_stop if fails is None else fails
    terminated = job.terminate_at_stop
    terminated_by = job.stop_actor_id
    release = end_notice(job, at=at, hold=cause != "capacity_change")
    job.lease_token = ""
    job.lease_expires_at = None
    if terminated:  # as a terminate of a running job: FAILED, nothing counted lost
        job.progress = progress
        work.on_fail(job, now=at, speed=speed, cause="terminated")
        event = JobEvent(
            job=job,
            at=at,
            type=JobEvent.Type.FAILED,
            cause="terminated",
            actor_id=terminated_by,
            attempt=job.attempt,
        )
        return [event], release
    lost = work.on_interrupt(job, now=at, speed=speed, progress=progress, saved=saved)
    events = [
        JobEvent(
            job=job,
            at=at,
            type=JobEvent.Type.STOPPED,
            cause=stop_cause,
            by_id=by_id,
            attempt=job.attempt,
            detail={
                "lost_work": lost,
                "saved_on_notice": saves and lost == 0,
                "resumes_from": job.checkpointed,
            },
        )
    ]
    if fails:
        work.on_fail(job, now=at, speed=speed, cause="retries_exhausted")
        events.append(
            JobEvent(
                job=job,
                at=at,
                type=JobEvent.Type.FAILED,
                cause="retries_exhausted",
                attempt=job.attempt,
            )
        )
    return events, release


def release_holds(releases: list[tuple[int, int]]) -> None:
    """Pass on freed instances to the starters waiting for them (V8.2), once the jobs
    that left STOPPING are saved: a starter still waiting for another victim holds
    them; one whose last victim left stops waiting, and its hold ends (V8.3)."""
    for starter, instances in releases:
        waiting = Job.objects.filter(pk=starter, state=Job.State.RUNNABLE)
        if Job.objects.filter(notice_for_id=starter, state=Job.State.STOPPING).exists():
            if instances:
                waiting.update(held_instances=F("held_instances") + instances)
        else:
            waiting.update(held_instances=0)


def notice_stop_at(executor, grace_until: dt.datetime, engine_stop_at: dt.datetime):
    """When a STOPPING job's capacity is free at the latest: a modelled clock stops it
    at the engine's stop instant; a real process by its exit, at the latest when its
    grace and the kill margin are over (SIGKILL at the grace, the exit reported)."""
    if executor.capabilities.modelled_clock:
        return engine_stop_at
    return grace_until + dt.timedelta(seconds=settings.JOB_KILL_MARGIN_SECONDS)


def _apply(
    queue: JobQueue,
    state: QueueState | FedState,
    result: PassResult,
    now: dt.datetime,
    outcome: PassOutcome,
    policy: QueuePolicy,
) -> list[tuple[int, int, str]]:
    """Write the decisions and the reasons; return the runs to launch after commit."""
    executor = executor_for(queue)
    speed = executor.speed
    decided = {job_pk(decision.job) for decision in result.decisions}
    jobs = (
        Job.objects.select_related("instance_type", "definition_revision").in_bulk(decided)
        if decided
        else {}
    )
    events: list[JobEvent] = []
    releases: list[tuple[int, int]] = []
    # Starters that wait for victims given notice in this pass (V8): a new wait, whose
    # hold starts empty and takes the instances of their victims stopped at once.
    waiting = {
        job_pk(decision.by)
        for decision in result.decisions
        if isinstance(decision, Preempt) and decision.grace_until is not None
    }
    holds: dict[int, int] = dict.fromkeys(waiting, 0)
    start_seq = state.next_start_seq
    for decision in result.decisions:
        job = jobs[job_pk(decision.job)]
        if isinstance(decision, Start):
            if job.state != Job.State.RUNNABLE:
                raise RuntimeError(f"the engine started job {job.pk}, which is {job.state}")
            # V12: the reclaim episode this start ends, if one began (now, or before).
            since = job.reclaim_wait_since
            if since is None and decision.job in result.reclaim_episodes:
                since = now
            work.on_start(
                job, now=now, speed=speed, borrowed=decision.borrowed, start_seq=start_seq
            )
            job.reclaim_wait_since = None
            start_seq += 1
            outcome.started.append(job.pk)
            events.append(
                JobEvent(
                    job=job,
                    at=now,
                    type=JobEvent.Type.STARTED,
                    borrowed=decision.borrowed,
                    attempt=job.attempt,
                    detail={}
                    if since is None
                    else {"reclaim_wait": max(0, round((now - since).total_seconds()))},
                )
            )
        elif isinstance(decision, Preempt):
            preempt_events, release = _apply_preempt(
                job, decision, executor, now, outcome, waiting, holds
            )
            events += preempt_events
            releases += release
        elif isinstance(decision, Fail):
            work.on_fail(job, now=now, speed=speed, cause=decision.cause)
            outcome.failed.append(job.pk)
            events.append(
                JobEvent(
                    job=job,
                    at=now,
                    type=JobEvent.Type.FAILED,
                    cause=decision.cause,
                    attempt=job.attempt,
                )
            )
    _record_reasons(state, result, jobs, now, policy)
    if jobs:
        Job.objects.bulk_update(list(jobs.values()), DECIDED_FIELDS, batch_size=_CHUNK)
    if events:
        JobEvent.objects.bulk_create(events, batch_size=_CHUNK)
    for starter, held in holds.items():
        Job.objects.filter(pk=starter, state=Job.State.RUNNABLE).update(held_instances=held)
    _count_protected_blocks(result)
    begun = [job_pk(job_id) for job_id in result.reclaim_episodes]
    if begun:  # V12: the first pass of its RUNNABLE period that found it reclaiming
        Job.objects.filter(
            pk__in=begun, state=Job.State.RUNNABLE, reclaim_wait_since__isnull=True
        ).update(reclaim_wait_since=now)
    release_holds(releases)
    return [
        (job.pk, job.attempt, job.instance_type.name)
        for job in jobs.values()
        if job.state == Job.State.RUNNING and job.pk in outcome.started
    ]


def _count_protected_blocks(result: PassResult) -> None:
    """V4's protected blocks of this pass, counted once per run of each job: the live
    scheduler also passes on a periodic tick, and a job protected through many ticks
    spared one preemption, not one per tick. (A replay counts one per instant at which
    its passes ran, as the spec says; the two agree on a job blocked at one instant.)"""
    blocked = [job_pk(job_id) for job_id in result.protected_blocks]
    if blocked:
        Job.objects.filter(pk__in=blocked, state__in=Job.HOLDING_STATES).exclude(
            blocked_attempt=F("attempt")
        ).update(protected_blocks=F("protected_blocks") + 1, blocked_attempt=F("attempt"))


def _apply_preempt(
    job: Job,
    decision: Preempt,
    executor,
    now: dt.datetime,
    outcome: PassOutcome,
    waiting: set[int],
    holds: dict[int, int],
) -> tuple[list[JobEvent], list[tuple[int, int]]]:
    """A preemption: notice (grace), an immediate stop, or a STOPPING job's stop by a
    capacity cut (V10.1); returns its events and the holds to release."""
    speed = executor.speed
    if job.state == Job.State.STOPPING:
        if decision.cause != "capacity_change":
            raise RuntimeError(f"the engine preempted job {job.pk} again during notice")
        progress, saved = executor.interrupted(job, now)
        stopped = stop_job(
            job,
            at=now,
            speed=speed,
            progress=progress,
            saved=saved,
            cause="capacity_change",
            fails=decision.fails,
        )
        outcome.preempted.append(job.pk)
        if decision.fails:
            outcome.failed.append(job.pk)
        return stopped
    if job.state != Job.State.RUNNING:
        raise RuntimeError(f"the engine preempted job {job.pk}, which is {job.state}")
    job.preemptions += 1
    by_id = job_pk(decision.by) if decision.by else None
    if decision.grace_until is not None:
        _notice(job, decision, executor, now, by_id)
        outcome.noticed.append(job.pk)
        detail = {
            "grace_until": job.grace_until.isoformat(),
            "stop_at": job.stop_at.isoformat(),
            "saves": decision.saves,
        }
        event = JobEvent(
            job=job,
            at=now,
            type=JobEvent.Type.PREEMPTED,
            cause=decision.cause,
            by_id=by_id,
            attempt=job.attempt,
            detail=detail,
        )
        return [event], []
    progress, saved = executor.interrupted(job, now)
    lost = work.on_interrupt(job, now=now, speed=speed, progress=progress, saved=saved)
    outcome.preempted.append(job.pk)
    if by_id in waiting:  # V8.2: held for the starter while it waits
        holds[by_id] += job.instances
    events = [
        JobEvent(
            job=job,
            at=now,
            type=JobEvent.Type.PREEMPTED,
            cause=decision.cause,
            by_id=by_id,
            attempt=job.attempt,
            detail={"lost_work": lost, "resumes_from": saved},
        )
    ]
    if decision.fails:
        work.on_fail(job, now=now, speed=speed, cause="retries_exhausted")
        outcome.failed.append(job.pk)
        events.append(
            JobEvent(
                job=job,
                at=now,
                type=JobEvent.Type.FAILED,
                cause="retries_exhausted",
                attempt=job.attempt,
            )
        )
    return events, []


def _notice(job: Job, decision: Preempt, executor, now: dt.datetime, by_id) -> None:
    """Give the victim notice (V6.2): STOPPING until its stop, holding its capacity."""
    job.state = Job.State.STOPPING
    job.notice_at = now
    job.grace_until = _moment(decision.grace_until, now)
    if executor.capabilities.stops_with_notice and not job.grace:
        # No contract: the definition's grace between SIGTERM and SIGKILL.
        revision = job.definition_revision
        grace = revision.stop_grace_seconds if revision is not None else 0
        job.grace_until = now + dt.timedelta(seconds=grace)
    job.stop_at = notice_stop_at(executor, job.grace_until, _moment(decision.stop_at, now))
    job.notice_for_id = by_id
    job.saves_on_notice = decision.saves
    job.fails_at_stop = decision.fails
    job.stop_cause = decision.cause
    job.terminate_at_stop = False
    job.stop_actor = None


def _moment(seconds: int, now: dt.datetime) -> dt.datetime:
    """An engine instant as a datetime, keeping `now`'s fraction of a second (the
    engine counts whole seconds from int(now))."""
    return now + dt.timedelta(seconds=seconds - epoch_seconds(now))


def _waiting_for_nodes(policy: QueuePolicy, result: PassResult) -> set[int]:
    """The jobs judged bigger than the queue's capacity only because the executor's nodes are
    out of service (`QueuePolicy.too_big_for_now_only`): one query, only while some capacity
    is lowered."""
    if not policy.configured:
        return set()
    too_big = [
        job_pk(job_id)
        for job_id, reason in result.reasons.items()
        if reason == SERVICE_ENVIRONMENT_MAX_RESOURCE
    ]
    return {
        pk
        for pk, type_name, instances in Job.objects.filter(pk__in=too_big).values_list(
            "pk", "instance_type__name", "instances"
        )
        if policy.too_big_for_now_only(type_name, instances)
    }


def _record_reasons(
    state: QueueState | FedState,
    result: PassResult,
    decided: dict[int, Job],
    now: dt.datetime,
    policy: QueuePolicy,
) -> None:
    """Store why each waiting job waits, and when its misconfiguration began (never for
    a job that only waits for the executor's nodes to return, `_waiting_for_nodes`).

    Only rows whose reason changed are written, in one UPDATE per distinct change, so a
    pass over 10,000 waiting jobs writes a handful of rows, not all of them.
    """
    changes: dict[tuple[str, str], list[int]] = defaultdict(list)
    for_nodes = _waiting_for_nodes(policy, result)
    for job_id, reason in result.reasons.items():
        pk = job_pk(job_id)
        misconfigured = reason in MISCONFIGURATION_REASONS and pk not in for_nodes
        job = decided.get(pk)
        if job is not None:
            if job.state == Job.State.RUNNABLE:
                job.reason = reason
                if not misconfigured:
                    job.misconfigured_since = None
                elif job.misconfigured_since is None:
                    job.misconfigured_since = now
            continue
        row = state.live.get(pk)
        if row is None:
            continue
        if misconfigured:
            since = "keep" if row.misconfigured else "now"
        else:
            since = "clear" if row.misconfigured else "keep"
        if row.reason != reason or since != "keep":
            changes[(reason, since)].append(pk)
    for (reason, since), pks in changes.items():
        values: dict = {"reason": reason}
        if since == "now":
            values["misconfigured_since"] = now
        elif since == "clear":
            values["misconfigured_since"] = None
        for index in range(0, len(pks), _CHUNK):
            Job.objects.filter(pk__in=pks[index : index + _CHUNK]).update(**values)
