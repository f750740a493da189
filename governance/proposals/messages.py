"""What a page says about proposals, for every page whose write may become one (the
policy editors, urgency, history's revert and the proposals page itself), and where
such a page goes after the write."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import redirect

from governance.models import PolicyProposal

if TYPE_CHECKING:
    from governance.policy.services import PolicyWrite


def proposed_message(request, proposal: PolicyProposal) -> None:
    """What a page says when a write became a proposal."""
    messages.info(
        request,
        f"Proposed, waiting for another admin's review: {proposal.get_kind_display().lower()} "
        f"{proposal.object_repr} (proposal #{proposal.pk}). Nothing changes until it is "
        "approved.",
    )


def after_policy_write(
    request, write: PolicyWrite, *, applied: Callable[[PolicyWrite], str]
) -> HttpResponseRedirect:
    """Where a page goes after a policy write, and what it says: the one place a page tells
    an applied write from a proposed one. A proposal is announced and the proposals page
    shown (nothing changed yet); an applied write is told by `applied`, which adds its
    page's message and returns the address to show it at."""
    if write.proposal is not None:
        proposed_message(request, write.proposal)
        return redirect("proposal-list")
    return redirect(applied(write))
