"""What a page says about proposals, for every page whose write may become one (the
policy editors, urgency, history's revert and the proposals page itself)."""

from __future__ import annotations

from django.contrib import messages

from governance.models import PolicyProposal


def proposed_message(request, proposal: PolicyProposal) -> None:
    """What a page says when a write became a proposal."""
    messages.info(
        request,
        f"Proposed, waiting for another admin's review: {proposal.get_kind_display().lower()} "
        f"{proposal.object_repr} (proposal #{proposal.pk}). Nothing changes until it is "
        "approved.",
    )
