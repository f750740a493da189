"""The scheduling pass of one queue: load state, run the engine, apply its decisions.

One writer per queue: a pass holds the queue's row lock (`select_for_update`; on
SQLite the settings open every transaction IMMEDIATE, which makes a write transaction
exclusive) from reading the jobs to writing the decisions, so two passes never hand
out the same capacity. Everything a pass changes is written in that one transaction:
a pass that crashes halfway leaves the database as it was. Executors are told after
commit, with ids.

Order at one instant (spec rule 9): the executor's finished jobs, then the engine's
`schedule` (capacity enforcement, time-limit failures, passes to a fixed point).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from governance.models import JobQueue
from scheduler.adapters import QueueState, job_pk, queue_state
from scheduler.engine import Fail, PassResult, Preempt, Start, schedule
from scheduler.engine.types import MISCONFIGURATION_REASONS
from scheduler.executors import executor_for
from scheduler.models import Job, JobEvent
from scheduler.services import work

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


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _without_cyclic_gc():
    """Pause the cyclic garbage collector while a pass builds its snapshot and board.

    A pass over 10,000 jobs allocates some 50,000 objects that all live until it ends;
    the collector would scan them again and again for cycles they do not have (about
    40% of a pass's time on PostgreSQL). Reference counting still frees everything; a
    counter keeps it paused while any thread of the process runs a pass.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        _gc_holders += 1
        if _gc_holders == 1:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


def lock_queue(queue_id: int) -> JobQueue:
    """The queue row, locked until the end of the current transaction."""
    return JobQueue.objects.select_for_update().get(pk=queue_id)


def request_pass(queue_id: int) -> None:
    """Ask for a pass of the queue once the current transaction commits.

    A broker that cannot take the message loses nothing: the periodic tick runs a
    pass of every queue with live jobs anyway.
    """

    def send() -> None:
        from scheduler import tasks

        try:
            tasks.run_pass.delay(queue_id)
        except Exception:  # noqa: BLE001 - any broker failure; the tick repairs it
            logger.exception("could not enqueue a pass of queue %s", queue_id)

    transaction.on_commit(send)


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


def scheduling_pass(*, queue_id: int, now: dt.datetime | None = None) -> PassOutcome:
    """Run one pass of the queue at `now` (default: the current time)."""
    now = now or timezone.now()
    outcome = PassOutcome(queue_id=queue_id)
    with _without_cyclic_gc(), transaction.atomic():
        queue = lock_queue(queue_id)
        executor = executor_for(queue)
        outcome.finished = finish_due(queue, now=now)
        state = queue_state(queue, now=now)
        result = schedule(state.snapshot, state.now)
        launches = _apply(queue, state, result, now, outcome)
        if launches:
            transaction.on_commit(lambda: executor.started(launches))
    return outcome


def finish_due(queue: JobQueue, *, now: dt.datetime) -> list[int]:
    """End SUCCEEDED the jobs whose work is done (simulated queues); caller holds the lock."""
    executor = executor_for(queue)
    if executor.name != JobQueue.Executor.SIMULATED:
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
    queue: JobQueue, state: QueueState, result: PassResult, now: dt.datetime, outcome: PassOutcome
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
    state: QueueState, result: PassResult, decided: dict[int, Job], now: dt.datetime
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
