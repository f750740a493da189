"""Reads of policy proposals: the list to review, and the count the Policies page shows."""

from __future__ import annotations

from django.db.models import Case, IntegerField, QuerySet, Value, When

from governance.models import PolicyProposal


def proposal_list(*, state: str | None = None) -> QuerySet[PolicyProposal]:
    """Proposals, those waiting for a review first, each part newest first."""
    proposals = PolicyProposal.objects.select_related(
        "author",
        "reviewer",
        "queue",
        "share",
        "urgency",
        "reverts",
        "applied_change",
        "team",
        "subject",
    )
    if state:
        proposals = proposals.filter(state=state)
    pending = Case(
        When(state=PolicyProposal.State.PENDING, then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )
    return proposals.order_by(pending, "-created_at", "-id")


def pending_count() -> int:
    return PolicyProposal.objects.filter(state=PolicyProposal.State.PENDING).count()
