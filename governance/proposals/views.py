"""Policy proposals: what waits for another admin's review, and the review itself.

Thin: who may do what is core.rules; writes are governance.proposals.services.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from core import rules
from core.errors import InvalidInput, WrongState
from governance.models import PolicyProposal
from governance.policy.history_views import diff_rows, history_url_for
from governance.proposals import services
from governance.proposals.selectors import proposal_list

PER_PAGE = 20


def proposals(request):
    rules.require(request.user, "proposal.view")
    page = Paginator(proposal_list(), PER_PAGE).get_page(request.GET.get("page"))
    rows = [
        {
            "proposal": proposal,
            "diff": diff_rows(proposal.before, proposal.payload.get("after")),
            "can_review": rules.allowed(request.user, "proposal.review", proposal),
            "review_refusal": rules.refusal(request.user, "proposal.review", proposal),
            "can_withdraw": rules.allowed(request.user, "proposal.withdraw", proposal),
        }
        for proposal in page
    ]
    return render(request, "governance/policies/proposals.html", {"page_obj": page, "rows": rows})


def _proposal(request, pk: int) -> PolicyProposal:
    rules.require(request.user, "proposal.view")
    return get_object_or_404(PolicyProposal, pk=pk)


def _act(request, proposal: PolicyProposal, action, **kwargs):
    try:
        return action(actor=request.user, proposal=proposal, **kwargs)
    except (InvalidInput, WrongState) as error:
        for problem in error.messages():
            messages.error(request, f"Proposal #{proposal.pk}: {problem}.")
    return None


@require_POST
def proposal_approve(request, pk: int):
    proposal = _proposal(request, pk)
    rules.require(request.user, "proposal.review", proposal)
    done = _act(request, proposal, services.proposal_approve, note=request.POST.get("note", ""))
    if done is not None:
        change = done.applied_change
        messages.success(
            request,
            format_html(
                'Approved and applied proposal #{}. <a href="{}">See the change in the '
                "history</a>.",
                done.pk,
                history_url_for(change) if change else "",
            ),
        )
    return redirect("proposal-list")


@require_POST
def proposal_reject(request, pk: int):
    proposal = _proposal(request, pk)
    rules.require(request.user, "proposal.review", proposal)
    done = _act(request, proposal, services.proposal_reject, note=request.POST.get("note", ""))
    if done is not None:
        messages.success(request, f"Rejected proposal #{done.pk}; its author sees why.")
    return redirect("proposal-list")


@require_POST
def proposal_withdraw(request, pk: int):
    proposal = _proposal(request, pk)
    rules.require(request.user, "proposal.withdraw", proposal)
    done = _act(request, proposal, services.proposal_withdraw)
    if done is not None:
        messages.success(request, f"Withdrew proposal #{done.pk}.")
    return redirect("proposal-list")
