"""Urgency definitions: the shared reasons for exceptions, listed for everyone, edited by admins."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods

from core import rules
from fleet.models import UrgencyDefinition
from fleet.selectors import urgency_list
from governance.policy.forms import UrgencyForm
from governance.policy.history_views import history_url_for
from governance.policy.services import PolicyError, PolicyWrite, VersionConflict
from governance.policy.views import conflict_context, rebound_with_version
from governance.proposals.messages import after_policy_write

URGENCY_FIELDS = [
    "name",
    "meaning",
    "examples",
    "priority",
    "max_window_hours",
    "allowed_kinds",
    "invokers",
]


def urgencies(request):
    rules.require(request.user, "policy.view")
    return render(
        request,
        "governance/urgency/list.html",
        {
            "urgencies": urgency_list(),
            "kinds": dict(UrgencyDefinition.Kind.choices),
        },
    )


@require_http_methods(["GET", "POST"])
def urgency_edit(request, pk: int | None = None):
    rules.require(request.user, "policy.edit")
    urgency = get_object_or_404(urgency_list(), pk=pk) if pk is not None else None
    form = UrgencyForm(request.POST or None, urgency=urgency)
    conflict = None
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        except VersionConflict as error:
            conflict = conflict_context(error, obj=urgency, fields=URGENCY_FIELDS)
            form = UrgencyForm(
                rebound_with_version(request.POST, error.current_version), urgency=urgency
            )
            form.is_valid()
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _urgency_saved(request, write)
            )
    return render(
        request,
        "governance/urgency/edit.html",
        {"form": form, "urgency": urgency, "conflict": conflict},
    )


def _urgency_saved(request, write: PolicyWrite) -> str:
    urgency, change = write.applied, write.entry
    messages.success(
        request,
        format_html(
            "Saved the urgency definition {}: now version {}. {}",
            urgency.name,
            urgency.version,
            format_html(
                '<a href="{}">See this change in the history</a>.',
                history_url_for(change),
            )
            if change and rules.allowed(request.user, "history.view")
            else "",
        ),
    )
    return reverse("urgency-list") + f"#urgency-{urgency.pk}"
