"""Exception requests taking effect and ending: activation at the window's start,
expiry at its end, and the take-back an expiry or a revocation does. Called by the beat
tasks (governance.exceptions.tasks) and by the decisions (governance.exceptions.
services: approve activates a request whose window has begun, revoke takes an active
one's effect back). The effect is applied (and taken back) in the same transaction as
the request's transition:

- temporary capacity goes through governance.policy.services.share_update, as an
  admin edit would, so a PolicyChange (cause `exception`) links to the request; on
  expiry only the exception's own delta is taken back, so an admin's edit made
  meanwhile stays;
- a priority raise sets the named jobs' priority through the scheduler's
  `job_set_priority_by_exception`, so each change (the raise and the take-back) is a
  PRIORITY_CHANGED event naming the request on the job's timeline and in the
  dashboard's count. On expiry or revocation a job gets its old priority back if it
  still has the raised one or one only the exception allowed (someone changed it in
  the window); a priority its share allows on its own, set meanwhile, stays;
- preemption protection changes the named jobs' `protected_until`; on expiry a job
  gets its old value back unless someone changed it meanwhile.

Then the queue's scheduling pass runs (policy_changed on commit).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, DomainError, InvalidInput
from fleet.locks import lock_queue
from fleet.models import Job, JobQueue, QueueCapacity, QuotaShare
from fleet.selectors import share_document
from governance import notifications
from governance.exceptions.transitions import claim, record_event
from governance.models import ExceptionEvent, ExceptionRequest, PolicyChange
from governance.policy.services import share_data_from_document, share_update
from scheduler.services.jobs import job_protect_by_exception, job_set_priority_by_exception
from scheduler.services.priorities import job_priority_refusal

State = ExceptionRequest.State
Kind = ExceptionRequest.Kind
JOB_KINDS = (Kind.PRIORITY_RAISE, Kind.PREEMPTION_PROTECTION)
# A STOPPING job is live: preempted with notice, it goes back to its queue (a raise
# still matters to it, and its take-back too); terminated, it ends FAILED at its stop.
LIVE_JOB_STATES = Job.LIVE_STATES


def lock_request_queue(request: ExceptionRequest) -> None:
    """One writer per queue: the same row lock as policy edits and scheduling passes."""
    lock_queue(request.queue_id)


@transaction.atomic
def exception_request_activate(*, request_id: int, now: datetime | None = None) -> bool:
    """Make an approved request whose window has begun take effect. True if this call did.

    A request found after its window already ended never takes effect: it expires.
    Running twice, or concurrently, changes nothing the second time.
    """
    now = now or timezone.now()
    request = _load(request_id)
    if request is None or request.state != State.APPROVED or request.window_start > now:
        return False
    if request.window_end <= now:
        if not claim(request, "lapse", ended_at=now):
            return False
        record_event(
            request,
            ExceptionEvent.Type.EXPIRED,
            at=now,
            note="the window ended before the exception could take effect",
        )
        notifications.notify_ended(
            request=request, how="expired", note="It ended before it could take effect."
        )
        return True
    lock_request_queue(request)
    savepoint = transaction.savepoint()
    if not claim(request, "activate", activated_at=now):
        transaction.savepoint_rollback(savepoint)
        return False
    try:
        applied = _apply(request, now=now)
    except (InvalidInput, Conflict) as problem:
        transaction.savepoint_rollback(savepoint)
        request.state = State.APPROVED
        _apply_failed(request, problem, now)
        return False
    transaction.savepoint_commit(savepoint)
    ExceptionRequest.objects.filter(pk=request.pk).update(applied=applied)
    request.applied = applied
    record_event(request, ExceptionEvent.Type.ACTIVATED, at=now, note=_applied_text(request))
    return True


@transaction.atomic
def exception_request_expire(*, request_id: int, now: datetime | None = None) -> bool:
    """End an active request whose window is over, taking back its own effect only.
    True if this call did; running twice, or late, changes nothing more."""
    now = now or timezone.now()
    request = _load(request_id)
    if request is None or request.state != State.ACTIVE or request.window_end > now:
        return False
    lock_request_queue(request)
    if not claim(request, "expire", ended_at=now):
        return False
    take_back(
        request, actor=None, reason=f"Exception #{request.pk} expired", step="expired", now=now
    )
    record_event(request, ExceptionEvent.Type.EXPIRED, at=now)
    notifications.notify_ended(request=request, how="expired")
    return True


def _load(request_id: int) -> ExceptionRequest | None:
    return (
        ExceptionRequest.objects.select_related(
            "team", "queue", "share", "instance_type", "urgency", "requested_by", "decided_by"
        )
        .filter(pk=request_id)
        .first()
    )


def _apply_failed(request: ExceptionRequest, problem: DomainError, now: datetime) -> None:
    message = problem.sentence()
    last = request.events.order_by("-at", "-id").first()
    if last is not None and last.type == ExceptionEvent.Type.APPLY_FAILED and last.note == message:
        return  # said once; the sweep tries again until the window ends
    record_event(request, ExceptionEvent.Type.APPLY_FAILED, at=now, note=message)
    notifications.notify_apply_failed(request=request, problem=message)


def _apply(request: ExceptionRequest, *, now: datetime) -> dict:
    if request.kind == Kind.TEMPORARY_CAPACITY:
        return _apply_capacity(request)
    return _apply_jobs(request, now=now)


def _capacity_reason(request: ExceptionRequest, verb: str) -> str:
    return (
        f"Exception #{request.pk} ({request.urgency}) {verb} {request.extra_instances} "
        f"{request.instance_type} for share {request.share.name}"
    )


def _apply_capacity(request: ExceptionRequest) -> dict:
    share = QuotaShare.objects.select_related("team", "queue").get(pk=request.share_id)
    itype = request.instance_type.name
    doc = share_document(share)
    limits = dict(doc["capacity_limits"])
    before = limits.get(itype, 0)
    after = before + request.extra_instances
    capacity = (
        QueueCapacity.objects.filter(queue_id=share.queue_id, instance_type__name=itype)
        .values_list("instances", flat=True)
        .first()
        or 0
    )
    if after > capacity:
        raise InvalidInput(
            {
                "extra_instances": [
                    f"share {share.name} would have {after} {itype}, more than the queue's "
                    f"capacity of {capacity}"
                ]
            }
        )
    limits[itype] = after
    share_update(
        actor=request.decided_by,
        share=share,
        data=share_data_from_document({**doc, "capacity_limits": limits}, team=share.team),
        reason=_capacity_reason(request, "adds"),
        expected_version=share.version,
        cause=PolicyChange.Cause.EXCEPTION,
        exception_request=request,
    )
    return {
        "instance_type": itype,
        "delta": request.extra_instances,
        "limit_before": before,
        "limit_after": after,
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _apply_jobs(request: ExceptionRequest, *, now: datetime) -> dict:
    jobs = list(
        Job.objects.select_for_update()
        .filter(exception_requests=request, state__in=LIVE_JOB_STATES)
        .order_by("id")
    )
    if not jobs:
        raise InvalidInput({"jobs": ["none of the named jobs is still waiting or running"]})
    applied: dict[str, dict] = {}
    for job in jobs:
        if request.kind == Kind.PRIORITY_RAISE:
            granted = request.urgency.priority
            raised = job_set_priority_by_exception(
                job_id=job.pk,
                priority=granted,
                exception_id=request.pk,
                step="raised",
                actor=request.decided_by,
                now=now,
            )
            if raised is not None:  # else it succeeded by now: nothing to raise
                applied[str(job.pk)] = {"name": job.name, "before": job.priority, "after": granted}
        else:
            if job.protected_until is not None and job.protected_until >= request.window_end:
                continue  # already protected for longer; nothing of ours to take back later
            applied[str(job.pk)] = {
                "name": job.name,
                "before": _iso(job.protected_until),
                "after": _iso(request.window_end),
            }
            job_protect_by_exception(job_id=job.pk, until=request.window_end)
    if request.kind == Kind.PRIORITY_RAISE and not applied:
        raise InvalidInput({"jobs": ["none of the named jobs is still waiting or running"]})
    _schedule_pass(request.queue_id)
    return {"jobs": applied}


def _schedule_pass(queue_id: int) -> None:
    from core.signals import policy_changed

    transaction.on_commit(lambda: policy_changed.send(sender=JobQueue, queue_id=queue_id))


def take_back(request: ExceptionRequest, *, actor, reason: str, step: str, now) -> None:
    """End the request's effect; `step` is how it ended ("expired", "revoked")."""
    applied = request.applied or {}
    if request.kind == Kind.TEMPORARY_CAPACITY:
        if applied:
            _take_back_capacity(request, applied, actor=actor, reason=reason)
        return
    for job_id, change in applied.get("jobs", {}).items():
        if request.kind == Kind.PRIORITY_RAISE:
            _take_back_priority(request, int(job_id), change, actor=actor, step=step, now=now)
        else:
            ours = datetime.fromisoformat(change["after"])
            before = datetime.fromisoformat(change["before"]) if change["before"] else None
            job_protect_by_exception(
                job_id=int(job_id),
                until=before,
                unless_changed_from=ours,
            )
    _schedule_pass(request.queue_id)


def _take_back_priority(
    request: ExceptionRequest, job_id: int, change: dict, *, actor, step: str, now
) -> None:
    """Give a raised job back the priority it had before the raise, through the
    scheduler's service (an event naming the request), when it still has the raised
    one, or has one that only the exception allowed: someone changed it during the
    window (700 -> 650 on a share capped at 100), and without the request it would
    outlive it. A priority its share allows on its own, set meanwhile, stays. When the
    old priority is no longer allowed either (the ceiling was lowered meanwhile), the
    job gets the share's ceiling: the highest it could be given without an exception.
    The request is no longer active here, so the share's rules are read without it."""
    job = (
        Job.objects.select_related("share__team", "urgency")
        .filter(pk=job_id, state__in=LIVE_JOB_STATES)
        .first()
    )
    if job is None:
        return  # it ended: it keeps the priority it ended with

    def allowed(priority: int) -> bool:
        return (
            job_priority_refusal(share=job.share, priority=priority, urgency=job.urgency, job=job)
            is None
        )

    if job.priority != change["after"] and allowed(job.priority):
        return
    before = change["before"]
    target = before if allowed(before) else job.share.priority_ceiling
    job_set_priority_by_exception(
        job_id=job.pk,
        priority=target,
        exception_id=request.pk,
        step=step,
        actor=actor,
        now=now,
    )


def _take_back_capacity(request, applied: dict, *, actor, reason: str) -> None:
    """Subtract the exception's delta from the limit as it is now (an admin may have
    edited the share meanwhile: their change stays)."""
    share = QuotaShare.objects.select_related("team", "queue").get(pk=request.share_id)
    doc = share_document(share)
    limits = dict(doc["capacity_limits"])
    itype = applied["instance_type"]
    remaining = limits.get(itype, 0) - applied["delta"]
    if remaining >= 1:
        limits[itype] = remaining
    elif len(limits) > 1:
        limits.pop(itype, None)  # the share had none of it, or an admin lowered it meanwhile
    else:
        limits[itype] = 1  # a share keeps at least one limit
    share_update(
        actor=actor,
        share=share,
        data=share_data_from_document({**doc, "capacity_limits": limits}, team=share.team),
        reason=reason,
        expected_version=share.version,
        cause=PolicyChange.Cause.EXCEPTION,
        exception_request=request,
    )


def _applied_text(request: ExceptionRequest) -> str:
    applied = request.applied or {}
    if request.kind == Kind.TEMPORARY_CAPACITY:
        return (
            f"{applied['instance_type']} limit of share {request.share.name}: "
            f"{applied['limit_before']} → {applied['limit_after']}"
        )
    jobs = applied.get("jobs", {})
    if request.kind == Kind.PRIORITY_RAISE:
        return "; ".join(
            f"{change['name']}: priority {change['before']} → {change['after']}"
            for change in jobs.values()
        )
    names = ", ".join(change["name"] for change in jobs.values())
    return f"protected from preemption until the window ends: {names or 'no job'}"
