"""The scheduling pass of one queue: load state, run the engine, apply its decisions.

One writer per queue: a pass holds the queue's row lock (fleet.locks)
from reading the jobs to writing the decisions, so two passes never hand
out the same capacity. Everything a pass changes is written in that one transaction:
a pass that crashes halfway leaves the database as it was. Executors are told after
commit, with ids.

Order at one instant (spec rule 9): the executor's finished jobs, then the engine's
`schedule` (capacity enforcement, time-limit failures, passes to a fixed point).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.celery import task
from engine import Fail, PassResult, Preempt, Start, schedule
from engine.gc_pause import cyclic_gc_paused
from engine.quota import Policy
from engine.scheduling import schedule_fed
from engine.types import BLOCKED_BEHIND_HEAD, MISCONFIGURATION_REASONS
from fleet.bridge import (
    PAGE,
    SETTLED_REASONS,
    FedState,
    QueuePolicy,
    QueueState,
    fed_queue_state,
    job_pk,
    queue_policy,
    queue_state,
)
from fleet.locks import lock_queue
from fleet.models import Job, JobEvent, JobQueue
from scheduler import work
from scheduler.executors import executor_for
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

    @property
    def changed(self) -> bool:
        return bool(self.finished or self.started or self.preempted or self.failed)


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
    with cyclic_gc_paused(), transaction.atomic():
        queue = lock_queue(queue_id)
        executor = executor_for(queue)
        outcome.finished = finish_due(queue, now=now)
        policy = queue_policy(queue)
        key = policy.key
        judged = (
            QueuePassState.objects.filter(queue_id=queue_id)
            .values_list("policy_key", flat=True)
            .first()
        )
        state: QueueState | FedState
        if full or judged != key:
            state = queue_state(queue, now=now, policy=policy)
            result = schedule(state.snapshot, state.now)
            QueuePassState.objects.update_or_create(
                queue_id=queue_id, defaults={"policy_key": key, "judged_at": now}
            )
        else:
            _judge_new(queue, policy, now)
            state = fed_queue_state(queue, now=now, policy=policy, page=page)
            result = schedule_fed(state.snapshot, state.now, state.feeds)
        launches = _apply(queue, state, result, now, outcome)
        if launches:
            transaction.on_commit(lambda: executor.started(launches))
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
        reason = rules.misconfiguration(index[share_id], policy.type_names[type_id], instances)
        if reason is not None:
            judged += fresh.filter(
                share_id=share_id, instance_type_id=type_id, instances=instances
            ).update(
                reason=reason,
                misconfigured_since=Coalesce(F("misconfigured_since"), Value(now)),
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
    """End SUCCEEDED the jobs whose work is done (simulated queues); caller holds the lock."""
    executor = executor_for(queue)
    if not executor.capabilities.modelled_clock:
        return []
    due = executor.due_finishes(queue, now)
    if not due:
        return []
    events = []
    for job, at in due:
        work.on_finish(job, at=at, speed=executor.speed)
        events.append(JobEvent(job=job, at=at, type=JobEvent.Type.SUCCEEDED, attempt=job.attempt))
    Job.objects.bulk_update([job for job, _ in due], DECIDED_FIELDS)
    JobEvent.objects.bulk_create(events)
    return [job.pk for job, _ in due]


def _apply(
    queue: JobQueue,
    state: QueueState | FedState,
    result: PassResult,
    now: dt.datetime,
    outcome: PassOutcome,
) -> list[tuple[int, int, str]]:
    """Write the decisions and the reasons; return the runs to launch after commit."""
    executor = executor_for(queue)
    speed = executor.speed
    decided = {job_pk(decision.job) for decision in result.decisions}
    jobs = Job.objects.select_related("instance_type").in_bulk(decided) if decided else {}
    events: list[JobEvent] = []
    start_seq = state.next_start_seq
    for decision in result.decisions:
        job = jobs[job_pk(decision.job)]
        if isinstance(decision, Start):
            if job.state != Job.State.RUNNABLE:
                raise RuntimeError(f"the engine started job {job.pk}, which is {job.state}")
            work.on_start(
                job, now=now, speed=speed, borrowed=decision.borrowed, start_seq=start_seq
            )
            start_seq += 1
            outcome.started.append(job.pk)
            events.append(
                JobEvent(
                    job=job,
                    at=now,
                    type=JobEvent.Type.STARTED,
                    borrowed=decision.borrowed,
                    attempt=job.attempt,
                )
            )
        elif isinstance(decision, Preempt):
            if job.state != Job.State.RUNNING:
                raise RuntimeError(f"the engine preempted job {job.pk}, which is {job.state}")
            progress, saved = executor.interrupted(job, now)
            lost = work.on_interrupt(job, now=now, speed=speed, progress=progress, saved=saved)
            job.preemptions += 1
            outcome.preempted.append(job.pk)
            events.append(
                JobEvent(
                    job=job,
                    at=now,
                    type=JobEvent.Type.PREEMPTED,
                    cause=decision.cause,
                    by_id=job_pk(decision.by) if decision.by else None,
                    attempt=job.attempt,
                    detail={"lost_work": lost, "resumes_from": saved},
                )
            )
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
    _record_reasons(state, result, jobs, now)
    if jobs:
        Job.objects.bulk_update(list(jobs.values()), DECIDED_FIELDS, batch_size=_CHUNK)
    if events:
        JobEvent.objects.bulk_create(events, batch_size=_CHUNK)
    return [
        (job.pk, job.attempt, job.instance_type.name)
        for job in jobs.values()
        if job.state == Job.State.RUNNING and job.pk in outcome.started
    ]


def _record_reasons(
    state: QueueState | FedState, result: PassResult, decided: dict[int, Job], now: dt.datetime
) -> None:
    """Store why each waiting job waits, and when its misconfiguration began.

    Only rows whose reason changed are written, in one UPDATE per distinct change, so a
    pass over 10,000 waiting jobs writes a handful of rows, not all of them.
    """
    changes: dict[tuple[str, str], list[int]] = defaultdict(list)
    for job_id, reason in result.reasons.items():
        pk = job_pk(job_id)
        misconfigured = reason in MISCONFIGURATION_REASONS
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
