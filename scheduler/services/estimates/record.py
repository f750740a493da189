"""The queue's record of its start estimates (`EstimateRecord`): each waiting job's first
estimate is kept with the range it stated, and its actual start once it starts. The
record calibrates the next estimates (`calibration`) and is the evidence of how well
they hold: the share of actual starts before, inside and after their ranges
(`queue_coverage`, on the queue's page).

Kept by the forecast itself (`forecast.compute_forecast`): each forecast first closes
the records whose jobs started (or ended without starting) since, reads the record,
and then records the jobs it estimates for the first time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from fleet.models import Job, JobQueue
from scheduler.models import EstimateRecord
from scheduler.services.estimates.calibration import (
    RANGE_LABEL,
    RECORD_ROWS,
    Calibrations,
    Coverage,
    Outcome,
    calibrations,
    coverage_of,
)
from scheduler.services.estimates.clock import Clock

# The record read for a calibration: its last outcomes and open estimates of this long.
RECORD_DAYS = 30
COVERAGE_DAYS = 30


def close_started(queue: JobQueue, clock: Clock) -> int:
    """Give the queue's open records the start of their jobs (in the queue's clock), and
    close those whose jobs ended without starting. The number of records changed."""
    rows = list(
        EstimateRecord.objects.filter(queue=queue, started_at=None, closed=False)
        .filter(Q(job__first_started_at__isnull=False) | ~Q(job__state__in=Job.LIVE_STATES))
        .values_list("pk", "made_at", "job__first_started_at")
    )
    changed = []
    for pk, made_at, started in rows:
        if started is None:
            changed.append(EstimateRecord(pk=pk, closed=True))
            continue
        wait = max(0, round((started - made_at).total_seconds() * clock.speed))
        changed.append(EstimateRecord(pk=pk, started_at=started, actual_wait=wait))
    if changed:
        EstimateRecord.objects.bulk_update(
            changed, ["started_at", "actual_wait", "closed"], batch_size=1000
        )
    return len(changed)


def queue_calibrations(queue: JobQueue, clock: Clock, now: dt.datetime) -> Calibrations:
    """The calibration of each share's and the queue's ranges from the record: outcomes
    in the order they became known (an open estimate at `now`, as waited so far)."""
    since = now - dt.timedelta(days=RECORD_DAYS)
    # The outcomes known, and the estimates still open that already count (waited past
    # their forecast: `calibration.counted`); the others say nothing yet.
    rows = list(
        EstimateRecord.objects.filter(queue=queue, closed=False, made_at__gte=since)
        .filter(made_at__lte=now)
        .filter(Q(started_at__lte=now) | Q(started_at=None, overdue_at__lte=now))
        .order_by("-made_at", "-pk")
        .values_list(
            "share",
            "made_at",
            "forecast_wait",
            "forecast_high_wait",
            "actual_wait",
        )[:RECORD_ROWS]
    )
    known = []
    for share, made_at, forecast, high, actual in rows:
        if actual is not None:
            known_at = made_at + dt.timedelta(seconds=actual / clock.speed)
            if known_at <= now:
                known.append((known_at, Outcome(share, forecast, actual)))
                continue
        waited = max(0, round((now - made_at).total_seconds() * clock.speed))
        known.append((now, Outcome(share, forecast, waited, open=True, forecast_high=high)))
    known.sort(key=lambda pair: pair[0])
    return calibrations(outcome for _, outcome in known)


def record_estimates(
    queue: JobQueue, clock: Clock, now: dt.datetime, estimates: list[tuple]
) -> int:
    """Record the first estimate of each job of `estimates` that has none: (job pk, share,
    forecast wait, forecast p90-run wait, (low, point, high) waits, calibration)."""
    speed = clock.speed
    if not estimates:
        return 0
    recorded = set(
        EstimateRecord.objects.filter(queue=queue, started_at=None, closed=False).values_list(
            "job_id", flat=True
        )
    )

    def overdue(forecast, high):
        if forecast is None:
            return None
        wait = max(forecast, forecast if high is None else high)
        return now + dt.timedelta(seconds=wait / speed)

    new = [
        EstimateRecord(
            queue=queue,
            job_id=job_id,
            share=share,
            made_at=now,
            forecast_wait=forecast,
            forecast_high_wait=high,
            quantiles=RANGE_LABEL,
            low_wait=waits[0],
            point_wait=waits[1],
            high_wait=waits[2],
            basis=calibration.basis,
            samples=calibration.samples,
            overdue_at=overdue(forecast, high),
        )
        for job_id, share, forecast, high, waits, calibration in estimates
        if job_id not in recorded
    ]
    EstimateRecord.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
    return len(new)


@dataclass(frozen=True)
class QueueCoverage:
    """Where the actual starts of the queue's recorded estimates fell (those that
    started in the last `days`), against the ranges they stated."""

    quantiles: str
    days: int
    coverage: Coverage
    nominal: tuple[int, int, int] = (10, 80, 10)  # before, inside, after (percent)

    def percent(self, part: str) -> float | None:
        found = self.coverage.share(part)
        return None if found is None else 100 * found

    @property
    def percents(self) -> dict[str, float | None]:
        return {part: self.percent(part) for part in ("before", "inside", "after")}


def queue_coverage(
    queue: JobQueue, *, now: dt.datetime | None = None, days: int = COVERAGE_DAYS
) -> QueueCoverage:
    now = now or timezone.now()
    rows = EstimateRecord.objects.filter(
        queue=queue,
        quantiles=RANGE_LABEL,
        started_at__gte=now - dt.timedelta(days=days),
        started_at__lte=now,
    ).values_list("actual_wait", "low_wait", "high_wait")
    return QueueCoverage(RANGE_LABEL, days, coverage_of(rows))
