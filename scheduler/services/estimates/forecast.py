"""A queue's forecast: the live state as the engine reads it (the snapshot in the queue's
clock, the live jobs' work figures, the history that corrects declared durations:
`HISTORY_DAYS` of single-run jobs), what is computed from it (explanations, two forward
runs, what "if you submit this now" reads) and kept (`Stored`), and the fingerprint
that says when it no longer holds.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace

from django.db.models import Count, Max, Sum
from django.utils import timezone

from engine import PendingJob, Snapshot
from engine.eta import Correction, correction_of, estimate_range, pick_correction
from engine.explain import (
    STARTS_NOW,
    Explainer,
    Forecast,
    Standing,
    Work,
    describe,
    dispatch_order,
    is_misconfigured,
    ready_at,
)
from fleet.bridge import (
    engine_id,
    epoch_column,
    epoch_seconds,
    fetch_rows,
    job_pk,
    queue_snapshot,
    seconds_of,
)
from fleet.models import CapacityLimit, Job, JobEvent, JobQueue, QueueCapacity
from scheduler.executors import executor_for
from scheduler.services.estimates import record
from scheduler.services.estimates.calibration import Calibration, Calibrations
from scheduler.services.estimates.clock import Clock, in_clock, queue_clock
from scheduler.services.estimates.wording import mark

HISTORY_DAYS = 30
HISTORY_ROWS = 2000


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
    snapshot = in_clock(snapshot, clock)
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
    process = executor_for(queue).capabilities.reports_progress
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


# -- the stored forecast ----------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIf:
    """What "if you submit this now" reads: the board's standing at the forecast's
    instant, both recorded runs' usage timelines, when each share's queue is through
    down to each priority, and the names and ends its sentence may mention."""

    shape: Snapshot  # the queue and shares, no jobs
    standing: Standing
    low: Forecast  # times and usages only
    high: Forecast
    # share -> [(priority, (low, high) start of the last job at that priority or above)],
    # highest priority first; None: one of them never starts
    through: dict[str, list[tuple[int, tuple[int | None, int | None]]]]
    names: dict[str, str]
    ends: dict[str, int]
    history: History
    calibrations: Calibrations  # the record's, as of the forecast


@dataclass(frozen=True)
class Stored:
    """A queue's forecast as kept in the shared cache (see the package doc)."""

    version: str
    fingerprint: tuple
    now: dt.datetime
    now_q: int
    clock: Clock
    spent: float  # seconds the computation took
    rows: list[tuple]  # Entries._build's fields, in dispatch order
    index: dict[int, int]  # job pk -> row
    whatif: WhatIf


def queue_fingerprint(queue: JobQueue) -> tuple[tuple, int]:
    """Changes whenever anything an estimate reads changes: a job event (submissions,
    starts, preemptions, ends, priority changes all write one), the live jobs' figures,
    the policy (shares, limits, capacity, queue-wide rules). With the live jobs' count."""
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
    fingerprint = (
        last_event,
        tuple(sorted(live.items())),
        shares,
        limits,
        capacity,
        tuple(rules),
    )
    return fingerprint, live["n"] or 0


def compute_forecast(queue: JobQueue, *, now: dt.datetime | None = None, fingerprint=None):
    """Forecast the queue at `now` (a forward simulation of every waiting job, twice)
    and store it; what the background task runs."""
    began = time.perf_counter()
    if fingerprint is None:
        fingerprint, _ = queue_fingerprint(queue)
    view = queue_view(queue, now=now)
    explainer = Explainer(view.snapshot, view.now_q)
    corrections = _corrections(view)
    ranges, low, high = estimate_range(
        view.snapshot, view.now_q, view.work, corrections, record=True
    )
    record.close_started(queue, view.clock)
    calibrations = record.queue_calibrations(queue, view.clock, view.now)
    rows = _rows(view, explainer, corrections, low, ranges, calibrations)
    record.record_estimates(queue, view.clock, view.now, _recorded(view, rows))
    standing = explainer.standing.detached()
    names = {
        job_id: view.facts[job_id].name for job_id in standing.referenced() if job_id in view.facts
    }
    borrowers = standing.borrowers()
    whatif = WhatIf(
        shape=replace(view.snapshot, running=(), pending=()),
        standing=standing,
        low=Forecast(
            starts={}, borrowed={}, ends={}, preempted={}, times=low.times, usages=low.usages
        ),  # fmt: skip
        high=Forecast(
            starts={}, borrowed={}, ends={}, preempted={}, times=high.times, usages=high.usages
        ),  # fmt: skip
        through=_through(view, low, high),
        names=names,
        ends={job_id: low.ends[job_id] for job_id in borrowers if job_id in low.ends},
        history=view.history,
        calibrations=calibrations,
    )
    stored = Stored(
        version=uuid.uuid4().hex,
        fingerprint=fingerprint,
        now=view.now,
        now_q=view.now_q,
        clock=view.clock,
        spent=time.perf_counter() - began,
        rows=rows,
        index={row[0]: i for i, row in enumerate(rows)},
        whatif=whatif,
    )
    return stored


def _through(view: QueueView, low: Forecast, high: Forecast) -> dict:
    """For each share and each priority among its waiting jobs: when the last of its jobs
    at that priority or above starts in each run (`explain.ready_at`, the engine's rule,
    asked for a job of that priority submitted after them)."""
    by_share: dict[str, list[PendingJob]] = defaultdict(list)
    for job in view.snapshot.pending:
        by_share[job.share].append(job)
    found = {}
    for share, pending in by_share.items():
        part = replace(view.snapshot, pending=tuple(pending))
        levels = []
        for priority in sorted({job.priority for job in pending}, reverse=True):
            probe = PendingJob(
                id="probe",
                share=share,
                priority=priority,
                instance_type=pending[0].instance_type,
                instances=1,
                submitted_at=view.now_q + 1,
            )
            levels.append(
                (
                    priority,
                    (
                        ready_at(part, low.starts, probe, view.now_q),
                        ready_at(part, high.starts, probe, view.now_q),
                    ),
                )
            )
        found[share] = levels
    return found


def calibrated(
    calibration: Calibration, now_q: int, p50: int | None, p90: int | None
) -> tuple[int | None, int | None, int | None, int | None]:
    """A forecast's range (its p50 and p90 runs' starts, in the queue's clock) as the
    record calibrates it: the p10, p50 and p90 starts, and the forecast's own wait."""
    forecast = None if p50 is None else max(0, p50 - now_q)
    if forecast == 0:
        return now_q, now_q, now_q, 0  # it starts at the next pass: nothing to calibrate
    low, point, high = calibration.waits(forecast)
    if low is None:
        return None, None, None, forecast
    return now_q + low, now_q + point, now_q + high, forecast


def _recorded(view: QueueView, rows: list) -> list[tuple]:
    """What the record keeps of each row (see `record.record_estimates`)."""
    now_q = view.now_q
    found = []
    for row in rows:
        low, point, high, calibration, forecast, forecast_high = row[9:12] + row[15:18]
        if forecast == 0:
            continue  # it starts at the next pass: the record keeps the jobs that wait
        waits = tuple(None if t is None else t - now_q for t in (low, point, high))
        found.append((row[0], row[2], forecast, forecast_high, waits, calibration))
    return found


# A row: (job pk, name, share, position, queue length, borrow position, borrow queue
# length, reason code, blocker words, p10, p50, p90 starts (queue clock; None: never),
# duration correction's basis, borrowing, misconfigured, the calibration, the forecast's
# own p50-run and p90-run waits).
ROW_FIELDS = 18


def _rows(
    view: QueueView,
    explainer: Explainer,
    corrections,
    low: Forecast,
    ranges,
    calibrations: Calibrations,
) -> list:
    explanations = explainer.explanations
    now_q = view.now_q

    def range_of(job_id: str, share: str) -> tuple:
        r = ranges[job_id]
        calibration = calibrations.of(share)
        p10, p50, p90, forecast = calibrated(calibration, now_q, r.p50, r.p90)
        high = None if r.p90 is None else max(0, r.p90 - now_q)
        return (p10, p50, p90), calibration, forecast, high

    order = dispatch_order(explanations, low.starts, view.share_order)
    facts = view.facts

    def name(job_id: str) -> str:
        fact = facts.get(job_id)
        return f"job {job_pk(job_id)} ({fact.name})" if fact else f"job {job_pk(job_id)}"

    rows = []
    # Pending jobs a pass at `now` would start (the live pass has not run yet) come
    # first: the engine does not explain them as waiting.
    for job in view.snapshot.pending:
        if job.id in explanations or job.id not in ranges:
            continue
        r = ranges[job.id]
        starts, calibration, forecast, high = range_of(job.id, job.share)
        rows.append(
            (
                job_pk(job.id),
                facts[job.id].name,
                job.share,
                None,
                0,
                None,
                0,
                STARTS_NOW,
                "it starts at the next scheduling pass",
                *starts,
                corrections[job.id].basis,
                r.borrowed,
                False,
                calibration,
                forecast,
                high,
            )  # fmt: skip
        )
    ends = low.ends
    for job_id in order:
        e = explanations[job_id]
        r = ranges[job_id]
        starts, calibration, forecast, high = range_of(job_id, e.share)
        words = describe(e, name=name, when=mark, ends=ends)
        fact = facts.get(job_id)
        rows.append(
            (
                job_pk(job_id),
                fact.name if fact else "",
                e.share,
                e.position,
                e.queue_length,
                e.borrow_position,
                e.borrow_queue_length,
                e.code,
                words,
                *starts,
                corrections[job_id].basis,
                r.borrowed,
                is_misconfigured(e.code),
                calibration,
                forecast,
                high,
            )  # fmt: skip
        )
    return rows
