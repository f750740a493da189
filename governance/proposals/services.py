"""Reviewing policy proposals: another admin approves (the write then applies, through
the same policy service, as its author's change) or rejects; the author may withdraw.

Each step is one conditional transition of a PENDING proposal under its row lock, so
two admins clicking at once decide it once. See governance.policy.services for how a
write becomes a proposal.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core import rules
from core.bounds import check_lengths
from core.errors import NON_FIELD, InvalidInput, WrongState
from fleet.models import InstanceType
from governance.directory import services as directory
from governance.models import PolicyProposal
from governance.policy import membership, prices, slurm_binding, workload_classes
from governance.policy import services as policy

Kind = PolicyProposal.Kind
State = PolicyProposal.State


def _locked(proposal: PolicyProposal) -> PolicyProposal:
    return PolicyProposal.objects.select_for_update().get(pk=proposal.pk)


def _require_pending(proposal: PolicyProposal) -> None:
    if not proposal.is_pending:
        state = proposal.get_state_display().lower()
        raise WrongState(f"this proposal is already {state}", field=NON_FIELD)


def _apply(proposal: PolicyProposal) -> policy.PolicyWrite:
    """Carry out the proposed write as its author, with this approval."""
    payload = proposal.payload
    common = {"actor": proposal.author, "reason": proposal.reason, "approved": proposal}
    if proposal.kind == Kind.SHARE_CREATE:
        return policy.share_create(
            queue=proposal.queue, data=policy.share_data_from_document(payload["data"]), **common
        )
    if proposal.kind == Kind.SHARE_UPDATE:
        return policy.share_update(
            share=proposal.share,
            data=policy.share_data_from_document(payload["data"]),
            expected_version=proposal.base_version,
            **common,
        )
    if proposal.kind == Kind.QUEUE_CAPACITY:
        return policy.queue_set_capacity(
            queue=proposal.queue,
            capacity=payload["capacity"],
            expected_version=proposal.base_version,
            **common,
        )
    if proposal.kind in slurm_binding.PROPOSAL_KINDS:
        return slurm_binding.proposal_apply(proposal, **common)
    if proposal.kind == Kind.QUEUE_CREATE:
        fields = {key: value for key, value in payload.items() if key != "after"}
        return policy.queue_create(**fields, **common)
    if proposal.kind in (Kind.URGENCY_CREATE, Kind.URGENCY_UPDATE):
        return policy.urgency_save(
            data=payload["data"],
            urgency=proposal.urgency,
            expected_version=proposal.base_version,
            **common,
        )
    if proposal.kind in (Kind.TEAM_CREATE, Kind.TEAM_UPDATE):
        return membership.team_save(
            data=membership.team_data_from_document(payload["data"]),
            team=proposal.team,
            expected=proposal.before,
            **common,
        )
    if proposal.kind == Kind.TEAM_DELETE:
        if proposal.team is None:
            raise InvalidInput({NON_FIELD: ["this team no longer exists"]})
        written = membership.team_delete(team=proposal.team, **common)
        proposal.team = None  # deleted with the team's row (SET_NULL)
        return written
    if proposal.kind == Kind.ROLES:
        if proposal.subject is None:
            raise InvalidInput({NON_FIELD: ["this user no longer exists"]})
        return membership.user_roles_set(
            user=proposal.subject, roles=payload["roles"], expected=proposal.before, **common
        )
    if proposal.kind in (Kind.CLASS_CREATE, Kind.CLASS_UPDATE):
        return workload_classes.workload_class_save(
            data=payload["data"],
            workload_class=proposal.workload_class,
            expected_version=proposal.base_version,
            **common,
        )
    if proposal.kind == Kind.CLASS_DELETE:
        if proposal.workload_class is None:
            raise InvalidInput({NON_FIELD: ["this workload class no longer exists"]})
        written = workload_classes.workload_class_delete(
            workload_class=proposal.workload_class, **common
        )
        proposal.workload_class = None  # deleted with the class's row (SET_NULL)
        return written
    return _apply_price_mapping_or_revert(proposal, common)


def _apply_price_mapping_or_revert(proposal: PolicyProposal, common: dict) -> policy.PolicyWrite:
    if proposal.kind in directory.PROPOSAL_KINDS:
        return directory.mapping_proposal_apply(proposal, **common)
    if proposal.kind == Kind.PRICE:
        payload = proposal.payload
        instance_type = InstanceType.objects.filter(pk=payload["instance_type_id"]).first()
        if instance_type is None:
            raise InvalidInput({NON_FIELD: ["this instance type no longer exists"]})
        return prices.instance_type_price_set(
            instance_type=instance_type, price=payload[prices.FIELD], **common
        )
    return policy.policy_change_revert(change=proposal.reverts, **common)


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
        written = _apply(proposal)
    except policy.VersionConflict as conflict:
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
