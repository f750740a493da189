"""The policy-write kit: what every policy write (a share, a queue's capacity, an
urgency definition, a team, a role, a workload class, a price, an executor binding, a
directory mapping, a revert) is built from, in one public module.

- `reviewable`: the decorator every write wears, the one place that decides whether it
  applies or becomes a proposal. It checks the actor against core.rules, and with
  POLICY_CHANGES_NEED_REVIEW an edit or a revert does not apply: the write is run in a
  savepoint that is rolled back (so it is checked exactly as it would apply, and its
  diff is kept), and the PolicyProposal is returned instead, which applies only when
  another admin approves it (governance.proposals.services). Changes caused by an
  exception, and imports, apply at once: the exception was decided by its owner.
  `Proposal` is what a write says its proposal holds; `REVIEWED` is the `approved` of a
  write that is one step of a write already decided, such as a revert's
  (`as_revert_of`).
- `require_reason`: every write says why.
- `record_change`: the PolicyChange (who, when, why, before and after) a write records in
  its own transaction.
- `PolicyWrite`, the one result every write returns; `PolicyError` and
  `VersionConflict`, the problems it raises.
- The proposal kinds: each kind registers, beside its write, how an approved proposal
  of it applies and how a change it recorded is reverted (`register_proposal_kind`);
  governance.proposals approves through `proposal_apply`, and
  governance.policy.services.policy_change_revert reverts through `change_revert`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from core import rules
from core.bounds import check_lengths
from core.errors import NON_FIELD, Conflict, InvalidInput
from fleet.models import JobQueue, QuotaShare, Team, UrgencyDefinition, WorkloadClass
from governance.models import PolicyChange, PolicyProposal


class PolicyError(InvalidInput):
    """A proposed policy change breaks a rule. `errors` maps a field name to its messages."""


class VersionConflict(Conflict):
    """Someone saved the object after the editor loaded it."""

    def __init__(self, *, current: dict, current_version: int, submitted: dict):
        super().__init__(
            {
                "version": [
                    f"this policy was changed by someone else (now version {current_version}); "
                    "review their change and apply yours on top"
                ]
            },
            current=current,
            current_version=current_version,
            submitted=submitted,
        )


@dataclass(frozen=True)
class PolicyWrite:
    """What a policy write did, the one result every write returns. Either it applied:
    `applied` is the object it saved (a share, a queue, an urgency definition; for a
    revert, the new PolicyChange itself) and `entry` the PolicyChange it recorded (None:
    nothing changed). Or it waits for another admin's review: `proposal` is the
    PolicyProposal it became, and nothing changed yet."""

    applied: Any = None
    entry: PolicyChange | None = None
    proposal: PolicyProposal | None = None


def _check_actor(actor, *, cause: str, exception_request=None) -> None:
    """Edits, imports and reverts are the table's "policy.edit" (admins). A change an
    exception causes was allowed by the exception's own rules (its decider may be an
    exception owner; its expiry has no actor), so it must name that request."""
    if cause == PolicyChange.Cause.EXCEPTION:
        if exception_request is None:
            raise ValueError("a change caused by an exception must name its request")
        return
    if cause == PolicyChange.Cause.DIRECTORY:
        # The directory's groups, as the admins' mapping says (governance.directory): no
        # actor of its own, and never a proposal (the mapping was the admins' decision).
        return
    rules.require(actor, "policy.edit")


# `approved=REVIEWED`: this write is one step of a write already decided (a new queue's
# capacity, a revert's edit), so it applies as that write does.
REVIEWED = object()


def as_revert_of(change: PolicyChange) -> dict:
    """The keywords with which a revert carries out its write: a change of cause REVERT,
    linked to the change it takes back, applied as one step of the revert (which was
    itself reviewed)."""
    return {"cause": PolicyChange.Cause.REVERT, "reverts": change, "approved": REVIEWED}


def _approval_refusal(approved) -> str | None:
    """None when `approved` (a proposal being approved, or an approved what-if draft)
    carries another admin's approval; otherwise why it does not."""
    from governance.models import WhatIfComparison

    if isinstance(approved, PolicyProposal):
        ok = approved.is_pending and approved.reviewer_id not in (None, approved.author_id)
    elif isinstance(approved, WhatIfComparison):
        ok = approved.review_state == WhatIfComparison.Review.APPROVED and (
            approved.reviewer_id not in (None, approved.author_id)
        )
    else:
        ok = False
    return None if ok else "this change has not been approved by another admin"


def changes_need_review() -> bool:
    """POLICY_CHANGES_NEED_REVIEW: an admin's edit or revert waits for another admin."""
    return bool(settings.POLICY_CHANGES_NEED_REVIEW)


def _needs_proposal(actor, *, cause: str, approved, exception_request=None) -> bool:
    """Check the actor; True when this write must wait for another admin's review."""
    _check_actor(actor, cause=cause, exception_request=exception_request)
    if approved is REVIEWED:
        return False
    if approved is not None:
        why = _approval_refusal(approved)
        if why:
            raise rules.Refused(why)
        return False
    if cause not in (PolicyChange.Cause.EDIT, PolicyChange.Cause.REVERT):
        return False
    return changes_need_review()


@dataclass(frozen=True)
class Proposal:
    """What a write proposes: its kind, what approving it applies (`payload`, with the
    diff's "after" added), and what it is about (queue, share, urgency, reverts,
    base_version: PolicyProposal's fields)."""

    kind: str
    payload: dict
    about: dict = field(default_factory=dict)


def _propose(*, actor, reason: str, proposal: Proposal, write) -> PolicyProposal | None:
    """Run `write` in a savepoint that is rolled back: its problems are raised as the write
    would raise them, and the change it would record is kept as the proposal's diff. None
    when it would change nothing."""
    savepoint = transaction.savepoint()
    try:
        change = write().entry
        before = change.before if change else None
        after = change.after if change else None
        object_repr = change.object_repr if change else ""
    finally:
        transaction.savepoint_rollback(savepoint)
    if change is None:
        return None
    return PolicyProposal.objects.create(
        kind=proposal.kind,
        author=actor,
        reason=reason.strip(),
        object_repr=object_repr,
        before=before,
        payload={**proposal.payload, "after": after},
        **proposal.about,
    )


def reviewable(proposal_of: Callable[..., Proposal], *, cause: str | None = None):
    """The one place that decides whether a policy write applies or becomes a proposal.

    The decorated function applies the write and returns PolicyWrite(applied=, entry=).
    The decorator adds the keyword `approved` (the approved proposal or what-if draft the
    write carries out) and, in one transaction, checks the actor (core.rules); when the
    write must wait for review (an edit or a revert, with POLICY_CHANGES_NEED_REVIEW,
    not approved) it runs the write in a rolled-back savepoint and returns
    PolicyWrite(proposal=) instead, or applies it when it would change nothing.
    `proposal_of` gets the write's arguments and says what the proposal holds; `cause` is
    the write's cause when its signature names none (a revert)."""

    def decorate(write):
        signature = inspect.signature(write)

        @functools.wraps(write)
        @transaction.atomic
        def review_or_apply(*, approved=None, **kwargs) -> PolicyWrite:
            arguments = signature.bind(**kwargs)
            arguments.apply_defaults()
            args = arguments.arguments
            actor = args["actor"]
            if _needs_proposal(
                actor,
                cause=args.get("cause", cause),
                approved=approved,
                exception_request=args.get("exception_request"),
            ):
                proposal = _propose(
                    actor=actor,
                    reason=args["reason"],
                    proposal=proposal_of(**args),
                    write=lambda: write(**kwargs),
                )
                if proposal is not None:
                    return PolicyWrite(proposal=proposal)
            return write(**kwargs)

        # What help() and the schema tools show: the write's own keywords, and `approved`.
        approved_keyword = inspect.Parameter(
            "approved", inspect.Parameter.KEYWORD_ONLY, default=None
        )
        review_or_apply.__signature__ = signature.replace(
            parameters=[*signature.parameters.values(), approved_keyword],
            return_annotation=PolicyWrite,
        )
        return review_or_apply

    return decorate


def reason_problems(reason: str) -> dict[str, list[str]]:
    """The errors of a policy write's reason (empty: none), for a form to show with
    the rest before it writes."""
    if not (reason or "").strip():
        return {"reason": ["say why this change is made"]}
    return {}


def require_reason(reason: str) -> str:
    """The write's reason, stripped; a PolicyError naming `reason` when it is empty or
    too long."""
    if problems := reason_problems(reason):
        raise PolicyError(problems)
    check_lengths({"reason": reason.strip()}, ["reason"], error=PolicyError)
    return reason.strip()


def record_change(
    *,
    actor,
    reason: str,
    target: str,
    object_repr: str,
    before: dict | None,
    after: dict | None,
    cause: str = PolicyChange.Cause.EDIT,
    queue: JobQueue | None = None,
    share: QuotaShare | None = None,
    urgency: UrgencyDefinition | None = None,
    reverts: PolicyChange | None = None,
    exception_request=None,
    team: Team | None = None,
    subject=None,
    workload_class: WorkloadClass | None = None,
) -> PolicyChange:
    """Record one change in the policy history (append-only), in the write's transaction."""
    return PolicyChange.objects.create(
        actor=actor,
        reason=reason,
        cause=cause,
        target=target,
        object_repr=object_repr[:200],
        before=before,
        after=after,
        queue=queue,
        share=share,
        urgency=urgency,
        reverts=reverts,
        exception_request=exception_request,
        team=team,
        subject=subject,
        workload_class=workload_class,
    )


# The proposal kinds.


@dataclass(frozen=True)
class ProposalKind:
    """How one kind of proposal applies once approved, and how the change it records is
    reverted. `apply(proposal, *, actor, reason, approved)` carries out the write the
    proposal holds, as its author; `revert(*, actor, change, reason, diff)` takes back a
    change of `target` (the PolicyChange target the kind's write records; None for a
    revert, whose change has the target of the change it reverts), as a new change."""

    kind: str
    target: str | None
    apply: Callable[..., PolicyWrite]
    revert: Callable[..., PolicyWrite]


_KINDS: dict[str, ProposalKind] = {}
_REVERTS: dict[str, Callable[..., PolicyWrite]] = {}


def register_proposal_kind(
    kind: str,
    *,
    target: str | None,
    apply: Callable[..., PolicyWrite],
    revert: Callable[..., PolicyWrite],
) -> None:
    """Say how proposals of `kind` apply and how changes of `target` are reverted. Kinds
    that record the same target (a share's creation and its update) share its revert."""
    if target is not None and _REVERTS.setdefault(target, revert) is not revert:
        raise ValueError(f"changes of target '{target}' already have another revert")
    _KINDS[kind] = ProposalKind(kind=kind, target=target, apply=apply, revert=revert)


def registered_proposal_kinds() -> dict[str, ProposalKind]:
    return dict(_KINDS)


def proposal_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    """Carry out an approved proposal through the write of its kind (`common`: actor,
    reason, approved)."""
    registered = _KINDS.get(proposal.kind)
    if registered is None:
        raise PolicyError(
            {
                NON_FIELD: [
                    f"no policy write applies proposals of kind '{proposal.kind}': "
                    "reject this proposal"
                ]
            }
        )
    return registered.apply(proposal, **common)


def change_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Take back `change` through the revert of its target, as a new change."""
    revert = _REVERTS.get(change.target)
    if revert is None:
        raise PolicyError({NON_FIELD: [f"changes of target '{change.target}' cannot be reverted"]})
    return revert(actor=actor, change=change, reason=reason, diff=diff)
