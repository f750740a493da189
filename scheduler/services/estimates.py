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

What is computed for a queue (its explanations and both forecasts, with their usage
timelines) is kept in the process while the queue's state is unchanged (`_fingerprint`:
its last job event, its live jobs' figures, its policy) and for at most
`ESTIMATE_CACHE_SECONDS` (30) of real time; pages, the pending list and the estimate
endpoint all read it, so they agree. `submission_estimate` answers "if you submit this
now" from it, without storing anything.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import defaultdict
from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import Count, Max, Sum
from django.utils import timezone

from governance.models import CapacityLimit, JobQueue, QueueCapacity
from scheduler.adapters import (
    engine_id,
    epoch_column,
    epoch_seconds,
    fetch_rows,
    job_pk,
    policy_shares,
    queue_snapshot,
    queue_spec,
    seconds_of,
    share_spec,
)
from scheduler.engine import PendingJob, RunningJob, Snapshot
from scheduler.engine.eta import (
    Correction,
    Range,
    correction_of,
    estimate_range,
    pick_correction,
)
from scheduler.engine.explain import (
    STARTS_NOW,
    Explainer,
    Explanation,
    Forecast,
    Work,
    describe,
    dispatch_order,
    extra_start,
    is_misconfigured,
    ready_at,
)
from scheduler.engine.quota import Policy
from scheduler.engine.types import SERVICE_ENVIRONMENT_MAX_RESOURCE
from scheduler.executors import executor_for
from scheduler.models import Job, JobEvent
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
    speed = clock.speed

    def q(value):
        return None if value is None else int(value * speed)

    # Built field by field: `dataclasses.replace` costs several times more per job.
    running = tuple(
        RunningJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            started_at=q(job.started_at),
            start_seq=job.start_seq,
            protected_until=q(job.protected_until),
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
            submitted_at=q(job.submitted_at),
        )
        for job in snapshot.running
    )
    pending = tuple(
        PendingJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            submitted_at=q(job.submitted_at),
            submit_seq=job.submit_seq,
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
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
        return f"job {job_pk(job_id)} ({fact.name})" if fact else f"job {job_pk(job_id)}"

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


@dataclass
class _Computed:
    """A queue's estimates as of `view.now`, kept while the queue's state is unchanged."""

    fingerprint: tuple
    view: QueueView
    explainer: Explainer
    corrections: dict[str, Correction]
    low: Forecast
    high: Forecast
    ranges: dict[str, Range]
    _result: QueueEstimates | None = None

    @property
    def result(self) -> QueueEstimates:
        """Every waiting job's entry, built on first use (the what-if needs none)."""
        if self._result is None:
            self._result = _result_of(self)
        return self._result


_CACHE: dict[int, _Computed] = {}
_CACHE_LOCK = threading.Lock()


def _fingerprint(queue: JobQueue) -> tuple:
    """Changes whenever anything an estimate reads changes: a job event (submissions,
    starts, preemptions, ends, priority changes all write one), the live jobs' figures,
    the policy (shares, limits, capacity, queue-wide rules)."""
    last_event = (
        JobEvent.objects.filter(job__queue_id=queue.pk)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    live = Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES).aggregate(
        n=Count("pk"),
        last=Max("pk"),
        work=Sum("expected_duration"),
        priority=Sum("priority"),
        size=Sum("instances"),
        saved=Sum("checkpointed"),
    )
    shares = tuple(
        queue.shares.order_by("position", "id").values_list(
            "pk", "name", "strategy", "borrow_limit", "in_share_preemption", "state"
        )
    )
    limits = tuple(
        CapacityLimit.objects.filter(share__queue=queue)
        .order_by("pk")
        .values_list("share_id", "instance_type_id", "max_instances")
    )
    capacity = tuple(
        QueueCapacity.objects.filter(queue=queue)
        .order_by("pk")
        .values_list("instance_type_id", "instances")
    )
    rules = JobQueue.objects.filter(pk=queue.pk).values_list(
        "executor", "runnable_time_limit", "default_preemption_retries"
    )
    return (last_event, tuple(sorted(live.items())), shares, limits, capacity, tuple(rules))


def _computed(queue: JobQueue, now: dt.datetime | None) -> _Computed:
    """The queue's estimates, computed again only when its state changed or the last
    computation is older than `ESTIMATE_CACHE_SECONDS` of real time (or is from later
    than `now`): a forecast is a forward simulation of every waiting job."""
    now = now or timezone.now()
    fingerprint = _fingerprint(queue)
    keep = getattr(settings, "ESTIMATE_CACHE_SECONDS", 30)
    with _CACHE_LOCK:
        cached = _CACHE.get(queue.pk)
    if (
        cached is not None
        and cached.fingerprint == fingerprint
        and cached.view.now <= now <= cached.view.now + dt.timedelta(seconds=keep)
    ):
        return cached
    view = queue_view(queue, now=now)
    explainer = Explainer(view.snapshot, view.now_q)
    corrections = _corrections(view)
    ranges, low, high = estimate_range(
        view.snapshot, view.now_q, view.work, corrections, record=True
    )
    computed = _Computed(fingerprint, view, explainer, corrections, low, high, ranges)
    with _CACHE_LOCK:
        _CACHE[queue.pk] = computed
    return computed


def _result_of(computed: _Computed) -> QueueEstimates:
    view, ranges, corrections = computed.view, computed.ranges, computed.corrections
    explanations = computed.explainer.explanations
    low = computed.low
    order = dispatch_order(explanations, low.starts, view.share_order)
    # Pending jobs a pass at `now` would start (the live pass has not run yet) come
    # first: the engine does not explain them as waiting.
    entries = [
        _starting_entry(view, job, ranges[job.id], corrections[job.id])
        for job in view.snapshot.pending
        if job.id not in explanations and job.id in ranges
    ]
    entries += [
        _entry(view, explanations[job_id], 0, ranges[job_id], low.ends, corrections[job_id])
        for job_id in order
    ]
    entries = [replace(entry, order=index) for index, entry in enumerate(entries, 1)]
    return QueueEstimates(queue=view.queue, clock=view.clock, now=view.now, entries=entries)


def forget(queue: JobQueue) -> None:
    """Drop what is kept about the queue (the next estimate computes afresh)."""
    with _CACHE_LOCK:
        _CACHE.pop(queue.pk, None)


def _starting_entry(view: QueueView, job: PendingJob, r: Range, correction) -> PendingEntry:
    return PendingEntry(
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
        estimate=_estimate(view, r, correction.basis),
        needs_decision=False,
    )


def queue_estimates(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueEstimates:
    """Every pending job of the queue in dispatch order, with position, blocker, estimate."""
    return _computed(queue, now).result


def job_estimate(job: Job, *, now: dt.datetime | None = None) -> PendingEntry | None:
    """One RUNNABLE job's entry (None for a job that is not waiting)."""
    if job.state != Job.State.RUNNABLE:
        return None
    return queue_estimates(job.queue, now=now).by_job().get(job.pk)


def job_positions(jobs) -> dict[int, PendingEntry]:
    """Entries of the RUNNABLE jobs among `jobs` (a page of a list), by job id."""
    found: dict[int, PendingEntry] = {}
    queues = {job.queue_id: job.queue for job in jobs if job.state == Job.State.RUNNABLE}
    for queue in queues.values():
        found.update(queue_estimates(queue).by_job())
    return {job.pk: found[job.pk] for job in jobs if job.pk in found}


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
    JobError (field keys as for a submission) when the submission would be refused.

    The queue's forecast without the job (kept while the queue is unchanged) says when
    the jobs ahead of it in its share start; from then on, the forecast's usage after
    each instant says when it fits (`explain.extra_start`)."""
    resolved = job_preview(data=data)
    share = data.share
    if not share.enabled:
        raise JobError({"share": [f"share {share.name} is disabled: the job would fail at once"]})
    queue = share.queue
    computed = _computed(queue, now)
    view = computed.view
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
    definition_id = data.revision.definition_id if data.revision is not None else None
    correction = view.history.correction(definition_id, share.pk)
    starts = []
    for run in (computed.low, computed.high):
        ready = ready_at(view.snapshot, run.starts, new, view.now_q)
        starts.append(
            (None, None) if ready is None else extra_start(view.snapshot, run, new, ready)
        )
    (p50, borrowing), (p90, _) = starts
    if p50 is None or p90 is None:
        r = Range(p50 if p90 is None else p90, None, borrowing)
    else:
        r = Range(min(p50, p90), max(p50, p90), borrowing)
    e = computed.explainer.extra(new)
    facts = dict(view.facts)
    facts[job_id] = JobFacts(job_pk(job_id), data.name or "your job", share.pk, definition_id)
    named = replace(view, facts=facts)
    code = e.code
    if r.p50 is not None and r.p50 <= view.now_q and not is_misconfigured(code):
        code = STARTS_NOW
        blocker = "it would start at the next scheduling pass"
    else:
        blocker = _entry(named, e, 0, r, computed.low.ends, correction).blocker
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
        estimate=_estimate(view, r, correction.basis),
        position=e.position,
        queue_length=e.queue_length,
        borrow_position=e.borrow_position,
        blocker=blocker,
        within_limit=None if borrowing is None else not borrowing,
        reclaimable_by=reclaimers,
        warnings=warnings,
        too_big=too_big,
    )


def too_big_warning(*, data: JobData) -> str | None:
    """The warning for a job bigger than its whole queue (the engine's
    SERVICE_ENVIRONMENT_MAX_RESOURCE): it is accepted, as AWS Batch does, but can never
    start as it is, so it goes straight to the jobs that need a decision. None when
    the job fits; raises JobError as a submission would."""
    resolved = job_preview(data=data)
    queue = data.share.queue
    shares = policy_shares(queue)
    policy = Policy(queue_spec(queue), [share_spec(share) for share in shares])
    index = next(i for i, share in enumerate(shares) if share.pk == data.share.pk)
    itype = resolved.instance_type.name
    if (
        policy.misconfiguration(index, itype, resolved.instances)
        != SERVICE_ENVIRONMENT_MAX_RESOURCE
    ):
        return None
    return (
        f"It needs {resolved.instances} {itype} but queue {queue.name} has only "
        f"{policy.capacity.get(itype, 0)}: it would be accepted but can never start as it "
        "is, and would go straight to the jobs that need a decision. Lower its instances, "
        "or submit it anyway."
    )
