"""Why a job waits, where it stands, and when it should start: the database side.

Reads a queue's live snapshot (through `scheduler.adapters`, the one bridge to the
engine) and the work figures of its live jobs, and hands them to the engine
(`scheduler.engine.explain`, `scheduler.engine.eta`): positions and blockers come
from the same Board the live pass uses, estimates from a forward simulation of the
snapshot with each job's declared duration corrected by history (how long finished
jobs of the same definition, else the same share, else the queue, really ran against
what they declared; `HISTORY_DAYS` of single-run jobs).

The queue's clock: a simulated queue runs `speed` compute seconds per real second, so
the forecast works in compute seconds (epoch seconds x speed) and every instant is
turned back into a real one for display; waits are given in the queue's clock too.

`submission_estimate` answers "if you submit this now" without storing anything.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, replace

from django.utils import timezone

from governance.models import JobQueue
from scheduler.adapters import (
    engine_id,
    epoch_column,
    epoch_seconds,
    fetch_rows,
    job_pk,
    queue_snapshot,
    seconds_of,
)
from scheduler.engine import PendingJob, Snapshot
from scheduler.engine.eta import Correction, correction_of, estimate_range, pick_correction
from scheduler.engine.explain import (
    STARTS_NOW,
    Explanation,
    Work,
    describe,
    dispatch_order,
    explain,
    is_misconfigured,
)
from scheduler.engine.types import SERVICE_ENVIRONMENT_MAX_RESOURCE
from scheduler.executors import executor_for
from scheduler.models import Job
from scheduler.services.jobs import JobData, JobError, job_preview

HISTORY_DAYS = 30
HISTORY_ROWS = 2000


# -- the queue's clock ------------------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    """Real instants <-> the queue's clock (compute seconds; epoch seconds x speed)."""

    speed: float
    simulated: bool

    def to_queue(self, seconds: float | None) -> int | None:
        return None if seconds is None else int(seconds * self.speed)

    def to_real(self, value: int | None) -> dt.datetime | None:
        if value is None:
            return None
        return dt.datetime.fromtimestamp(value / self.speed, tz=dt.UTC)


def queue_clock(queue: JobQueue) -> Clock:
    simulated = queue.executor == JobQueue.Executor.SIMULATED
    return Clock(speed=executor_for(queue).speed if simulated else 1.0, simulated=simulated)


def _in_clock(snapshot: Snapshot, clock: Clock) -> Snapshot:
    if clock.speed == 1:
        return snapshot
    q = clock.to_queue
    running = tuple(
        replace(
            job,
            started_at=q(job.started_at),
            submitted_at=q(job.submitted_at),
            protected_until=q(job.protected_until),
        )
        for job in snapshot.running
    )
    pending = tuple(
        replace(
            job,
            submitted_at=q(job.submitted_at),
            protected_until=q(job.protected_until),
            misconfigured_since=q(job.misconfigured_since),
        )
        for job in snapshot.pending
    )
    return replace(snapshot, running=running, pending=pending)


# -- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    by_definition: dict[int, Correction]
    by_share: dict[int, Correction]
    queue: Correction | None

    def correction(self, definition_id: int | None, share_id: int) -> Correction:
        return pick_correction(
            self.by_definition.get(definition_id) if definition_id else None,
            self.by_share.get(share_id),
            self.queue,
        )


def queue_history(queue: JobQueue, clock: Clock, now: dt.datetime) -> History:
    """Ratios actual / declared of the queue's recent single-run successes."""
    rows = (
        Job.objects.filter(
            queue=queue,
            state=Job.State.SUCCEEDED,
            attempt=1,
            finished_at__gte=now - dt.timedelta(days=HISTORY_DAYS),
        )
        .order_by("finished_at", "pk")
        .values_list(
            "share_id",
            "definition_revision__definition_id",
            "expected_duration",
            epoch_column("started_at"),
            epoch_column("finished_at"),
        )
    )
    count = rows.count()
    if count > HISTORY_ROWS:
        rows = rows[count - HISTORY_ROWS :]
    by_definition: dict[int, list[float]] = defaultdict(list)
    by_share: dict[int, list[float]] = defaultdict(list)
    everything: list[float] = []
    for share_id, definition_id, expected, started, finished in fetch_rows(rows):
        if started is None or finished is None:
            continue
        actual = (seconds_of(finished) - seconds_of(started)) * clock.speed
        ratio = max(actual, 1.0) / max(expected, 1)
        everything.append(ratio)
        by_share[share_id].append(ratio)
        if definition_id is not None:
            by_definition[definition_id].append(ratio)

    def groups(values: dict[int, list[float]], basis: str) -> dict[int, Correction]:
        found = {}
        for key, ratios in values.items():
            correction = correction_of(ratios, basis)
            if correction is not None:
                found[key] = correction
        return found

    return History(
        by_definition=groups(by_definition, "definition"),
        by_share=groups(by_share, "share"),
        queue=correction_of(everything, "queue"),
    )


# -- the live state -------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFacts:
    pk: int
    name: str
    share_id: int
    definition_id: int | None


@dataclass
class QueueView:
    queue: JobQueue
    clock: Clock
    now: dt.datetime
    now_q: int  # now in the queue's clock
    snapshot: Snapshot
    work: dict[str, Work]
    facts: dict[str, JobFacts]
    history: History
    share_ids: dict[str, int]
    share_order: dict[str, int]


def queue_view(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueView:
    now = now or timezone.now()
    clock = queue_clock(queue)
    snapshot, _ = queue_snapshot(queue, now=now)
    snapshot = _in_clock(snapshot, clock)
    now_q = clock.to_queue(epoch_seconds(now))
    rows = (
        Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES)
        .order_by()
        .values_list(
            "pk",
            "state",
            "name",
            "share_id",
            "definition_revision__definition_id",
            "expected_duration",
            "checkpointed",
            "progress",
            "run_overhead",
            "checkpoint_interval",
            "restart_overhead",
            "attempt",
            epoch_column("started_at"),
        )
    )
    process = queue.executor == JobQueue.Executor.PROCESS
    work: dict[str, Work] = {}
    facts: dict[str, JobFacts] = {}
    for (
        pk,
        state,
        name,
        share_id,
        definition_id,
        expected,
        saved,
        progress,
        overhead,
        interval,
        restart,
        attempt,
        started,
    ) in fetch_rows(rows):
        job_id = engine_id(pk)
        facts[job_id] = JobFacts(pk, name, share_id, definition_id)
        if state == Job.State.RUNNING and process and started is not None:
            # A process reports its progress: its end is `now + what is left`.
            elapsed = now.timestamp() - seconds_of(started)
            saved = max(0, progress - max(0, int(elapsed) - overhead))
        work[job_id] = Work(
            duration=expected,
            saved=saved,
            overhead=overhead if state == Job.State.RUNNING else 0,
            checkpoint_interval=interval,
            restart_overhead=restart,
            restarted=attempt > 0,
        )
    shares = list(queue.shares.order_by("position", "id").values_list("name", "pk"))
    return QueueView(
        queue=queue,
        clock=clock,
        now=now,
        now_q=now_q,
        snapshot=snapshot,
        work=work,
        facts=facts,
        history=queue_history(queue, clock, now),
        share_ids={name: pk for name, pk in shares},
        share_order={name: index for index, (name, _) in enumerate(shares)},
    )


def _corrections(view: QueueView) -> dict[str, Correction]:
    history = view.history
    return {
        job_id: history.correction(fact.definition_id, fact.share_id)
        for job_id, fact in view.facts.items()
    }


# -- what pages and the API show -------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A start range: real instants, and waits from now in the queue's clock (seconds)."""

    start_p50: dt.datetime | None
    start_p90: dt.datetime | None
    wait_p50: int | None
    wait_p90: int | None
    basis: str  # where the duration correction came from
    borrowing: bool | None

    @property
    def never(self) -> bool:
        return self.start_p50 is None


@dataclass(frozen=True)
class PendingEntry:
    job_id: int
    name: str
    share: str
    order: int  # 1-based place in the dispatch order
    position: int | None
    queue_length: int
    borrow_position: int | None
    borrow_queue_length: int
    reason: str  # the engine's code
    blocker: str  # plain words
    estimate: Estimate
    needs_decision: bool  # it can never start as configured


@dataclass(frozen=True)
class QueueEstimates:
    queue: JobQueue
    clock: Clock
    now: dt.datetime
    entries: list[PendingEntry]

    def by_job(self) -> dict[int, PendingEntry]:
        return {entry.job_id: entry for entry in self.entries}


def _when(clock: Clock, now: dt.datetime):
    def when(value: int) -> str:
        moment = timezone.localtime(clock.to_real(value))
        if moment.date() == timezone.localtime(now).date():
            return moment.strftime("%H:%M")
        return moment.strftime("%Y-%m-%d %H:%M")

    return when


def _estimate(view: QueueView, r, basis: str) -> Estimate:
    clock = view.clock
    return Estimate(
        start_p50=clock.to_real(r.p50),
        start_p90=clock.to_real(r.p90),
        wait_p50=None if r.p50 is None else max(0, r.p50 - view.now_q),
        wait_p90=None if r.p90 is None else max(0, r.p90 - view.now_q),
        basis=basis,
        borrowing=r.borrowed,
    )


def _entry(view, e: Explanation, order: int, r, ends, correction, code=None) -> PendingEntry:
    facts = view.facts

    def name(job_id: str) -> str:
        fact = facts.get(job_id)
        return f"{job_pk(job_id)} ({fact.name})" if fact else job_id

    if code is not None:
        e = replace(e, code=code)
    blocker = describe(e, name=name, when=_when(view.clock, view.now), ends=ends)
    fact = facts.get(e.job)
    return PendingEntry(
        job_id=job_pk(e.job),
        name=fact.name if fact else "",
        share=e.share,
        order=order,
        position=e.position,
        queue_length=e.queue_length,
        borrow_position=e.borrow_position,
        borrow_queue_length=e.borrow_queue_length,
        reason=e.code,
        blocker=blocker,
        estimate=_estimate(view, r, correction.basis),
        needs_decision=is_misconfigured(e.code),
    )


def queue_estimates(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueEstimates:
    """Every pending job of the queue in dispatch order, with position, blocker, estimate."""
    view = queue_view(queue, now=now)
    explanations = explain(view.snapshot, view.now_q)
    corrections = _corrections(view)
    ranges, low = estimate_range(view.snapshot, view.now_q, view.work, corrections)
    order = dispatch_order(explanations, low.starts, view.share_order)
    entries = []
    for index, job_id in enumerate(order, 1):
        entries.append(
            _entry(view, explanations[job_id], index, ranges[job_id], low.ends, corrections[job_id])
        )
    # Pending jobs a pass at `now` would start (the live pass has not run yet) come
    # first: the engine does not explain them as waiting.
    starting = [job for job in view.snapshot.pending if job.id not in explanations]
    entries[:0] = [
        PendingEntry(
            job_id=job_pk(job.id),
            name=view.facts[job.id].name,
            share=job.share,
            order=0,
            position=None,
            queue_length=0,
            borrow_position=None,
            borrow_queue_length=0,
            reason=STARTS_NOW,
            blocker="it starts at the next scheduling pass",
            estimate=_estimate(view, ranges[job.id], corrections[job.id].basis),
            needs_decision=False,
        )
        for job in starting
        if job.id in ranges
    ]
    entries = [replace(entry, order=index) for index, entry in enumerate(entries, 1)]
    return QueueEstimates(queue=queue, clock=view.clock, now=view.now, entries=entries)


def job_estimate(job: Job, *, now: dt.datetime | None = None) -> PendingEntry | None:
    """One RUNNABLE job's entry (None for a job that is not waiting)."""
    if job.state != Job.State.RUNNABLE:
        return None
    return queue_estimates(job.queue, now=now).by_job().get(job.pk)


# -- if you submit this now -------------------------------------------------------------------


@dataclass(frozen=True)
class SubmissionEstimate:
    queue: JobQueue
    clock: Clock
    share: str
    instance_type: str
    instances: int
    priority: int
    estimate: Estimate
    position: int | None
    queue_length: int
    borrow_position: int | None
    blocker: str
    within_limit: bool | None  # None: it would never start
    reclaimable_by: list[str]
    warnings: list[str]
    too_big: bool


def submission_estimate(*, data: JobData, now: dt.datetime | None = None) -> SubmissionEstimate:
    """What would happen to this job if it were submitted now. Stores nothing; raises
    JobError (field keys as for a submission) when the submission would be refused."""
    now = now or timezone.now()
    resolved = job_preview(data=data)
    share = data.share
    queue = share.queue
    view = queue_view(queue, now=now)
    last = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    job_id = engine_id(last + 1)
    priority = data.priority
    if priority is None:
        priority = data.urgency.priority if data.urgency is not None else 0
    itype = resolved.instance_type.name
    new = PendingJob(
        id=job_id,
        share=share.name,
        priority=priority,
        instance_type=itype,
        instances=resolved.instances,
        submitted_at=view.now_q,
    )
    work = Work(
        duration=resolved.expected_duration,
        checkpoint_interval=resolved.checkpoint_interval,
        restart_overhead=resolved.restart_overhead,
    )
    if not share.enabled:
        raise JobError({"share": [f"share {share.name} is disabled: the job would fail at once"]})
    definition_id = data.revision.definition_id if data.revision is not None else None
    corrections = _corrections(view)
    corrections[job_id] = view.history.correction(definition_id, share.pk)
    ranges, low = estimate_range(
        view.snapshot, view.now_q, view.work, corrections, extra=[(new, work)], until=[job_id]
    )
    with_new = replace(view.snapshot, pending=(*view.snapshot.pending, new))
    explanations = explain(with_new, view.now_q)
    view.facts[job_id] = _new_facts(job_id, data, share)
    r = ranges[job_id]
    e = explanations.get(job_id)
    if e is not None:
        entry = _entry(view, e, 0, r, low.ends, corrections[job_id])
        blocker, position, length, borrow = (
            entry.blocker,
            e.position,
            e.queue_length,
            e.borrow_position,
        )
        code = e.code
    else:
        blocker, position, length, borrow, code = "it would start at once", 1, 1, None, STARTS_NOW
    warnings = []
    too_big = code == SERVICE_ENVIRONMENT_MAX_RESOURCE
    if too_big:
        capacity = view.snapshot.queue.capacity.get(itype, 0)
        warnings.append(
            f"it needs {resolved.instances} {itype} but queue {queue.name} has {capacity}: it "
            "would be accepted but can never start as it is, and goes straight to the "
            "jobs that need a decision; lower its instances"
        )
    elif is_misconfigured(code):
        warnings.append(f"it can never start as configured: {blocker}")
    borrowing = low.borrowed.get(job_id)
    reclaimers = []
    if borrowing:
        for spec in view.snapshot.shares:
            if (
                spec.name != share.name
                and spec.enabled
                and spec.strategy != "RESERVE"
                and spec.capacity_limits.get(itype, 0) > 0
            ):
                reclaimers.append(spec.name)
    return SubmissionEstimate(
        queue=queue,
        clock=view.clock,
        share=share.name,
        instance_type=itype,
        instances=resolved.instances,
        priority=priority,
        estimate=_estimate(view, r, corrections[job_id].basis),
        position=position,
        queue_length=length,
        borrow_position=borrow,
        blocker=blocker,
        within_limit=None if borrowing is None else not borrowing,
        reclaimable_by=reclaimers,
        warnings=warnings,
        too_big=too_big,
    )


def _new_facts(job_id: str, data: JobData, share) -> JobFacts:
    definition_id = data.revision.definition_id if data.revision is not None else None
    return JobFacts(job_pk(job_id), data.name or "your job", share.pk, definition_id)
