"""Reviewing policy proposals: another admin approves (the write then applies, through
the same policy service, as its author's change) or rejects; the author may withdraw.

Each step is one conditional transition of a PENDING proposal under its row lock, so
two admins clicking at once decide it once. See governance.policy.reviewable for how a
write becomes a proposal, and how each kind of proposal applies.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core import rules
from core.bounds import check_lengths
from core.errors import NON_FIELD, InvalidInput, WrongState
from governance.models import PolicyProposal
from governance.policy.reviewable import VersionConflict, proposal_apply

State = PolicyProposal.State


def _locked(proposal: PolicyProposal) -> PolicyProposal:
    return PolicyProposal.objects.select_for_update().get(pk=proposal.pk)


def _require_pending(proposal: PolicyProposal) -> None:
    if not proposal.is_pending:
        state = proposal.get_state_display().lower()
        raise WrongState(f"this proposal is already {state}", field=NON_FIELD)


@transaction.atomic
def proposal_approve(*, actor, proposal: PolicyProposal, note: str = "") -> PolicyProposal:
    """Another admin approves: the write applies now, or nothing happens and the reason
    is said (the policy moved on since it was proposed, a rule now refuses it)."""
    proposal = _locked(proposal)
    rules.require(actor, "proposal.review", proposal)
    _require_pending(proposal)
    proposal.reviewer = actor
    proposal.reviewed_at = timezone.now()
    proposal.review_note = (note or "").strip()
    check_lengths({"note": proposal.review_note}, ["note"])
    try:
        # Carried out as its author's write, with this approval.
        written = proposal_apply(
            proposal, actor=proposal.author, reason=proposal.reason, approved=proposal
        )
    except VersionConflict as conflict:
        raise InvalidInput(
            {
                NON_FIELD: [
                    f"{proposal.object_repr} was changed since this was proposed (now version "
                    f"{conflict.current_version}): reject it, and propose again from the "
                    "current policy"
                ]
            }
        ) from conflict
    proposal.state = State.APPLIED
    proposal.applied_change = written.entry
    proposal.save()
    return proposal


@transaction.atomic
def proposal_reject(*, actor, proposal: PolicyProposal, note: str) -> PolicyProposal:
    proposal = _locked(proposal)
    rules.require(actor, "proposal.review", proposal)
    _require_pending(proposal)
    note = (note or "").strip()
    if not note:
        raise InvalidInput({"note": ["say why, so its author can act on it"]})
    check_lengths({"note": note}, ["note"])
    PolicyProposal.objects.filter(pk=proposal.pk).update(
        state=State.REJECTED, reviewer=actor, reviewed_at=timezone.now(), review_note=note
    )
    proposal.refresh_from_db()
    return proposal


@transaction.atomic
def proposal_withdraw(*, actor, proposal: PolicyProposal) -> PolicyProposal:
    proposal = _locked(proposal)
    rules.require(actor, "proposal.withdraw", proposal)
    _require_pending(proposal)
    PolicyProposal.objects.filter(pk=proposal.pk).update(state=State.WITHDRAWN)
    proposal.refresh_from_db()
    return proposal
