"""What approving an exception request would do, in plain sentences, computed by the
engine: `assess_policy_change` for capacity (through governance.policy.impact), and
`assess_job_change` for jobs (the decisions a pass now would make, or no longer make,
with the changed jobs).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from django.utils import timezone

from core.formatting import relative
from fleet.models import Job, JobQueue, QuotaShare
from fleet.selectors import share_document
from governance.models import ExceptionRequest
from governance.policy.impact import ImpactLine, share_change_impact
from governance.policy.services import share_data_from_document

Kind = ExceptionRequest.Kind


# A window that starts later than this is previewed at its start, on the jobs expected
# then; one that starts sooner (or has started) on the jobs live now.
LATER_WINDOW = timedelta(minutes=5)


def exception_impact(*, request: ExceptionRequest, now: datetime | None = None) -> list[ImpactLine]:
    """What approving `request` would do to the queue's jobs, in plain sentences: now, or
    for a window that starts later, at its start on the jobs expected then (the first
    line says when, and on which jobs)."""
    snapshot, now_s, when = _preview_moment(request, now=now)
    if request.kind == Kind.TEMPORARY_CAPACITY:
        lines = _capacity_impact(request, snapshot=(snapshot, now_s))
    else:
        moment = "now" if when is None else "at the window's start"
        lines = _jobs_impact(request, snapshot=snapshot, now_s=now_s, moment=moment)
    return [when, *lines] if when is not None else lines


def _preview_moment(request: ExceptionRequest, *, now: datetime | None):
    """The snapshot the preview is computed on, its instant, and the line saying so."""
    from fleet.bridge import queue_snapshot

    moment = now or timezone.now()
    if request.window_start <= moment + LATER_WINDOW:
        snapshot, now_s = queue_snapshot(request.queue, now=now)
        return snapshot, now_s, None
    return expected_snapshot(request.queue, at=request.window_start, now=now)


def expected_snapshot(queue: JobQueue, *, at: datetime, now: datetime | None = None):
    """The queue's jobs as expected at `at` (later than now), the instant in epoch
    seconds, and the line that says what the preview assumes. Running jobs end at their
    start plus their expected duration (the submitter's estimate); a waiting job starts
    at the median start of the scheduler's estimates (the queue's stored forecast) and
    ends the same way; a waiting job without an estimate, or with one after `at`, still
    waits. Jobs submitted after now are not known."""
    from engine.types import RunningJob
    from fleet.bridge import epoch_seconds, queue_snapshot
    from scheduler.services.estimates.reads import queue_estimates

    snapshot, _ = queue_snapshot(queue, now=now)
    at_s = epoch_seconds(at)
    live = [int(job.id) for job in (*snapshot.running, *snapshot.pending)]
    durations = dict(Job.objects.filter(pk__in=live).values_list("pk", "expected_duration"))

    def ended(start: int, job_id: str) -> bool:
        duration = durations.get(int(job_id))
        return duration is not None and start + duration <= at_s

    running = [job for job in snapshot.running if not ended(job.started_at, job.id)]
    gone = len(snapshot.running) - len(running)
    pending, started = [], 0
    estimates = queue_estimates(queue, now=now) if snapshot.pending else None
    seq = max((job.start_seq for job in snapshot.running), default=0) + 1
    for job in snapshot.pending:
        entry = estimates.of_job(int(job.id)) if estimates is not None else None
        start = entry.estimate.start_p50 if entry is not None else None
        if start is None or start > at:
            pending.append(job)
            continue
        start_s = epoch_seconds(start)
        if ended(start_s, job.id):
            gone += 1
            continue
        running.append(
            RunningJob(
                id=job.id,
                share=job.share,
                priority=job.priority,
                instance_type=job.instance_type,
                instances=job.instances,
                started_at=start_s,
                start_seq=seq,
                preemptions=job.preemptions,
                preemption_retries=job.preemption_retries,
                submitted_at=job.submitted_at,
                protected_until=job.protected_until,
            )
        )
        seq += 1
        started += 1
    when = timezone.localtime(at).strftime("%a %d %b %H:%M %Z")
    line = ImpactLine(
        kind="expected",
        text=f"previewed at the window's start, {when} ({relative(at, now)}), on the jobs "
        f"expected then: {len(running)} running and {len(pending)} waiting. Of the jobs live "
        f"now, {gone} should have ended by then (their expected duration) and {started} "
        "waiting should have started (the scheduler's median start estimate); jobs "
        "submitted later are not known yet",
        jobs=(),
    )
    expected = replace(snapshot, running=tuple(running), pending=tuple(pending))
    return expected, at_s, line


def _capacity_impact(request: ExceptionRequest, *, snapshot=None) -> list[ImpactLine]:
    share = QuotaShare.objects.select_related("team", "queue").get(pk=request.share_id)
    doc = share_document(share)
    limits = dict(doc["capacity_limits"])
    itype = request.instance_type.name
    limits[itype] = limits.get(itype, 0) + request.extra_instances
    data = share_data_from_document({**doc, "capacity_limits": limits}, team=share.team)
    lines = share_change_impact(queue=share.queue, data=data, share=share, snapshot=snapshot)
    header = ImpactLine(
        kind="exception",
        text=f"share {share.name}'s {itype} limit would go from "
        f"{limits[itype] - request.extra_instances} to {limits[itype]} until the window ends",
        jobs=(),
    )
    return [header, *lines]


def _jobs_impact(
    request: ExceptionRequest, *, snapshot, now_s: int, moment: str = "now"
) -> list[ImpactLine]:
    from engine import Preempt, Start, assess_job_change
    from fleet.bridge import epoch_seconds

    # Engine ids are the jobs' primary keys as text (zero-padded): compare as numbers.
    pks = set(request.jobs.values_list("pk", flat=True))
    ids = {job.id for job in (*snapshot.running, *snapshot.pending) if int(job.id) in pks}
    if request.kind == Kind.PRIORITY_RAISE:
        priority = request.urgency.priority

        def change(job):
            return replace(job, priority=priority)
    else:
        until = epoch_seconds(request.window_end)

        def change(job):
            return replace(job, protected_until=max(until, job.protected_until or 0))

    made, dropped = assess_job_change(snapshot, change, ids, now_s)
    share_of = {job.id: job.share for job in (*snapshot.running, *snapshot.pending)}
    names = dict(Job.objects.filter(pk__in=[int(j) for j in share_of]).values_list("pk", "name"))

    def name(job_id: str) -> str:
        return names.get(int(job_id), job_id)

    def describe(decision, *, would: bool) -> tuple[str, str]:
        verb = "would" if would else "would no longer"
        job = f"job {name(decision.job)} (share {share_of.get(decision.job)})"
        if isinstance(decision, Start):
            where = " on borrowed capacity" if decision.borrowed else ""
            return (
                "would_start" if would else "no_longer_start",
                f"{job} {verb} start {moment}{where}",
            )
        if isinstance(decision, Preempt):
            by = f" for {name(decision.by)}" if decision.by else ""
            cause = {"reclaim": "by reclaim", "priority": "by priority"}.get(
                decision.cause, "for capacity"
            )
            kind = "would_preempt" if would else "no_longer_preempt"
            return kind, f"{job} {verb} be preempted {moment} {cause}{by}"
        return ("would_fail" if would else "no_longer_fail"), f"{job} {verb} fail {moment}"

    lines = []
    for decision in made:
        kind, text = describe(decision, would=True)
        lines.append(ImpactLine(kind=kind, text=text, jobs=(name(decision.job),)))
    for decision in dropped:
        kind, text = describe(decision, would=False)
        lines.append(ImpactLine(kind=kind, text=text, jobs=(name(decision.job),)))
    live = sorted(ids & set(share_of))
    if request.kind == Kind.PREEMPTION_PROTECTION and live:
        lines.insert(
            0,
            ImpactLine(
                kind="protected",
                text=f"{len(live)} running job{'s' if len(live) != 1 else ''} could not be "
                "chosen for reclaim or in-share preemption until the window ends",
                jobs=tuple(name(j) for j in live),
            ),
        )
    if not lines:
        lines.append(
            ImpactLine(
                kind="no_effect",
                text=f"a scheduling pass {moment} would decide nothing differently; the exception "
                "matters when contention arises during its window",
                jobs=(),
            )
        )
    return lines
