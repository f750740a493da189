"""Teams: their leads and members, listed for policy readers, changed by admins with a
reason (governance.policy.membership), and proposed when changes need review."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods

from core import rules
from fleet.models import Team
from governance.policy.forms import TeamForm
from governance.policy.history_views import history_url_for
from governance.policy.services import PolicyError, PolicyWrite
from governance.proposals.messages import after_policy_write


def _teams():
    return Team.objects.prefetch_related("leads", "members")


def teams(request):
    rules.require(request.user, "policy.view")
    return render(request, "governance/teams/list.html", {"teams": _teams()})


@require_http_methods(["GET", "POST"])
def team_edit(request, pk: int | None = None):
    rules.require(request.user, "policy.edit")
    team = get_object_or_404(_teams(), pk=pk) if pk is not None else None
    form = TeamForm(request.POST or None, team=team)
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _team_saved(request, write)
            )
    return render(request, "governance/teams/edit.html", {"form": form, "team": team})


def _team_saved(request, write: PolicyWrite) -> str:
    team, change = write.applied, write.entry
    messages.success(
        request,
        format_html(
            "Saved team {}. {}",
            team.name,
            format_html('<a href="{}">See this change in the history</a>.', history_url_for(change))
            if change and rules.allowed(request.user, "history.view")
            else "",
        ),
    )
    return reverse("team-list") + f"#team-{team.pk}"
