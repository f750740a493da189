"""What pages, the pending list and the API read of a queue's stored forecast: each
waiting job's entry (position, blocker, start estimate), built as it is read; one job's;
a page's; and "if you submit this now".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from engine import PendingJob
from engine.eta import Range
from engine.explain import STARTS_NOW, describe, extra_start, is_misconfigured
from engine.quota import Policy
from engine.strategies import strategy_capabilities
from engine.types import SERVICE_ENVIRONMENT_MAX_RESOURCE
from fleet.bridge import engine_id, policy_shares, queue_spec, share_spec
from fleet.models import Job, JobQueue
from scheduler.services.estimates.calibration import RANGE_LABEL, Calibration
from scheduler.services.estimates.clock import Clock
from scheduler.services.estimates.forecast import Stored, WhatIf, calibrated
from scheduler.services.estimates.store import stored_forecast
from scheduler.services.estimates.wording import instant_printer, namer, print_instants
from scheduler.services.jobs import JobData, JobError, job_preview

# -- what pages and the API show -------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A start range at stated quantiles (`quantiles`, "p10–p90": the start falls before
    `start_p10` one time in ten, after `start_p90` one time in ten) and the median
    `start_p50`: real instants, and waits in the queue's clock (seconds) from the
    instant the forecast was made (`estimated_at` of what carries it). The range is
    the forecast's calibrated by the queue's record (`calibration`): `range_basis`
    says whose record ("share", "queue", or "default" before there is one) and
    `range_samples` of how many outcomes."""

    start_p10: dt.datetime | None
    start_p50: dt.datetime | None
    start_p90: dt.datetime | None
    wait_p10: int | None
    wait_p50: int | None
    wait_p90: int | None
    basis: str  # where the duration correction came from
    borrowing: bool | None
    quantiles: str = RANGE_LABEL
    range_basis: str = "default"
    range_samples: int = 0
    # The forecast's own starts (its p50 and p90 runs), before the calibration.
    forecast_p50: dt.datetime | None = None
    forecast_p90: dt.datetime | None = None

    @property
    def never(self) -> bool:
        return self.start_p50 is None

    @property
    def range_source(self) -> str:
        """Where the range's width comes from, in words."""
        if self.range_basis == "default":
            return (
                "the forecast widened by default factors measured on Philly replays: the "
                "queue has too few past estimates with known starts to calibrate its own"
            )
        whose = "its share's" if self.range_basis == "share" else "the queue's"
        return (
            f"the forecast calibrated by {whose} record of {self.range_samples} past "
            "estimates against their actual starts"
        )


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
    estimated_at: dt.datetime | None = None  # the forecast's instant
    current: bool = True  # False: the queue changed since (or it is old); a new one is due


class Entries(Sequence):
    """A forecast's entries in dispatch order, each built when read (a page of them)."""

    def __init__(self, stored: Stored, now: dt.datetime, current: bool) -> None:
        self.stored, self.now, self.current = stored, now, current

    def __len__(self) -> int:
        return len(self.stored.rows)

    def __getitem__(self, index):
        rows = self.stored.rows
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(rows)))]
        if index < 0:
            index += len(rows)
        if not 0 <= index < len(rows):
            raise IndexError(index)
        return self._build(index)

    def of_job(self, job_id: int) -> PendingEntry | None:
        index = self.stored.index.get(job_id)
        return None if index is None else self._build(index)

    def _build(self, index: int) -> PendingEntry:
        stored = self.stored
        (job_id, name, share, position, length, borrow, borrow_length, reason, words, p10, p50,
         p90, basis, borrowed, decide, calibration, forecast, high) = stored.rows[index]  # fmt: skip  # noqa: E501
        now_q = stored.now_q
        own = tuple(None if wait is None else now_q + wait for wait in (forecast, high))
        return PendingEntry(
            job_id=job_id,
            name=name,
            share=share,
            order=index + 1,
            position=position,
            queue_length=length,
            borrow_position=borrow,
            borrow_queue_length=borrow_length,
            reason=reason,
            blocker=print_instants(words, stored.clock, self.now),
            estimate=_estimate(
                stored.clock, now_q, (p10, p50, p90), basis, borrowed, calibration, own
            ),
            needs_decision=decide,
            estimated_at=stored.now,
            current=self.current,
        )


@dataclass(frozen=True)
class QueueEstimates:
    queue: JobQueue
    clock: Clock
    now: dt.datetime  # the forecast's instant
    entries: Entries
    current: bool = True

    @property
    def estimated_at(self) -> dt.datetime:
        return self.now

    def by_job(self) -> dict[int, PendingEntry]:
        return {entry.job_id: entry for entry in self.entries}

    def of_job(self, job_id: int) -> PendingEntry | None:
        return self.entries.of_job(job_id)


def _estimate(
    clock: Clock,
    now_q: int,
    starts: tuple,
    basis: str,
    borrowed,
    calibration: Calibration,
    forecast: tuple,
) -> Estimate:
    p10, p50, p90 = starts

    def wait(value):
        return None if value is None else max(0, value - now_q)

    return Estimate(
        start_p10=clock.to_real(p10),
        start_p50=clock.to_real(p50),
        start_p90=clock.to_real(p90),
        wait_p10=wait(p10),
        wait_p50=wait(p50),
        wait_p90=wait(p90),
        basis=basis,
        borrowing=borrowed,
        range_basis=calibration.basis,
        range_samples=calibration.samples,
        forecast_p50=clock.to_real(forecast[0]),
        forecast_p90=clock.to_real(forecast[1]),
    )


# -- reading it -------------------------------------------------------------------------------


def queue_estimates(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueEstimates:
    """Every pending job of the queue in dispatch order, with position, blocker, estimate
    (built as they are read), from the stored forecast (see `store.stored_forecast`)."""
    stored, current = stored_forecast(queue, now)
    return QueueEstimates(
        queue=queue,
        clock=stored.clock,
        now=stored.now,
        entries=Entries(stored, now or timezone.now(), current),
        current=current,
    )


def job_estimate(job: Job, *, now: dt.datetime | None = None) -> PendingEntry | None:
    """One RUNNABLE job's entry (None for a job that is not waiting, or that the stored
    forecast does not know yet)."""
    if job.state != Job.State.RUNNABLE:
        return None
    return queue_estimates(job.queue, now=now).of_job(job.pk)


def job_positions(jobs) -> dict[int, PendingEntry]:
    """Entries of the RUNNABLE jobs among `jobs` (a page of a list), by job id."""
    found: dict[int, PendingEntry] = {}
    queues = {job.queue_id: job.queue for job in jobs if job.state == Job.State.RUNNABLE}
    for queue in queues.values():
        listed = queue_estimates(queue)
        for job in jobs:
            if job.queue_id == queue.pk and job.state == Job.State.RUNNABLE:
                entry = listed.of_job(job.pk)
                if entry is not None:
                    found[job.pk] = entry
    return found


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
    estimated_at: dt.datetime | None = None  # the forecast's instant
    current: bool = True  # False: the queue changed since; a new forecast is due


def _ready(whatif: WhatIf, share: str, priority: int, now_q: int) -> tuple:
    """When the last job ahead of a new job of `share` at `priority` starts, per run."""
    found = (now_q, now_q)
    for level, latest in whatif.through.get(share, ()):
        if level < priority:
            break
        found = latest
    return found


def submission_estimate(*, data: JobData, now: dt.datetime | None = None) -> SubmissionEstimate:
    """What would happen to this job if it were submitted now. Stores nothing; raises
    JobError (field keys as for a submission) when the submission would be refused.

    Read from the queue's stored forecast, as of its instant: the jobs ahead of it in
    its share start when that forecast says; from then on, the recorded usage after
    each instant says when it fits (`explain.extra_start`), and the board's standing
    where it would stand and what would hold it."""
    resolved = job_preview(data=data)
    share = data.share
    if not share.enabled:
        raise JobError({"share": [f"share {share.name} is disabled: the job would fail at once"]})
    queue = share.queue
    stored, current = stored_forecast(queue, now)
    whatif = stored.whatif
    now_q = stored.now_q
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
        submitted_at=now_q,
    )
    definition_id = data.revision.definition_id if data.revision is not None else None
    correction = whatif.history.correction(definition_id, share.pk)
    starts = []
    for run, ready in zip(
        (whatif.low, whatif.high), _ready(whatif, share.name, priority, now_q), strict=True
    ):
        starts.append((None, None) if ready is None else extra_start(whatif.shape, run, new, ready))
    (p50, borrowing), (p90, _) = starts
    if p50 is None or p90 is None:
        r = Range(p50 if p90 is None else p90, None, borrowing)
    else:
        r = Range(min(p50, p90), max(p50, p90), borrowing)
    calibration = whatif.calibrations.of(share.name)
    p10_c, p50_c, p90_c, _ = calibrated(calibration, now_q, r.p50, r.p90)
    e = whatif.standing.if_submitted(new)
    code = e.code
    if r.p50 is not None and r.p50 <= now_q and not is_misconfigured(code):
        code = STARTS_NOW
        blocker = "it would start at the next scheduling pass"
    else:
        names = dict(whatif.names)
        names[job_id] = data.name or "your job"
        blocker = describe(
            e,
            name=namer(names),
            when=instant_printer(stored.clock, now or timezone.now()),
            ends=whatif.ends,
        )
    warnings = []
    too_big = code == SERVICE_ENVIRONMENT_MAX_RESOURCE
    if too_big:
        capacity = whatif.shape.queue.capacity.get(itype, 0)
        warnings.append(
            f"it needs {resolved.instances} {itype} but queue {queue.name} has {capacity}: it "
            "would be accepted but can never start as it is, and goes straight to the "
            "jobs that need a decision; lower its instances"
        )
    elif is_misconfigured(code):
        warnings.append(f"it can never start as configured: {blocker}")
    reclaimers = []
    if borrowing:
        for spec in whatif.shape.shares:
            if (
                spec.name != share.name
                and spec.enabled
                and strategy_capabilities(spec.strategy).lends
                and spec.capacity_limits.get(itype, 0) > 0
            ):
                reclaimers.append(spec.name)
    return SubmissionEstimate(
        queue=queue,
        clock=stored.clock,
        share=share.name,
        instance_type=itype,
        instances=resolved.instances,
        priority=priority,
        estimate=_estimate(
            stored.clock,
            now_q,
            (p10_c, p50_c, p90_c),
            correction.basis,
            r.borrowed,
            calibration,
            (r.p50, r.p90),
        ),
        position=e.position,
        queue_length=e.queue_length,
        borrow_position=e.borrow_position,
        blocker=blocker,
        within_limit=None if borrowing is None else not borrowing,
        reclaimable_by=reclaimers,
        warnings=warnings,
        too_big=too_big,
        estimated_at=stored.now,
        current=current,
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
