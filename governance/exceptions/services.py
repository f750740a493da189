"""Exception requests: filing and deciding.

A team lead files a request (a draft, or submitted at once), edits it while it is a
draft, submits it, or withdraws it before it is decided; an exception owner approves or
denies it; an owner or an admin revokes an approved or active one. Each step moves the
request through governance.exceptions.transitions (one conditional UPDATE, so when two
callers race exactly one moves it). The rest of an exception's life, by concern:

- governance.exceptions.effects: taking effect at the window's start (at once when an
  approval finds it begun) and ending at its end or at a revocation, through the policy
  and scheduler services;
- governance.exceptions.impact: what approving it would do, computed by the engine;
- governance.exceptions.owners: who decides the requests of a queue or a share.

Their public names are importable from here too (`__all__`), as callers import them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core import rules
from core.bounds import check_lengths
from core.celery import task
from core.errors import InvalidInput
from core.formatting import hours, relative
from fleet.models import InstanceType, Job, QueueCapacity, QuotaShare, Team, UrgencyDefinition
from governance import notifications
from governance.exceptions.effects import (
    JOB_KINDS,
    LIVE_JOB_STATES,
    exception_request_activate,
    exception_request_expire,
    lock_request_queue,
    take_back,
)
from governance.exceptions.impact import exception_impact, expected_snapshot
from governance.exceptions.owners import (
    exception_owner_add,
    exception_owner_remove,
    exception_owner_validate,
)
from governance.exceptions.transitions import (
    STEPS,
    TransitionRefused,
    claim,
    record_event,
    state_now,
    step_refusal,
)
from governance.models import ExceptionEvent, ExceptionRequest

__all__ = [
    "RequestData",
    "TransitionRefused",
    "exception_impact",
    "exception_owner_add",
    "exception_owner_remove",
    "exception_owner_validate",
    "exception_request_activate",
    "exception_request_approve",
    "exception_request_create",
    "exception_request_deny",
    "exception_request_expire",
    "exception_request_revoke",
    "exception_request_submit",
    "exception_request_update",
    "exception_request_withdraw",
    "expected_snapshot",
    "request_validate",
    "schedule_activation",
]


logger = logging.getLogger(__name__)

State = ExceptionRequest.State
Kind = ExceptionRequest.Kind


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
    record_event(request, ExceptionEvent.Type.FILED, at=now, actor=actor)
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
        raise TransitionRefused(_edit_refused(state_now(request)))
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
        raise TransitionRefused(step_refusal("submit", request.state))
    # The rules may have changed since the draft was saved (the window, the urgency).
    errors = request_validate(actor=request.requested_by, data=_data_of(request), now=now)
    if errors:
        raise InvalidInput(errors)
    if not claim(request, "submit", submitted_at=now):
        raise TransitionRefused(step_refusal("submit", state_now(request)))
    record_event(request, ExceptionEvent.Type.SUBMITTED, at=now, actor=actor)
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
        raise TransitionRefused(step_refusal("withdraw", request.state))
    if not claim(request, "withdraw", submitted_at=None):
        raise TransitionRefused(step_refusal("withdraw", state_now(request)))
    record_event(request, ExceptionEvent.Type.WITHDRAWN, at=now, actor=actor)
    return request


@transaction.atomic
def exception_request_approve(
    *, actor, request: ExceptionRequest, note: str = "", now: datetime | None = None
) -> ExceptionRequest:
    """Approve; takes effect at once when its window has begun, else at its start."""
    now = now or timezone.now()
    membership = _membership_at_decision(actor, request)
    if request.state != State.SUBMITTED:
        raise TransitionRefused(step_refusal("approve", request.state))
    if request.window_end <= now:
        raise TransitionRefused(
            "the window of this request has already ended; deny it, and the team may file a new one"
        )
    note = (note or "").strip()
    check_lengths({"note": note}, ["note"])
    if not claim(
        request,
        "approve",
        decided_by=actor,
        decided_at=now,
        decision_note=note,
        decided_membership=membership,
    ):
        raise TransitionRefused(step_refusal("approve", state_now(request)))
    record_event(request, ExceptionEvent.Type.APPROVED, at=now, actor=actor, note=note)
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
        raise TransitionRefused(step_refusal("deny", request.state))
    note = (note or "").strip()
    if not note:
        raise InvalidInput({"note": ["say why the request is denied, so the team can act on it"]})
    check_lengths({"note": note}, ["note"])
    if not claim(
        request,
        "deny",
        decided_by=actor,
        decided_at=now,
        decision_note=note,
        decided_membership=membership,
    ):
        raise TransitionRefused(step_refusal("deny", state_now(request)))
    record_event(request, ExceptionEvent.Type.DENIED, at=now, actor=actor, note=note)
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
    if request.state not in STEPS["revoke"][0]:
        raise TransitionRefused(step_refusal("revoke", request.state))
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput({"reason": ["say why the exception is revoked"]})
    check_lengths({"reason": reason}, ["reason"])
    lock_request_queue(request)
    was_active = state_now(request) == State.ACTIVE
    if not claim(request, "revoke", ended_at=now):
        raise TransitionRefused(step_refusal("revoke", state_now(request)))
    if was_active:
        take_back(
            request,
            actor=actor,
            reason=f"Exception #{request.pk} revoked: {reason}",
            step="revoked",
            now=now,
        )
    record_event(request, ExceptionEvent.Type.REVOKED, at=now, actor=actor, note=reason)
    notifications.notify_ended(request=request, how="revoked", note=f"Reason: {reason}")
    return request
