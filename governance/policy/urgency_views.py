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
from governance.models import PolicyChange
from governance.policy.forms import UrgencyForm
from governance.policy.history_views import history_url_for
from governance.policy.services import PolicyWrite
from governance.policy.views import edit_with_conflicts


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

    def render_page(form, **extra):
        return render(
            request, "governance/urgency/edit.html", {"form": form, "urgency": urgency, **extra}
        )

    return edit_with_conflicts(
        request,
        form_for=lambda data: UrgencyForm(
            data, urgency=urgency_list().get(pk=pk) if pk is not None else None
        ),
        changes=PolicyChange.objects.filter(urgency=urgency)
        if urgency
        else PolicyChange.objects.none(),
        applied=lambda write: _urgency_saved(request, write),
        render_page=render_page,
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
