"""Exception requests: filing, deciding, taking effect, ending.

States: DRAFT -> SUBMITTED -> APPROVED | DENIED; SUBMITTED -> DRAFT when the requester
withdraws it before it is decided (to edit it or let it be); APPROVED -> ACTIVE at the
window's start -> EXPIRED at its end; APPROVED or ACTIVE -> REVOKED by an owner or an admin.
Every transition is one conditional UPDATE (`... WHERE state IN (from)`), so when two
callers race (a task run twice, two owners clicking), exactly one moves the request
and the other is refused or does nothing. The effect is applied (and taken back) in
the same transaction as the transition:

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

Impact previews are the engine's: `assess_policy_change` for capacity, and
`assess_job_change` for jobs (the decisions a pass now would make, or no longer make,
with the changed jobs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core import rules
from core.bounds import check_lengths
from core.celery import task
from core.errors import Conflict, DomainError, InvalidInput, WrongState
from core.formatting import hours, relative
from fleet.locks import lock_queue
from fleet.models import (
    InstanceType,
    Job,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from fleet.selectors import share_document
from governance import notifications
from governance.models import ExceptionEvent, ExceptionOwner, ExceptionRequest, PolicyChange
from governance.policy.impact import ImpactLine, share_change_impact
from governance.policy.services import NON_FIELD, share_data_from_document, share_update
from scheduler.services.jobs import job_protect_by_exception, job_set_priority_by_exception
from scheduler.services.priorities import job_priority_refusal

logger = logging.getLogger(__name__)

State = ExceptionRequest.State
Kind = ExceptionRequest.Kind
JOB_KINDS = (Kind.PRIORITY_RAISE, Kind.PREEMPTION_PROTECTION)
# A STOPPING job is live: preempted with notice, it goes back to its queue (a raise
# still matters to it, and its take-back too); terminated, it ends FAILED at its stop.
LIVE_JOB_STATES = Job.LIVE_STATES


class TransitionRefused(WrongState):
    """The request is not in a state that allows this step."""


@dataclass(frozen=True)
class RequestData:
    """A request as the form or the API gives it (already parsed, not yet checked)."""

    kind: str
    team: Team | None
    urgency: UrgencyDefinition | None
    justification: str
    window_start: datetime | None
    window_end: datetime | None
    share: QuotaShare | None = None
    instance_type: InstanceType | None = None
    extra_instances: int | None = None
    jobs: Sequence[Job] = ()


# Which steps each state allows, and how to say so when it does not.
_STEPS = {
    "submit": ((State.DRAFT,), State.SUBMITTED),
    "withdraw": ((State.SUBMITTED,), State.DRAFT),  # the requester, until it is decided
    "approve": ((State.SUBMITTED,), State.APPROVED),
    "deny": ((State.SUBMITTED,), State.DENIED),
    "activate": ((State.APPROVED,), State.ACTIVE),
    "expire": ((State.ACTIVE,), State.EXPIRED),
    "lapse": ((State.APPROVED,), State.EXPIRED),  # approved, but the window passed unused
    "revoke": ((State.APPROVED, State.ACTIVE), State.REVOKED),
}


def _refusal(step: str, state: str) -> str:
    allowed, _ = _STEPS[step]
    current = State(state).label.lower()
    needed = " or ".join(State(s).label.lower() for s in allowed)
    return f"this request is {current}, so it cannot be {_past(step)}; only a {needed} request can"


def _past(step: str) -> str:
    return {
        "submit": "submitted",
        "withdraw": "withdrawn",
        "approve": "approved",
        "deny": "denied",
        "revoke": "revoked",
    }.get(step, f"{step}d")


def _claim(request: ExceptionRequest, step: str, **fields) -> bool:
    """Move `request` by `step` if it is still in a state that allows it; True if this
    call did it. The one place a request changes state."""
    allowed, target = _STEPS[step]
    moved = ExceptionRequest.objects.filter(pk=request.pk, state__in=allowed).update(
        state=target, **fields
    )
    if moved:
        request.state = target
        for name, value in fields.items():
            setattr(request, name, value)
    return bool(moved)


def _event(request, type_, *, at, actor=None, note: str = "") -> ExceptionEvent:
    return ExceptionEvent.objects.create(request=request, type=type_, at=at, actor=actor, note=note)


# Validation: the rules of a request, for the form, the API and the services.


def request_validate(*, actor, data: RequestData, now: datetime | None = None) -> dict:  # noqa: C901
    """Every problem with `data` as a request filed by `actor`, keyed by field name."""
    now = now or timezone.now()
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if data.kind not in Kind.values:
        add("kind", "choose what the exception should do")
    if data.team is None:
        add("team", "choose the team the exception is for")
    else:
        refusal = rules.refusal(actor, "exception.file", data.team)
        if refusal:
            add("team", refusal)
    if not (data.justification or "").strip():
        add("justification", "say why the team needs this exception")

    urgency = data.urgency
    if urgency is None:
        add("urgency", "choose the urgency definition that justifies it")
    else:
        if data.kind in Kind.values and data.kind not in (urgency.allowed_kinds or []):
            allowed = ", ".join(Kind(k).label.lower() for k in urgency.allowed_kinds) or "nothing"
            add(
                "kind",
                f"urgency '{urgency}' does not allow a {Kind(data.kind).label.lower()}; "
                f"it allows: {allowed}",
            )
        invokers = list(urgency.invokers.all())
        if data.team is not None and invokers and data.team not in invokers:
            add("urgency", f"team {data.team} may not invoke urgency '{urgency}'")

    start, end = data.window_start, data.window_end
    if start is None:
        add("window_start", "give the start of the window")
    if end is None:
        add("window_end", "give the end of the window")
    if start is not None and end is not None:
        if end <= start:
            add("window_end", "must be after the start of the window")
        elif urgency is not None and end - start > timedelta(hours=urgency.max_window_hours):
            add(
                "window_end",
                f"the window is {hours(end - start)} long; urgency '{urgency}' allows at most "
                f"{urgency.max_window_hours} h",
            )
        if end <= now:
            add("window_end", "must be in the future")
    if start is not None and urgency is not None:
        # An urgency is for now: its window starts within its maximum window from now
        # (a window in 2031 is a plan, not an urgency).
        latest = now + timedelta(hours=urgency.max_window_hours)
        if start > latest:
            add(
                "window_start",
                f"starts {relative(start, now)}; urgency '{urgency}' allows a window "
                f"to start at most {urgency.max_window_hours} h ahead",
            )

    if data.kind == Kind.TEMPORARY_CAPACITY:
        _validate_capacity(data, add)
    elif data.kind in JOB_KINDS:
        _validate_jobs(data, add)
    return errors


def _validate_capacity(data: RequestData, add) -> None:
    share = data.share
    if share is None:
        add("share", "choose the share that gets the extra capacity")
    elif data.team is not None and share.team_id != data.team.pk:
        add("share", f"share {share} belongs to team {share.team}, not to {data.team}")
    if data.instance_type is None:
        add("instance_type", "choose the instance type")
    if not isinstance(data.extra_instances, int) or data.extra_instances < 1:
        add("extra_instances", "must be a whole number of instances, at least 1")
        return
    if share is None or data.instance_type is None:
        return
    capacity = (
        QueueCapacity.objects.filter(queue_id=share.queue_id, instance_type=data.instance_type)
        .values_list("instances", flat=True)
        .first()
    )
    if capacity is None:
        add("instance_type", f"queue {share.queue} has no {data.instance_type}")
        return
    current = (
        share.limits.filter(instance_type=data.instance_type)
        .values_list("max_instances", flat=True)
        .first()
        or 0
    )
    if current + data.extra_instances > capacity:
        add(
            "extra_instances",
            f"share {share.name} would have {current + data.extra_instances} "
            f"{data.instance_type}, more than the queue's capacity of {capacity}; ask for at "
            f"most {max(capacity - current, 0)}",
        )


def _validate_jobs(data: RequestData, add) -> None:
    jobs = list(data.jobs)
    if not jobs:
        add("jobs", "name at least one job")
        return
    queues = {job.queue_id for job in jobs}
    if len(queues) > 1:
        add("jobs", "name jobs of one queue per request")
    for job in jobs:
        if data.team is not None and job.share.team_id != data.team.pk:
            add("jobs", f"job {job.name} is not a job of team {data.team}")
        elif job.state not in LIVE_JOB_STATES:
            add("jobs", f"job {job.name} has finished ({job.get_state_display().lower()})")
        elif data.kind == Kind.PREEMPTION_PROTECTION and job.state == Job.State.STOPPING:
            add("jobs", f"job {job.name} is already stopping: it got notice, too late to protect")
        elif data.kind == Kind.PREEMPTION_PROTECTION and job.state != Job.State.RUNNING:
            add("jobs", f"job {job.name} is not running: only running jobs can be preempted")


# Filing and deciding.


@transaction.atomic
def exception_request_create(
    *, actor, data: RequestData, submit: bool = False, now: datetime | None = None
) -> ExceptionRequest:
    """File a request (a draft, or submitted at once with `submit=True`)."""
    rules.require(actor, "exception.file")
    now = now or timezone.now()
    fields = _checked_fields(actor=actor, data=data, now=now)
    request = ExceptionRequest.objects.create(**fields, requested_by=actor)
    if data.kind in JOB_KINDS:
        request.jobs.set(list(data.jobs))
    _event(request, ExceptionEvent.Type.FILED, at=now, actor=actor)
    if submit:
        exception_request_submit(actor=actor, request=request, now=now)
    return request


def _checked_fields(*, actor, data: RequestData, now: datetime) -> dict:
    """The request's columns from `data`, after the filing rules (InvalidInput if any
    fails). Filing and editing a draft both go through here."""
    check_lengths(data, ["justification"])
    errors = request_validate(actor=actor, data=data, now=now)
    if errors:
        raise InvalidInput(errors)
    jobs = list(data.jobs)
    if data.kind == Kind.TEMPORARY_CAPACITY:
        queue_id, share = data.share.queue_id, data.share
    else:
        queue_id = jobs[0].queue_id
        shares = {job.share_id for job in jobs}
        share = jobs[0].share if len(shares) == 1 else None
    return {
        "kind": data.kind,
        "team": data.team,
        "queue_id": queue_id,
        "share": share,
        "instance_type": data.instance_type if data.kind == Kind.TEMPORARY_CAPACITY else None,
        "extra_instances": data.extra_instances if data.kind == Kind.TEMPORARY_CAPACITY else None,
        "urgency": data.urgency,
        "justification": data.justification.strip(),
        "window_start": data.window_start,
        "window_end": data.window_end,
    }


def _edit_refused(state: str) -> str:
    current = State(state).label.lower()
    return (
        f"this request is {current}, so it cannot be edited any more; only a draft can. "
        "File a new request instead"
    )


@transaction.atomic
def exception_request_update(
    *, actor, request: ExceptionRequest, data: RequestData, now: datetime | None = None
) -> ExceptionRequest:
    """Change a draft with the same rules as filing. Only a DRAFT changes: the UPDATE is
    conditional on the state, so a draft submitted meanwhile is refused, not changed."""
    now = now or timezone.now()
    rules.require(actor, "exception.edit", request)
    if request.state != State.DRAFT:
        raise TransitionRefused(_edit_refused(request.state))
    fields = _checked_fields(actor=actor, data=data, now=now)
    updated = ExceptionRequest.objects.filter(pk=request.pk, state=State.DRAFT).update(**fields)
    if not updated:
        raise TransitionRefused(_edit_refused(_state_now(request)))
    for name, value in fields.items():
        setattr(request, name, value)
    request.jobs.set(list(data.jobs) if data.kind in JOB_KINDS else [])
    return request


def _data_of(request: ExceptionRequest) -> RequestData:
    return RequestData(
        kind=request.kind,
        team=request.team,
        urgency=request.urgency,
        justification=request.justification,
        window_start=request.window_start,
        window_end=request.window_end,
        share=request.share,
        instance_type=request.instance_type,
        extra_instances=request.extra_instances,
        jobs=list(request.jobs.select_related("share")),
    )


@transaction.atomic
def exception_request_submit(
    *, actor, request: ExceptionRequest, now: datetime | None = None
) -> ExceptionRequest:
    now = now or timezone.now()
    rules.require(actor, "exception.submit", request)
    if request.state != State.DRAFT:
        raise TransitionRefused(_refusal("submit", request.state))
    # The rules may have changed since the draft was saved (the window, the urgency).
    errors = request_validate(actor=request.requested_by, data=_data_of(request), now=now)
    if errors:
        raise InvalidInput(errors)
    if not _claim(request, "submit", submitted_at=now):
        raise TransitionRefused(_refusal("submit", _state_now(request)))
    _event(request, ExceptionEvent.Type.SUBMITTED, at=now, actor=actor)
    from governance.exceptions.selectors import request_owners

    notifications.notify_submitted(request=request, owners=request_owners(request=request))
    return request


@transaction.atomic
def exception_request_withdraw(
    *, actor, request: ExceptionRequest, now: datetime | None = None
) -> ExceptionRequest:
    """The requester takes a submitted request back before it is decided: it is a draft
    again, which they may edit and submit anew. Its owners no longer see it to decide."""
    now = now or timezone.now()
    rules.require(actor, "exception.withdraw", request)
    if request.state != State.SUBMITTED:
        raise TransitionRefused(_refusal("withdraw", request.state))
    if not _claim(request, "withdraw", submitted_at=None):
        raise TransitionRefused(_refusal("withdraw", _state_now(request)))
    _event(request, ExceptionEvent.Type.WITHDRAWN, at=now, actor=actor)
    return request


def _state_now(request: ExceptionRequest) -> str:
    return ExceptionRequest.objects.values_list("state", flat=True).get(pk=request.pk)


@transaction.atomic
def exception_request_approve(
    *, actor, request: ExceptionRequest, note: str = "", now: datetime | None = None
) -> ExceptionRequest:
    """Approve; takes effect at once when its window has begun, else at its start."""
    now = now or timezone.now()
    membership = _membership_at_decision(actor, request)
    if request.state != State.SUBMITTED:
        raise TransitionRefused(_refusal("approve", request.state))
    if request.window_end <= now:
        raise TransitionRefused(
            "the window of this request has already ended; deny it, and the team may file a new one"
        )
    note = (note or "").strip()
    check_lengths({"note": note}, ["note"])
    if not _claim(
        request,
        "approve",
        decided_by=actor,
        decided_at=now,
        decision_note=note,
        decided_membership=membership,
    ):
        raise TransitionRefused(_refusal("approve", _state_now(request)))
    _event(request, ExceptionEvent.Type.APPROVED, at=now, actor=actor, note=note)
    _decision_record(request)
    notifications.notify_decided(request=request)
    if request.window_start <= now:
        exception_request_activate(request_id=request.pk, now=now)
        request.refresh_from_db()
    else:
        schedule_activation(request.pk, request.window_start)
    return request


def schedule_activation(request_id: int, window_start: datetime) -> None:
    """Send the activation of an approved request (the task governance.exceptions.
    activate) to run at its window's start (at once when it has begun); after commit,
    when called in a transaction. A broker failure loses nothing: the sweep sends it
    again."""

    def send() -> None:
        try:
            task("governance.exceptions.activate").apply_async(
                (request_id,), eta=max(window_start, timezone.now())
            )
        except Exception:  # noqa: BLE001 - any broker failure; the sweep repairs it
            logger.exception("could not schedule the activation of request %s", request_id)

    transaction.on_commit(send)


@transaction.atomic
def exception_request_deny(
    *, actor, request: ExceptionRequest, note: str, now: datetime | None = None
) -> ExceptionRequest:
    now = now or timezone.now()
    membership = _membership_at_decision(actor, request)
    if request.state != State.SUBMITTED:
        raise TransitionRefused(_refusal("deny", request.state))
    note = (note or "").strip()
    if not note:
        raise InvalidInput({"note": ["say why the request is denied, so the team can act on it"]})
    check_lengths({"note": note}, ["note"])
    if not _claim(
        request,
        "deny",
        decided_by=actor,
        decided_at=now,
        decision_note=note,
        decided_membership=membership,
    ):
        raise TransitionRefused(_refusal("deny", _state_now(request)))
    _event(request, ExceptionEvent.Type.DENIED, at=now, actor=actor, note=note)
    _decision_record(request)
    notifications.notify_decided(request=request)
    return request


def _membership_at_decision(actor, request: ExceptionRequest) -> dict:
    """Check that `actor` may decide `request` with their memberships as they are now,
    and return them, to keep on the decision. The team's row is locked first (a team's
    membership write locks it too, governance.policy.membership.team_save), and the
    roles and teams cached on the actor (for the request, or by the API's identity
    cache) are read again, so the separations of duty see the membership at the
    decision, not as it was when the request began."""
    team = Team.objects.select_for_update().get(pk=request.team_id)
    for cached in ("_governance_roles", "_rules_led_teams", "_rules_member_teams"):
        actor.__dict__.pop(cached, None)
    rules.require(actor, "exception.decide", request)
    from core.permissions import user_roles
    from governance.policy.membership import role_document

    return {
        "team": team.name,
        "member": team.members.filter(pk=actor.pk).exists(),
        "lead": team.leads.filter(pk=actor.pk).exists(),
        "roles": sorted(user_roles(actor)),
        "exception_owner_of": role_document(actor)["exception_owner_of"],
    }


def _decision_record(request: ExceptionRequest) -> None:
    from governance.knowledge.services import article_record_decision

    article_record_decision(request=request)


@transaction.atomic
def exception_request_revoke(
    *, actor, request: ExceptionRequest, reason: str, now: datetime | None = None
) -> ExceptionRequest:
    """End an approved or active exception early; an active one's effect is taken back."""
    now = now or timezone.now()
    rules.require(actor, "exception.revoke", request)
    if request.state not in _STEPS["revoke"][0]:
        raise TransitionRefused(_refusal("revoke", request.state))
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput({"reason": ["say why the exception is revoked"]})
    check_lengths({"reason": reason}, ["reason"])
    _lock_queue(request)
    was_active = _state_now(request) == State.ACTIVE
    if not _claim(request, "revoke", ended_at=now):
        raise TransitionRefused(_refusal("revoke", _state_now(request)))
    if was_active:
        _take_back(
            request,
            actor=actor,
            reason=f"Exception #{request.pk} revoked: {reason}",
            step="revoked",
            now=now,
        )
    _event(request, ExceptionEvent.Type.REVOKED, at=now, actor=actor, note=reason)
    notifications.notify_ended(request=request, how="revoked", note=f"Reason: {reason}")
    return request


# Taking effect and ending: called by the beat tasks (governance.exceptions.tasks) and by approve.


def _lock_queue(request: ExceptionRequest) -> None:
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
        if not _claim(request, "lapse", ended_at=now):
            return False
        _event(
            request,
            ExceptionEvent.Type.EXPIRED,
            at=now,
            note="the window ended before the exception could take effect",
        )
        notifications.notify_ended(
            request=request, how="expired", note="It ended before it could take effect."
        )
        return True
    _lock_queue(request)
    savepoint = transaction.savepoint()
    if not _claim(request, "activate", activated_at=now):
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
    _event(request, ExceptionEvent.Type.ACTIVATED, at=now, note=_applied_text(request))
    return True


@transaction.atomic
def exception_request_expire(*, request_id: int, now: datetime | None = None) -> bool:
    """End an active request whose window is over, taking back its own effect only.
    True if this call did; running twice, or late, changes nothing more."""
    now = now or timezone.now()
    request = _load(request_id)
    if request is None or request.state != State.ACTIVE or request.window_end > now:
        return False
    _lock_queue(request)
    if not _claim(request, "expire", ended_at=now):
        return False
    _take_back(
        request, actor=None, reason=f"Exception #{request.pk} expired", step="expired", now=now
    )
    _event(request, ExceptionEvent.Type.EXPIRED, at=now)
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
    _event(request, ExceptionEvent.Type.APPLY_FAILED, at=now, note=message)
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


def _take_back(request: ExceptionRequest, *, actor, reason: str, step: str, now) -> None:
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


# Impact preview (engine-computed).


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


# Owners.


@transaction.atomic
def exception_owner_add(
    *, actor, user, queue: JobQueue | None = None, share: QuotaShare | None = None
) -> ExceptionOwner:
    """Make `user` an exception owner of `queue` or of `share` (admins only)."""
    rules.require(actor, "exception_owner.manage")
    if (queue is None) == (share is None):
        raise InvalidInput({NON_FIELD: ["choose either a queue or a share"]})
    from django.contrib.auth.models import Group

    from core.permissions import EXCEPTION_OWNERS
    from governance.policy.membership import role_changes_by

    scope = f"queue {queue.name}" if queue is not None else f"share {share.name}"
    with role_changes_by(actor=actor, reason=f"appointed exception owner of {scope}"):
        owner, _ = ExceptionOwner.objects.get_or_create(user=user, queue=queue, share=share)
        user.groups.add(Group.objects.get_or_create(name=EXCEPTION_OWNERS)[0])
    return owner


def exception_owner_validate(
    *, user, queue: JobQueue | None = None, share: QuotaShare | None = None
) -> dict:
    """Every problem with appointing `user` to `queue` or `share`, keyed by field name."""
    from core.permissions import EXCEPTION_OWNERS, has_role

    errors: dict[str, list[str]] = {}
    if user is None:
        errors["user"] = ["choose the person to appoint"]
    elif not has_role(user, EXCEPTION_OWNERS):
        name = user.get_full_name() or user.get_username()
        errors["user"] = [
            f"{name} is not in the exception owners group; add them to the group "
            "(exception_owners) first, then appoint them"
        ]
    if queue is None and share is None:
        errors["queue"] = ["choose the queue or the share this owner decides for"]
    elif queue is not None and share is not None:
        errors["share"] = ["choose a queue or a share, not both: clear one of them"]
    elif (
        "user" not in errors
        and ExceptionOwner.objects.filter(user=user, queue=queue, share=share).exists()
    ):
        scope = f"queue {queue.name}" if queue is not None else f"share {share.name}"
        errors["user"] = [f"{user.get_username()} already decides for {scope}"]
    return errors


@transaction.atomic
def exception_owner_remove(*, actor, owner: ExceptionOwner) -> None:
    """Take `owner`'s scope away (admins only). Their group membership stays."""
    rules.require(actor, "exception_owner.manage")
    from governance.policy.membership import role_changes_by

    scope = owner.queue or owner.share
    with role_changes_by(actor=actor, reason=f"removed from deciding for {scope}"):
        ExceptionOwner.objects.filter(pk=owner.pk).delete()
